"""The host runner shared by every agent: schedule, evaluation, metrics, NaN guard, checkpoints, devices.

An agent is a pure pair in optax's shape (`Agent.init`, `Agent.update`), built for a wrapped
environment by a factory the agent's `train` passes to `run`. Everything else lives here once:
environment wrapping and sharding, the jitted chunk of training steps, the evaluation and metrics
schedule, `progress_fn` and `policy_params_fn`, orbax checkpoints with exact resume, and the
non-finite guard.

Determinism: training step `t` (a 64-bit index) draws its randomness from `fold_in(train_key, t)`,
so results do not depend on how steps are grouped into jitted chunks (evaluation intervals, metric
intervals, or a save/restore in between). The batch is sharded over devices along the environment
axis with `jax.sharding`; agents write every computation for the global batch, so 1, 2 or 4 devices
compute the same thing up to floating-point summation order. Under `jax.distributed` the mesh spans
every process's devices (`mesh_devices`); process 0 alone evaluates, reports and writes checkpoints.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import os
import pathlib
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Generic, NamedTuple, TypeVar

import brax_envs
import jax
import jax.numpy as jnp
import numpy as np
from brax_envs import wrappers
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from brax_train import acting, checkpoint, distributed, networks
from brax_train.types import Metrics, PRNGKey, UInt64

logger = logging.getLogger("brax_train.runner")

AXIS = "dev"
"""Name of the device axis the environment batch is sharded over."""

State = TypeVar("State")
Params = TypeVar("Params")

NONFINITE = "nonfinite"
"""Metric key of an update's non-finite code: 0 fine, else a key of `NONFINITE_QUANTITIES`."""
NONFINITE_QUANTITIES = {1: "loss", 2: "gradients", 3: "parameters", 4: "normalizer statistics"}
"""What a non-zero `NONFINITE` code names in `NonFiniteError`."""
ENV_STEPS = "env_steps"
"""Metric key of the environment steps an update consumed (agents with `Agent.counts_env_steps`)."""


def P(*axes: str | None) -> PartitionSpec:
    """A `PartitionSpec` (typed wrapper)."""
    return PartitionSpec(*axes)  # type: ignore[no-untyped-call]


def constrain(x: Any, sharding: Any) -> Any:
    """`jax.lax.with_sharding_constraint` (typed wrapper)."""
    return jax.lax.with_sharding_constraint(x, sharding)  # type: ignore[no-untyped-call]


def key_at(key: PRNGKey, index: UInt64) -> PRNGKey:
    """The key of training step (or env step) `index`: independent of how steps are chunked."""
    return jax.random.fold_in(jax.random.fold_in(key, index.hi), index.lo)


class TrainResult(NamedTuple):
    """What `train` returns: `make_policy, params, metrics = agent.train(...)`."""

    make_policy: Callable[..., Any]
    """`make_policy(params, deterministic=False) -> policy(obs, key) -> (action, extras)`."""
    params: Any
    """Final policy parameters (what `make_policy` and checkpoints take)."""
    metrics: dict[str, float]
    """Metrics of the last evaluation (or training-metrics report)."""


class NonFiniteError(FloatingPointError):
    """Training produced a non-finite loss, gradient or parameter; the message names step and checkpoint."""

    def __init__(self, message: str, *, step: int, quantity: str, last_checkpoint: str | None) -> None:
        """Record the offending env step, the quantity and the last good checkpoint."""
        super().__init__(message)
        self.step = step
        self.quantity = quantity
        self.last_checkpoint = last_checkpoint


@dataclasses.dataclass(frozen=True)
class Agent(Generic[State, Params]):
    """A training algorithm as a pure pair in optax's shape, plus what the runner needs to host it."""

    init: Callable[[PRNGKey], State]
    """`init(key) -> state`: fresh learner state; `key` is the same on every process."""
    update: Callable[[State, brax_envs.State, PRNGKey], tuple[State, brax_envs.State, dict[str, jax.Array]]]
    """`update(state, env_state, key) -> (state, env_state, metrics)`: one training step (traceable).

    Metrics are scalars averaged over the step, except `episode_count`, `episode_sum/*` (summed)
    and `NONFINITE` (an int code)."""
    policy_params: Callable[[State], Params]
    """The parameters `make_policy` takes (and checkpoints' `params` item holds)."""
    make_policy: Callable[..., Any]
    """`make_policy(params, deterministic=False) -> policy`."""
    env_steps_per_update: int
    """Environment steps (action repeats included) one `update` consumes."""
    warm_start: Callable[[State, Params], State]
    """`warm_start(state, params) -> state` starting from given policy parameters (fresh optimizer)."""
    full_resume: bool = True
    """Resume restores the whole state from a checkpoint; False: only `warm_start` from its params."""
    counts_env_steps: bool = False
    """`update`'s metrics carry `ENV_STEPS`, the environment steps it consumed (at most
    `env_steps_per_update`; ES and ARS count only steps of episodes still running, as Google Brax
    does), and the run follows that count: one update per jitted call until `num_timesteps`
    counted steps, evaluations every `num_timesteps / (num_evals - 1)` counted steps."""
    meta: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """JSON metadata stored in every checkpoint: `agent` (its name in `agents.AGENTS`, which
    `checkpoint.load` dispatches on), the network description, and what else rebuilding needs."""


