"""Behaviour cloning with DAgger relabelling as a pure `(init, update)` pair hosted by the shared runner.

One `update` is one DAgger step (Google Brax's online DAgger): every training environment is rolled
out `demo_length` steps, at each step the teacher acting with probability `beta =
dagger_beta_fn(dagger_step)` and the (deterministic) student otherwise; the teacher labels every
visited observation with its deterministic action; the observation statistics are updated; then
`epochs` shuffled passes of minibatch Adam regress the student's squashed mean `tanh(loc)` onto the
labels (squared error summed over action dimensions, averaged over the minibatch). As in Brax, each
step fits the data it just collected.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
from collections.abc import Mapping
from typing import Any

import brax_envs
import brax_math
import jax
import jax.numpy as jnp
import optax  # type: ignore[import-untyped]  # this optax ships no py.typed
from jax.sharding import Mesh, NamedSharding

from brax_train import _learner, checkpoint, networks, runner, running_statistics
from brax_train.bc import networks as bc_networks
from brax_train.bc.config import (
    BCConfig,
    BCConfigError,
    env_steps_per_update,
    merge,
    num_minibatches,
    resolve,
    validate,
)
from brax_train.runner import AXIS, NONFINITE, NonFiniteError, P, TrainResult, constrain
from brax_train.types import Observation, Policy, PRNGKey

logger = logging.getLogger("brax_train.bc")


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class TrainingState(_learner.PolicyState):
    """Device-side learner state: the student policy's (`params`), and the DAgger steps done."""

    dagger_step: jax.Array
    """() int32 DAgger steps done (what `dagger_beta_fn` reads)."""


def public_params(s: TrainingState) -> bc_networks.BCParams:
    """The student's parameters of a training state (what `make_policy` and checkpoints take)."""
    return bc_networks.BCParams(normalizer=s.normalizer, policy=s.params)


def teacher_label(action: jax.Array, extras: Mapping[str, Any]) -> jax.Array:
    """The regression target of a teacher step: `tanh(extras['loc'])` when given (Brax), else `action`."""
    if "loc" in extras:
        return jnp.tanh(extras["loc"])
    return action


def bc_loss(
    params: Any, normalizer: Any, obs: Observation, labels: jax.Array, net: bc_networks.BCNetworks
) -> jax.Array:
    """Mean over the batch of `sum((tanh(loc) - labels)**2)` over action dimensions; `labels` (B, A)."""
    loc = net.parametric_action_distribution.create_dist(
        net.policy_network.apply(normalizer, params, obs)
    ).loc
    return jnp.mean(jnp.sum(jnp.square(jnp.tanh(loc) - labels), axis=-1))


