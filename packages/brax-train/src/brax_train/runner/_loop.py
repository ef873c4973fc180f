"""Setting a run up (environment, agent, restore), the jitted chunk of training steps, compiling it
ahead, and the loop that runs the schedule: `run`, and `train` as an agent's `train` calls it.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import brax_envs
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding

from brax_train import checkpoint, distributed
from brax_train.config import RunConfig
from brax_train.runner._agent import Agent, MakeAgent, Setup, TrainResult, key_at
from brax_train.runner._host import _check_finite, _Host, _keys, _local_copy, _Run, _Window
from brax_train.runner._schedule import _CountedClock, _first_chunk, _FixedClock
from brax_train.runner._sharding import (
    AXIS,
    P,
    _env_shardings,
    _PerDevice,
    constrain,
    log_devices,
    mesh_devices,
    per_device,
    wrap_env,
)
from brax_train.types import PRNGKey, UInt64

logger = logging.getLogger("brax_train.runner")


def _setup(environment: brax_envs.Env, c: RunConfig, make_agent: MakeAgent) -> _Run:
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
    assert run.c.restore_checkpoint_path is not None
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


def _compile_ahead(c: RunConfig, chunk_fn: Any, args: tuple[Any, ...], length: int) -> threading.Thread:
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


def run(environment: brax_envs.Env, c: RunConfig, make_agent: MakeAgent) -> TrainResult:
    """Train the agent `make_agent` builds on `environment` under the run settings of config `c`.

    `c` is an agent's validated config (a `RunConfig` subclass). A `restore_params` field, when the
    agent's config has one and it is set, replaces the starting policy through `Agent.warm_start`
    after any checkpoint restore (Brax's precedence). Returns the final policy.
    """
    t_start = time.perf_counter()
    with jax.default_matmul_precision(c.matmul_precision):
        r = _setup(environment, c, make_agent)
        restore_params = getattr(c, "restore_params", None)
        if restore_params is not None:
            r.state = r.agent.warm_start(r.state, restore_params)
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


C = TypeVar("C", bound=RunConfig)


def train(
    environment: brax_envs.Env,
    c: C,
    validate: Callable[[C, int], None],
    make_agent: Callable[[C, Setup], Agent[Any, Any]],
    name: str,
    resolve: Callable[[C], C] | None = None,
) -> TrainResult:
    """An agent's `train` after merging its settings: check, validate for the devices, log, `run`.

    `validate(c, device_count)` raises the agent's `ConfigError` before anything compiles;
    `resolve(c)`, when given, derives the settings the run uses from the validated ones;
    `make_agent(c, setup)` builds the agent; `name` names it in the log.
    """
    if not isinstance(environment, brax_envs.Env):
        raise TypeError(f"environment must be a brax_envs.Env, got {type(environment).__name__}")
    validate(c, len(mesh_devices(c)))
    if resolve is not None:
        c = resolve(c)
    log_devices(c, name)
    return run(environment, c, functools.partial(make_agent, c))