class Setup(NamedTuple):
    """What the runner hands an agent factory: the wrapped training environment and its placement."""

    env: brax_envs.Env
    """The wrapped, batched training environment."""
    observation_size: brax_envs.ObservationSize
    """Its observation size (`brax_envs.observation_size_of`)."""
    state_shape: brax_envs.State
    """Abstract batched environment state (shapes, `info` keys)."""
    mesh: Mesh
    """The device mesh (one axis, `AXIS`)."""
    env_shardings: Any
    """Shardings of the environment state: the environment axis split over `AXIS`."""


MakeAgent = Callable[[Setup], Agent[Any, Any]]
"""`make_agent(setup) -> Agent`."""


class _Schedule(NamedTuple):
    """The run's schedule in training steps."""

    epoch: int  # between full resets
    eval: int  # between evaluations
    metrics: int  # between training-metric reports (0: none)
    chunk: int  # training steps per jitted call
    total: int  # training steps this call runs

    @staticmethod
    def of(c: Any, step: int, env_steps_per_update: int) -> _Schedule:
        resets = max(c.num_resets_per_eval, 1)
        intervals = max(c.num_evals - 1, 1)
        remaining = max(c.num_timesteps - step, 0)
        epoch = math.ceil(remaining / (intervals * env_steps_per_update * resets))
        metrics = 0
        if c.log_training_metrics:
            metrics = max(
                1, math.ceil((c.training_metrics_steps or env_steps_per_update) / env_steps_per_update)
            )
        chunk = math.gcd(epoch, metrics) if metrics else epoch
        return _Schedule(epoch, epoch * resets, metrics, chunk, intervals * epoch * resets)


def final_step(c: Any, start_step: int, env_steps_per_update: int, counts_env_steps: bool = False) -> int:
    """The env step a run from `start_step` stops at: `num_timesteps` rounded up to whole eval intervals
    (for agents that count their env steps, `num_timesteps`: they overshoot it by less than an update)."""
    if counts_env_steps:
        return max(start_step, int(c.num_timesteps))
    return start_step + _Schedule.of(c, start_step, env_steps_per_update).total * env_steps_per_update


def wrap_env(
    environment: brax_envs.Env, c: Any, num_envs: int, key: PRNGKey, per_episode: bool = False
) -> brax_envs.Env:
    """Training/eval wrapping as in Brax: `randomization_fn` gets one key per environment as `rng=`.

    Once per run the keys are split from `key` here; with `per_episode` the wrappers pass each
    reset's keys instead (`key` is unused, so the once-per-run key stream is unchanged).
    """
    if not c.wrap_env:
        return environment
    randomization_fn = None
    if c.randomization_fn is not None:
        randomization_fn = (
            c.randomization_fn
            if per_episode
            else functools.partial(c.randomization_fn, rng=jax.random.split(key, num_envs))
        )
    assert c.episode_length is not None
    if c.wrap_env_fn is not None:
        env: brax_envs.Env = c.wrap_env_fn(
            environment,
            episode_length=c.episode_length,
            action_repeat=c.action_repeat,
            randomization_fn=randomization_fn,
        )
        return env
    return wrappers.wrap_for_training(
        environment,
        episode_length=c.episode_length,
        action_repeat=c.action_repeat,
        randomization_fn=randomization_fn,
        randomize_per_episode=per_episode,
    )