@dataclasses.dataclass(frozen=True)
class _BC:
    """The pieces of one BC run that the update closes over (static under `jit`)."""

    c: BCConfig
    env: brax_envs.Env
    net: bc_networks.BCNetworks
    teacher: Policy
    optimizer: Any
    mesh: Mesh
    env_shardings: Any
    scramble: bool

    def collect(
        self, s: TrainingState, env_state: brax_envs.State, key: PRNGKey, beta: jax.Array
    ) -> tuple[brax_envs.State, tuple[Any, jax.Array], dict[str, jax.Array]]:
        """Roll out with the teacher/student mixture; returns `(obs, labels)` flattened to (N * T, ...)."""
        c = self.c
        assert c.demo_length is not None
        student = bc_networks.make_inference_fn(self.net, c.tanh_squash)(public_params(s))

        def body(
            carry: tuple[brax_envs.State, PRNGKey], _: None
        ) -> tuple[tuple[brax_envs.State, PRNGKey], tuple[Any, ...]]:
            st, k = carry
            k, k_turn, k_teacher = jax.random.split(k, 3)
            t_action, t_extras = self.teacher(st.obs, k_teacher)
            s_action, _s_extras = student(st.obs, k)
            turn = jax.random.bernoulli(k_turn, beta, (t_action.shape[0], 1))
            nst = self.env.step(st, jnp.where(turn, t_action, s_action))
            info = {n: nst.info[n] for n in ("episode_done", "episode_metrics") if n in nst.info}
            return (nst, k), (st.obs, teacher_label(t_action, t_extras), nst.reward, turn, info)

        (env_state, _), (obs, labels, reward, turn, info) = jax.lax.scan(
            body, (env_state, key), None, length=c.demo_length
        )
        env_state = constrain(env_state, self.env_shardings)
        # (T, N, ...) -> (N * T, ...): environment-major, so the leading axis stays sharded by env.
        flat = jax.tree.map(lambda x: jnp.reshape(jnp.swapaxes(x, 0, 1), (-1, *x.shape[2:])), (obs, labels))
        flat = constrain(flat, jax.tree.map(lambda _: NamedSharding(self.mesh, P(AXIS)), flat))
        metrics = {
            "reward_mean": jnp.mean(reward),
            "reward_std": jnp.std(reward),
            "teacher_fraction": jnp.mean(turn.astype(jnp.float32)),
            "beta": beta,
        }
        metrics.update(runner.episode_sums(info))
        return env_state, flat, metrics

    def fit(
        self, s: TrainingState, data: tuple[Any, jax.Array], normalizer: Any, key: PRNGKey
    ) -> tuple[Any, Any, dict[str, jax.Array]]:
        """`epochs` shuffled passes of minibatch Adam; returns params, optimizer state and metrics."""
        c = self.c
        n_mb = num_minibatches(c)
        sharding = NamedSharding(self.mesh, P(None, AXIS))
        grad_fn = jax.value_and_grad(functools.partial(bc_loss, net=self.net))

        def minibatch(
            carry: tuple[Any, Any], mb: tuple[Any, jax.Array]
        ) -> tuple[tuple[Any, Any], tuple[jax.Array, jax.Array]]:
            params, opt_state = carry
            loss, grads = grad_fn(params, normalizer, mb[0], mb[1])
            with jax.numpy_dtype_promotion("standard"):  # optax mixes int step counts with float constants
                updates, opt_state = self.optimizer.update(grads, opt_state, params)
                params = optax.apply_updates(params, updates)
            params = constrain(params, jax.tree.map(lambda _: NamedSharding(self.mesh, P()), params))
            return (params, opt_state), (loss, ~brax_math.all_finite(grads))

        def epoch(carry: tuple[Any, Any], k: PRNGKey) -> tuple[tuple[Any, Any], tuple[jax.Array, jax.Array]]:
            perm = jax.random.permutation(k, n_mb * c.batch_size)

            def shuffle(x: jax.Array) -> jax.Array:
                x = jnp.take(x, perm, axis=0)
                return constrain(jnp.reshape(x, (n_mb, c.batch_size, *x.shape[1:])), sharding)  # type: ignore[no-any-return]

            return jax.lax.scan(minibatch, carry, jax.tree.map(shuffle, data))

        (params, opt_state), (losses, bad_grads) = jax.lax.scan(
            epoch, (s.params, s.optimizer_state), jax.random.split(key, c.epochs)
        )
        metrics = {
            "actor_loss": jnp.mean(losses[-1]),
            "first_epoch_loss": jnp.mean(losses[0]),
            "bad_loss": ~jnp.all(jnp.isfinite(losses)),
            "bad_grads": jnp.any(bad_grads),
        }
        return params, opt_state, metrics

    def stagger(self, s: TrainingState, env_state: brax_envs.State, key: PRNGKey) -> brax_envs.State:
        """Before the first DAgger step, random episode clocks in [0, scramble_time) (Brax's scramble)."""
        if not self.scramble:
            return env_state
        steps = env_state.info["steps"]
        scrambled = jax.random.randint(key, steps.shape, 0, self.c.scramble_time, steps.dtype)
        steps = jnp.where(s.dagger_step == 0, scrambled, steps)
        return env_state.replace(info={**env_state.info, "steps": steps})

    def update(
        self, s: TrainingState, env_state: brax_envs.State, key: PRNGKey
    ) -> tuple[TrainingState, brax_envs.State, dict[str, jax.Array]]:
        """One DAgger step: collect with the mixture, label, update statistics, fit."""
        c = self.c
        key_stagger, key_collect, key_fit = jax.random.split(key, 3)
        env_state = self.stagger(s, env_state, key_stagger)
        beta = jnp.clip(jnp.asarray(c.dagger_beta_fn(s.dagger_step), jnp.float32), 0.0, 1.0)
        env_state, data, metrics = self.collect(s, env_state, key_collect, beta)
        normalizer = s.normalizer
        if c.normalize_observations:
            normalizer = running_statistics.update(normalizer, data[0])
        params, opt_state, fit_metrics = self.fit(s, data, normalizer, key_fit)
        bad_loss, bad_grads = fit_metrics.pop("bad_loss"), fit_metrics.pop("bad_grads")
        code = jnp.where(bad_loss, 1, jnp.where(bad_grads, 2, jnp.where(~brax_math.all_finite(params), 3, 0)))
        metrics = {**metrics, **fit_metrics}
        metrics[NONFINITE] = jnp.where((code == 0) & ~brax_math.all_finite(normalizer), 4, code)
        new = TrainingState(params, normalizer, opt_state, s.dagger_step + 1)
        return new, env_state, metrics


def _load_teacher(c: BCConfig) -> tuple[Policy | None, checkpoint.LoadedCheckpoint | None]:
    """The teacher function, or the loaded teacher checkpoint (its policy is built per mesh)."""
    if c.teacher_checkpoint_path is not None:
        return None, checkpoint.load(c.teacher_checkpoint_path)
    return c.teacher_inference_fn, None