class _PerDevice(brax_envs.Wrapper):
    """The batched environment run as one program per device (`jax.shard_map` over `AXIS`).

    Under automatic partitioning, a physics step's while loops (the constraint solver's iterations)
    loop as long as any environment of the whole batch needs to, deciding that with a cross-device
    reduction every iteration; per device, each device's loops end with its own environments and
    nothing is communicated. Every state leaf is batched along axis 0 (checked when wrapping).
    """

    def __init__(self, env: brax_envs.Env, mesh: Mesh) -> None:
        super().__init__(env)
        split = P(AXIS)
        # check_vma off: a step also outputs per-environment copies of model constants (contact
        # pair data), which the replication checker cannot see as varying like their inputs.
        self._reset = jax.shard_map(env.reset, mesh=mesh, in_specs=split, out_specs=split, check_vma=False)
        self._step = jax.shard_map(
            env.step, mesh=mesh, in_specs=(split, split), out_specs=split, check_vma=False
        )

    def reset(self, rng: jax.Array) -> brax_envs.State:
        """Reset every environment, each device its own."""
        state: brax_envs.State = self._reset(rng)
        return state

    def step(self, state: brax_envs.State, action: jax.Array) -> brax_envs.State:
        """Step every environment, each device its own."""
        out: brax_envs.State = self._step(state, action)
        return out


def per_device(env: brax_envs.Env, state_shape: brax_envs.State, num_envs: int, mesh: Mesh) -> brax_envs.Env:
    """`env` (batched, `num_envs`) stepped per device when that is exact: every state leaf batched on
    axis 0 and more than one device; else `env` itself."""
    leaves = jax.tree.leaves(state_shape)
    if mesh.devices.size == 1 or not all(x.ndim >= 1 and x.shape[0] == num_envs for x in leaves):
        return env
    return _PerDevice(env, mesh)


def _env_shardings(tree: Any, num_envs: int, mesh: Mesh) -> Any:
    shard, repl = NamedSharding(mesh, P(AXIS)), NamedSharding(mesh, P())
    # Zero-size leaves (a model without contacts) leave a jitted chunk replicated whatever they
    # came in as; giving them that sharding from the start keeps the next chunk from recompiling.
    return jax.tree.map(lambda x: shard if x.ndim >= 1 and x.shape[0] == num_envs and x.size else repl, tree)


def local_devices(c: Any) -> list[jax.Device]:
    """The local devices a run uses (`max_devices_per_host` caps them)."""
    local: list[jax.Device] = jax.local_devices()
    return local[: min(len(local), c.max_devices_per_host or len(local))]


def mesh_devices(c: Any) -> list[jax.Device]:
    """Every process's devices a run uses, process by process (`max_devices_per_host` caps each)."""
    by_process: dict[int, list[jax.Device]] = {}
    for d in jax.devices():
        by_process.setdefault(d.process_index, []).append(d)
    cap = c.max_devices_per_host
    return [d for p in sorted(by_process) for d in by_process[p][: cap or len(by_process[p])]]


class _Keys(NamedTuple):
    agent: PRNGKey
    train: PRNGKey
    env: PRNGKey
    eval: PRNGKey
    reset: PRNGKey


def _keys(seed: int) -> _Keys:
    # The same on every process: the batch is one global array over all processes' devices, so
    # 2 processes x 2 devices draw what 1 process x 4 devices draws. (Folding in 0 keeps the key
    # stream of the first release, which folded in the process index.)
    global_key, run_key = jax.random.split(jax.random.PRNGKey(seed))
    train_key, key_env, eval_key, reset_key = jax.random.split(jax.random.fold_in(run_key, 0), 4)
    return _Keys(global_key, train_key, key_env, eval_key, reset_key)


@dataclasses.dataclass
class _Run:
    """The host side of a run: devices, environments, the agent and its mutable progress."""

    c: Any
    devices: list[jax.Device]
    mesh: Mesh
    keys: _Keys
    env: brax_envs.Env
    env_shardings: Any
    reset_fn: Callable[[jax.Array], brax_envs.State]
    agent: Agent[Any, Any]
    state: Any
    env_state: brax_envs.State
    train_key: PRNGKey
    step: int = 0
    index: int = 0  # of the next training step (its randomness and resets are keyed by it)
    last_checkpoint: str | None = None
    observation_size: brax_envs.ObservationSize = 0
    chunk_fn: Any = None  # the jitted chunk of training steps (`_chunk_fn`), one per run: its cache
    ahead: threading.Thread | None = None  # compiling the first chunk (`_compile_ahead`), or None

    def reset(self, index: int) -> None:
        """Full reset of every training environment, keyed by training-step index."""
        keys = jax.random.split(key_at(self.keys.reset, UInt64.from_int(index)), self.c.num_envs)
        self.env_state = self.reset_fn(jax.device_put(keys, NamedSharding(self.mesh, P(AXIS))))

    def params(self) -> Any:
        """The agent's current policy parameters."""
        return self.agent.policy_params(self.state)


def _setup(environment: brax_envs.Env, c: Any, make_agent: MakeAgent) -> _Run:
    devices = mesh_devices(c)
    mesh = Mesh(np.array(devices), (AXIS,))
    keys = _keys(c.seed)
    key_rand, key_reset0 = jax.random.split(keys.env)
    env = wrap_env(environment, c, c.num_envs, key_rand, per_episode=c.randomize_per_episode)
    # JAX traces the batched reset once when the shapes below come from the function and argument
    # placement that the reset's call uses: another bound-method object of `env.reset`, or keys placed
    # otherwise, miss jit's trace cache and trace the reset (physics init included) again.
    reset_keys = jax.device_put(jax.random.split(key_reset0, c.num_envs), NamedSharding(mesh, P(AXIS)))
    reset = env.reset
    state_shape = jax.eval_shape(reset, reset_keys)
    if c.randomization_fn is None or c.randomize_per_episode:
        # (a once-per-run randomization closes over the batch of systems, which would not split)
        env = per_device(env, state_shape, c.num_envs, mesh)
        reset = env.reset if isinstance(env, _PerDevice) else reset
    env_shardings = _env_shardings(state_shape, c.num_envs, mesh)
    reset_fn = jax.jit(reset, out_shardings=env_shardings)
    one_obs = jax.eval_shape(lambda obs: jax.tree.map(lambda x: x[0], obs), state_shape.obs)
    obs_size = brax_envs.observation_size_of(one_obs)
    agent = make_agent(Setup(env, obs_size, state_shape, mesh, env_shardings))
    # one program: op by op, a network's initializers compile a dozen small XLA programs
    agent_state = jax.jit(agent.init)(keys.agent)
    chunk_fn = _chunk_fn(mesh, agent.update, env_shardings)
    ahead = None
    if c.restore_checkpoint_path is None and c.num_timesteps > 0:
        # A fresh run's first chunk is known from shapes alone: compile it while the reset compiles.
        repl = NamedSharding(mesh, P())
        abstract = (
            _abstract(agent_state, repl),
            jax.tree.map(_abstract, state_shape, env_shardings),
            _abstract(keys.train, repl),
            jax.device_put(UInt64.from_int(0), repl),
        )
        ahead = _compile_ahead(c, chunk_fn, abstract, _first_chunk(c, agent, 0))
    env_state = reset_fn(reset_keys)
    run = _Run(
        c,
        devices,
        mesh,
        keys,
        env,
        env_shardings,
        reset_fn,
        agent,
        agent_state,
        env_state,
        keys.train,
        observation_size=obs_size,
        chunk_fn=chunk_fn,
        ahead=ahead,
    )
    if c.restore_checkpoint_path is not None:
        _restore(run)
    return run