def _check_teacher(loaded: checkpoint.LoadedCheckpoint, setup: runner.Setup, action_size: int) -> None:
    shapes = networks.observation_size_to_json(networks.observation_shapes(setup.observation_size))
    theirs = loaded.meta.get("observation_shapes")
    if theirs != shapes or int(loaded.meta.get("action_size", -1)) != action_size:
        raise BCConfigError(
            f"teacher_checkpoint_path {loaded.step_dir}: the teacher was trained on observations "
            f"{theirs} and {loaded.meta.get('action_size')} actions, this environment has {shapes} and "
            f"{action_size}"
        )


def _make_agent(
    c: BCConfig,
    teacher_fn: Policy | None,
    teacher_ckpt: checkpoint.LoadedCheckpoint | None,
    setup: runner.Setup,
) -> runner.Agent[TrainingState, bc_networks.BCParams]:
    """BC's `(init, update)` pair for the runner's wrapped training environment."""
    preprocess = networks.preprocessor(c.normalize_observations)
    obs_size, action_size = setup.observation_size, setup.env.action_size
    net = networks.factory(c.network_factory, bc_networks.make_bc_networks)(
        obs_size, action_size, preprocess_observations_fn=preprocess
    )
    optimizer = optax.adam(learning_rate=c.learning_rate)
    if teacher_ckpt is not None:
        _check_teacher(teacher_ckpt, setup, action_size)
        # Replicated over the mesh: the jitted update closes over them next to sharded env states.
        params = jax.device_put(teacher_ckpt.params, NamedSharding(setup.mesh, P()))
        teacher = teacher_ckpt.make_policy(params, deterministic=True)
    else:
        assert teacher_fn is not None
        teacher = teacher_fn
    scramble = c.scramble_time > 0
    if scramble and "steps" not in setup.state_shape.info:
        raise BCConfigError(
            "scramble_time > 0 needs episode clocks (info['steps'], from wrap_env=True or EpisodeWrapper)"
        )
    bc = _BC(c, setup.env, net, teacher, optimizer, setup.mesh, setup.env_shardings, scramble)

    def init(key: PRNGKey) -> TrainingState:
        fields = _learner.initial_fields(net.policy_network, obs_size, optimizer, key)
        return TrainingState(*fields, jnp.zeros((), jnp.int32))

    def warm_start(s: TrainingState, params: bc_networks.BCParams) -> TrainingState:
        fields = _learner.warm_fields(bc_networks.check_params(params), optimizer)
        return TrainingState(*fields, s.dagger_step)

    teacher_meta: dict[str, Any] = {
        "checkpoint": os.fspath(teacher_ckpt.step_dir) if teacher_ckpt is not None else None,
        "inference_fn": networks.callable_name(teacher_fn) if teacher_fn is not None else None,
    }
    return runner.Agent(
        init=init,
        update=bc.update,
        policy_params=public_params,
        make_policy=bc_networks.make_inference_fn(net, c.tanh_squash),
        env_steps_per_update=env_steps_per_update(c),
        warm_start=warm_start,
        meta=runner.checkpoint_meta(
            "bc", net.description, c.normalize_observations, tanh_squash=c.tanh_squash, teacher=teacher_meta
        ),
    )


def train(
    environment: brax_envs.Env | None = None,
    config: BCConfig | None = None,
    *,
    env: brax_envs.Env | None = None,
    **kwargs: Any,
) -> TrainResult:
    """Train a student policy from a teacher by behaviour cloning with DAgger relabelling.

    Settings come from `config` and/or keywords named as in Google Brax's `bc.train` (see
    `BCConfig`); a setting must not be given in both places. `env=` (Brax's name) may replace
    `environment`. Everything is validated before any compilation. Returns
    `TrainResult(make_policy, params, metrics)`.
    """
    c = merge(config, kwargs)
    if environment is not None and env is not None:
        raise BCConfigError("give the environment once: as environment or as env= (Brax's name)")
    environment = environment if environment is not None else env
    if not isinstance(environment, brax_envs.Env):
        raise TypeError(f"environment must be a brax_envs.Env, got {type(environment).__name__}")
    validate(c, len(runner.mesh_devices(c)))
    c = resolve(c)
    teacher_fn, teacher_ckpt = _load_teacher(c)
    logger.info(
        "brax_train.bc: %d env steps per DAgger step, %d minibatches x %d epochs",
        env_steps_per_update(c),
        num_minibatches(c),
        c.epochs,
    )
    runner.log_devices(c, "bc")
    make_agent = functools.partial(_make_agent, c, teacher_fn, teacher_ckpt)
    return runner.run(environment, c, make_agent)


__all__ = [
    "NonFiniteError",
    "TrainResult",
    "TrainingState",
    "bc_loss",
    "public_params",
    "teacher_label",
    "train",
]