def _restore(run: _Run) -> None:
    step_dir = checkpoint.resolve(run.c.restore_checkpoint_path)
    run.last_checkpoint = os.fspath(step_dir)
    meta = checkpoint.read_meta(step_dir)
    our_agent, their_agent = run.agent.meta.get("agent", "ppo"), meta.get("agent", "ppo")
    if our_agent != their_agent:
        raise checkpoint.CheckpointMismatchError(
            f"{step_dir}: the checkpoint was written by agent {their_agent!r}, this run trains {our_agent!r}"
        )
    ours, theirs = run.agent.meta.get("network", {}), meta.get("network", {})
    if ours and theirs and ours.get("kwargs") != theirs.get("kwargs"):
        raise checkpoint.CheckpointMismatchError(
            f"{step_dir}: the checkpoint's networks differ from this run's: {theirs.get('kwargs')} vs "
            f"{ours.get('kwargs')}"
        )
    params = checkpoint.restore_item(step_dir, "params", run.params())
    if not run.agent.full_resume:
        logger.info("warm start from the policy in %s (everything else starts fresh)", step_dir)
        run.state = run.agent.warm_start(run.state, params)
        return
    target = {"agent_state": run.state, "train_key": run.train_key, "env_state": run.env_state}
    try:
        restored = checkpoint.restore_item(step_dir, "train_state", target)
    except checkpoint.CheckpointMismatchError as e:
        logger.warning("%s; resuming with fresh optimizer state and environments", e)
        restored = {**target, "agent_state": run.agent.warm_start(run.state, params)}
    run.state = restored["agent_state"]
    run.train_key = restored["train_key"]
    run.env_state = jax.device_put(restored["env_state"], run.env_shardings)
    run.step = int(meta["step"])
    run.index = int(meta.get("training_step", run.step // run.agent.env_steps_per_update))
    logger.info("resuming from %s at env step %d", step_dir, run.step)


def _chunk_fn(mesh: Mesh, update: Callable[..., Any],
              env_shardings: Any) -> Callable[..., tuple[Any, brax_envs.State, dict[str, jax.Array]]]:
    """The jitted scan of `length` training steps of `update` starting at index `first`."""
    repl = NamedSharding(mesh, P())

    def chunk(
        s: Any, env_state: brax_envs.State, key_base: PRNGKey, first: UInt64, length: int
    ) -> tuple[Any, brax_envs.State, dict[str, jax.Array]]:
        def body(carry: tuple[Any, brax_envs.State], i: jax.Array) -> tuple[Any, dict[str, jax.Array]]:
            s, env_state = carry
            s, env_state, metrics = update(s, env_state, key_at(key_base, first.add(i)))
            return (s, env_state), metrics

        (s, env_state), metrics = jax.lax.scan(body, (s, env_state), jnp.arange(length, dtype=jnp.uint32))
        s = constrain(s, jax.tree.map(lambda _: repl, s))
        env_state = constrain(env_state, env_shardings)
        # replicated, so that every process can read them (another process's shard cannot be)
        return s, env_state, constrain(metrics, jax.tree.map(lambda _: repl, metrics))

    # The state and env state are donated on every platform (XLA reuses their buffers for the new
    # ones), so CPU runs exercise what accelerators need: no two leaves sharing a buffer, and no
    # reference to a donated array kept past the call.
    donate = (0, 1)
    return jax.jit(chunk, static_argnames=("length",), donate_argnums=donate)


def _abstract(x: Any, sharding: Any) -> Any:
    """`x` (a pytree of arrays or shape structs) as shape structs placed by `sharding`."""
    def one(a: Any) -> Any:
        return jax.ShapeDtypeStruct(  # type: ignore[no-untyped-call]
            a.shape, a.dtype, sharding=sharding, weak_type=a.weak_type
        )

    return jax.tree.map(one, x)


def _first_chunk(c: Any, agent: Agent[Any, Any], step: int) -> int:
    """Training steps in the first jitted chunk of a run from env step `step` (the clocks' rule)."""
    if agent.counts_env_steps:
        return 1
    return _Schedule.of(c, step, agent.env_steps_per_update).chunk


def _compile_ahead(c: Any, chunk_fn: Any, args: tuple[Any, ...], length: int) -> threading.Thread:
    """Compile `chunk_fn(*args, length=length)` on a worker thread; join it before that call.

    XLA's compiler releases the GIL, so the chunk, the largest program of a run (with its own copy
    of the physics step), compiles while this thread traces and compiles the reset and the
    evaluation and runs them. The program lands in `jax.jit`'s cache, where the chunk's first call
    finds it; `args` may be shape structs carrying the shardings the real arguments will have. The
    worker enters the run's matmul precision as `run` does (a thread-local setting that is part of
    that cache's key). A failure here is left to the real call to raise, where it happens without
    the worker. A daemon thread: an interrupted run does not wait for it to exit.
    """
    precision = c.matmul_precision

    def work() -> None:
        try:
            with jax.default_matmul_precision(precision):
                chunk_fn.lower(*args, length=length).compile()
        except Exception:  # the first chunk's own call compiles again and raises
            logger.debug("compiling the first chunk ahead failed", exc_info=True)

    thread = threading.Thread(target=work, name="brax_train_compile", daemon=True)
    thread.start()
    return thread


def _evaluator(run: _Run, environment: brax_envs.Env) -> acting.Evaluator | None:
    c = run.c
    if not (c.num_evals > 0 and c.run_evals and distributed.is_primary()):
        return None
    # Evaluation measures each eval env's first episode only (`EvalWrapper`), so re-drawing at
    # auto-resets would never be seen there: it keeps the once-per-run draw of `num_eval_envs` systems.
    eval_env = wrap_env(c.eval_env or environment, c, c.num_eval_envs, jax.random.fold_in(run.keys.eval, 1))
    assert c.episode_length is not None
    return acting.Evaluator(
        eval_env,
        functools.partial(run.agent.make_policy, deterministic=c.deterministic_eval),
        num_eval_envs=c.num_eval_envs,
        episode_length=c.episode_length,
        action_repeat=c.action_repeat,
        key=run.keys.eval,
    )


def _local_copy(x: Any) -> Any:
    """A replicated array of a multi-process mesh as this process's copy on one local device."""
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
        if not x.is_fully_replicated:
            raise ValueError(f"an array of shape {x.shape} sharded across processes has no local copy")
        return x.addressable_data(0)
    return x


class _Host:
    """Evaluation, reporting and checkpointing of one run (host side, no tracing).

    In a multi-process run only the primary process evaluates, reports, calls `policy_params_fn` and
    writes checkpoints; every process takes part in gathering the state a checkpoint holds.
    """

    def __init__(self, run: _Run, environment: brax_envs.Env) -> None:
        self.run = run
        self.primary = distributed.is_primary()
        self.evaluator = _evaluator(run, environment)
        c = run.c
        self.saver = None
        if c.save_checkpoint_path is not None and self.primary:
            self.saver = checkpoint.Saver(c.save_checkpoint_path, max_to_keep=c.checkpoint_max_to_keep)
        shapes = networks.observation_size_to_json(networks.observation_shapes(run.observation_size))
        self.meta = {
            "config": c.to_json(),
            **run.agent.meta,
            "env_steps_per_training_step": run.agent.env_steps_per_update,
            "observation_shapes": shapes,
            "action_size": run.env.action_size,
        }

    def save(self, at_step: int) -> None:
        """Write a checkpoint of the current state at env step `at_step` (a collective when multi-process)."""
        run = self.run
        if run.c.save_checkpoint_path is None:
            return
        meta = {**self.meta, "step": at_step, "training_step": run.index}
        params = run.params()
        train_state = {"agent_state": run.state, "train_key": run.train_key, "env_state": run.env_state}
        if jax.process_count() > 1:  # the environment state is sharded across processes: gather it
            params, train_state = distributed.to_host((params, train_state))
        if self.saver is not None:
            run.last_checkpoint = os.fspath(self.saver.save(at_step, params, train_state, meta))
        distributed.barrier(f"brax_train.runner.save.{at_step}")
        if self.saver is None:
            directory = pathlib.Path(run.c.save_checkpoint_path).absolute()
            run.last_checkpoint = os.fspath(directory / str(at_step))

    def evaluate(self, at_step: int, training_metrics: dict[str, float]) -> dict[str, float]:
        """Evaluation metrics at `at_step` merged with `training_metrics`."""
        if self.evaluator is None:
            return dict(training_metrics)
        key = key_at(jax.random.fold_in(self.run.keys.eval, 2), UInt64.from_int(at_step))
        local = next(d for d in self.run.devices if d.process_index == jax.process_index())
        params = jax.device_put(jax.tree.map(_local_copy, self.run.params()), local)
        return self.evaluator.run_evaluation(params, training_metrics, key)

    def report(self, at_step: int, metrics: Metrics) -> None:
        """Log and pass to `progress_fn`."""
        logger.info("step %d: %s", at_step, metrics)
        if self.run.c.progress_fn is not None and self.primary:
            self.run.c.progress_fn(at_step, metrics)

    def policy_params(self, at_step: int) -> None:
        """Call `policy_params_fn(step, make_policy, params)` if given."""
        if self.run.c.policy_params_fn is not None and self.primary:
            # A copy: the next training step donates the state's buffers, and the callback may keep
            # what it is given (a list of snapshots, an exporter running later).
            params = jax.tree.map(jnp.copy, self.run.params())
            self.run.c.policy_params_fn(at_step, self.run.agent.make_policy, params)

    def close(self) -> None:
        """Finish pending checkpoint writes."""
        if self.saver is not None:
            self.saver.close()


class _Window:
    """Sums of per-step metrics between two reports."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.steps = 0
        self.env_steps = 0
        self.seconds = 0.0

    def add(self, m: Mapping[str, Any], steps: int, env_steps: int, seconds: float) -> None:
        for k, v in m.items():
            self.sums[k] = self.sums.get(k, 0.0) + float(np.sum(np.asarray(v, np.float64)))
        self.steps += steps
        self.env_steps += env_steps
        self.seconds += seconds

    def metrics(self, walltime: float) -> dict[str, float]:
        """`training/*` means per step and `episode/*` means per finished episode."""
        out: dict[str, float] = {}
        count = self.sums.get("episode_count", 0.0)
        for k, v in self.sums.items():
            if k.startswith("episode_sum/"):
                if count > 0:
                    out["episode/" + k.removeprefix("episode_sum/")] = v / count
            elif k != "episode_count":
                out["training/" + k] = v / max(self.steps, 1)
        out["episode/count"] = count
        sps = self.env_steps / self.seconds if self.seconds > 0 else float("inf")
        out["training/sps"] = sps
        out["training/walltime"] = walltime
        return out


def _check_finite(m: dict[str, Any], run: _Run, env_steps_per_update: int) -> None:
    codes = np.asarray(m.pop(NONFINITE, 0))
    if np.any(codes):
        i = int(np.argmax(np.ravel(codes) > 0))
        quantity = NONFINITE_QUANTITIES[int(np.ravel(codes)[i])]
        at = run.step + (i + 1) * env_steps_per_update
        where = run.last_checkpoint if run.last_checkpoint is not None else "none (no checkpoint saved yet)"
        raise NonFiniteError(
            f"non-finite {quantity} in the training step ending at env step {at} (training stopped); "
            f"last good checkpoint: {where}",
            step=at,
            quantity=quantity,
            last_checkpoint=run.last_checkpoint,
        )


class _FixedClock:
    """The schedule of agents whose updates consume a fixed number of env steps: chunks of updates."""

    def __init__(self, c: Any, run: _Run) -> None:
        self.per_update = run.agent.env_steps_per_update
        self.sched = _Schedule.of(c, run.step, self.per_update)
        self.chunk, self.done, self.reset = self.sched.chunk, 0, c.num_resets_per_eval > 0

    def finished(self, run: _Run) -> bool:
        return self.done >= self.sched.total

    def advance(self, run: _Run, m: dict[str, Any]) -> tuple[int, bool, bool, bool]:
        """Account a finished chunk: (env steps, at a metrics report, at an evaluation, at a reset)."""
        self.done += self.chunk
        sched, done = self.sched, self.done
        at_metrics = bool(sched.metrics) and done % sched.metrics == 0
        return self.chunk * self.per_update, at_metrics, done % sched.eval == 0, done % sched.epoch == 0


class _CountedClock:
    """The schedule of agents that count their env steps (`Agent.counts_env_steps`), as Google Brax's ES."""

    def __init__(self, c: Any, run: _Run) -> None:
        self.chunk, self.reset, self.target = 1, False, c.num_timesteps
        self.between = max(1, math.ceil(max(c.num_timesteps - run.step, 0) / max(c.num_evals - 1, 1)))
        self.next_eval = run.step + self.between
        self.every = 0
        if c.log_training_metrics:
            self.every = max(1, c.training_metrics_steps or run.agent.env_steps_per_update)
        self.next_metrics = run.step + self.every

    def finished(self, run: _Run) -> bool:
        return bool(run.step >= self.target)

    def advance(self, run: _Run, m: dict[str, Any]) -> tuple[int, bool, bool, bool]:
        """Account a finished update: (env steps, at a metrics report, at an evaluation, at a reset)."""
        counted = int(np.sum(m.pop(ENV_STEPS)))
        now = run.step + counted
        at_eval = now >= min(self.next_eval, self.target)
        at_metrics = bool(self.every) and now >= self.next_metrics
        while self.next_eval <= now:
            self.next_eval += self.between
        while self.every and self.next_metrics <= now:
            self.next_metrics += self.every
        return counted, at_metrics, at_eval, False


def _loop(run: _Run, host: _Host) -> dict[str, float]:
    """Run the schedule: chunks of training steps, resets, reports, evaluations and checkpoints."""
    c = run.c
    clock = _CountedClock(c, run) if run.agent.counts_env_steps else _FixedClock(c, run)
    chunk_fn = run.chunk_fn
    repl = NamedSharding(run.mesh, P())
    metrics: dict[str, float] = {}
    ahead, run.ahead = run.ahead, None
    if c.num_evals > 1 and host.evaluator is not None:
        if ahead is None and not clock.finished(run):  # a resumed run: compile during the evaluation
            args = (run.state, run.env_state, run.train_key, jax.device_put(UInt64.from_int(run.index), repl))
            ahead = _compile_ahead(c, chunk_fn, args, clock.chunk)
        metrics = host.evaluate(run.step, {})
        host.report(run.step, metrics)
    host.policy_params(run.step)
    if ahead is not None:
        ahead.join()
    window, training_metrics, walltime, first_chunk = _Window(), {}, 0.0, True
    while not clock.finished(run):
        t0 = time.perf_counter()
        first = jax.device_put(UInt64.from_int(run.index), repl)
        state, env_state, key = run.state, run.env_state, run.train_key
        run.state, run.env_state, m = chunk_fn(state, env_state, key, first, length=clock.chunk)
        m = jax.device_get(m)
        dt = time.perf_counter() - t0
        if first_chunk:
            logger.info("first chunk (compile + run) took %.1f s", dt)
            first_chunk = False
        walltime += dt
        env_steps, at_metrics, at_eval, at_reset = clock.advance(run, m)
        _check_finite(m, run, env_steps // clock.chunk)
        run.index += clock.chunk
        run.step += env_steps
        window.add(m, clock.chunk, env_steps, dt)
        training_metrics = window.metrics(walltime)
        if clock.reset and at_reset:
            run.reset(run.index)
        if at_metrics:
            host.report(run.step, training_metrics)
        if at_metrics or at_eval:
            window = _Window()
        if at_eval:
            host.policy_params(run.step)
            host.save(run.step)
            metrics = host.evaluate(run.step, training_metrics) if c.num_evals > 0 else training_metrics
            if c.num_evals > 0:
                host.report(run.step, metrics)
        elif at_metrics and c.num_evals == 0:
            host.save(run.step)
            metrics = training_metrics
    return metrics


def run(environment: brax_envs.Env, c: Any, make_agent: MakeAgent) -> TrainResult:
    """Train the agent `make_agent` builds on `environment` under the run settings of config `c`.

    `c` is an agent's validated config (a `RunConfig` subclass). A `restore_params` field, when the
    agent's config has one and it is set, replaces the starting policy through `Agent.warm_start`
    after any checkpoint restore (Brax's precedence). Returns the final policy.
    """
    t_start = time.perf_counter()
    with jax.default_matmul_precision(c.matmul_precision):
        r = _setup(environment, c, make_agent)
        if getattr(c, "restore_params", None) is not None:
            r.state = r.agent.warm_start(r.state, c.restore_params)
        r.state = jax.device_put(r.state, NamedSharding(r.mesh, P()))
        r.train_key = jax.device_put(r.train_key, NamedSharding(r.mesh, P()))
        if c.num_timesteps == 0:
            return TrainResult(r.agent.make_policy, jax.tree.map(_local_copy, r.params()), {})
        distributed.watch_peers(lambda: r.last_checkpoint)
        host = _Host(r, environment)
        try:
            metrics = _loop(r, host)
            distributed.barrier("brax_train.runner.end")
        except jax.errors.JaxRuntimeError:
            distributed.settle()  # a failed collective: let the watchdog name a lost peer first
            raise
        finally:
            host.close()
            distributed.unwatch_peers()
    logger.info("trained to env step %d in %.1f s", r.step, time.perf_counter() - t_start)
    return TrainResult(r.agent.make_policy, jax.tree.map(_local_copy, r.params()), metrics)


def log_devices(c: Any, name: str) -> None:
    """Log the devices and processes a run of agent `name` uses."""
    devices = local_devices(c)
    logger.info(
        "brax_train.%s: matmul precision %r; %d of %d local devices (%s); %d process(es), %d devices in all",
        name,
        c.matmul_precision,
        len(devices),
        jax.local_device_count(),
        ", ".join(str(d) for d in devices),
        jax.process_count(),
        len(mesh_devices(c)),
    )


def train(
    environment: brax_envs.Env,
    c: Any,
    validate: Callable[[Any, int], None],
    make_agent: Callable[[Any, Setup], Agent[Any, Any]],
    name: str,
) -> TrainResult:
    """An agent's `train` after merging its settings: check, validate for the devices, log, `run`.

    `validate(c, device_count)` raises the agent's `ConfigError` before anything compiles;
    `make_agent(c, setup)` builds the agent; `name` names it in the log.
    """
    if not isinstance(environment, brax_envs.Env):
        raise TypeError(f"environment must be a brax_envs.Env, got {type(environment).__name__}")
    validate(c, len(mesh_devices(c)))
    log_devices(c, name)
    return run(environment, c, functools.partial(make_agent, c))


__all__ = [
    "AXIS",
    "ENV_STEPS",
    "NONFINITE",
    "NONFINITE_QUANTITIES",
    "Agent",
    "MakeAgent",
    "NonFiniteError",
    "Setup",
    "TrainResult",
    "constrain",
    "final_step",
    "key_at",
    "local_devices",
    "log_devices",
    "mesh_devices",
    "per_device",
    "run",
    "train",
    "wrap_env",
]
