"""Analytic policy gradients as a pure `(init, update)` pair hosted by the shared runner.

One `update` is one policy update: the `num_envs` training environments, continuing from where the
previous update left them (truncated rollouts, as Google Brax's APG), are stepped
`horizon_length // action_repeat` times with the stochastic policy; the mean reward is
differentiated through the simulator with `jax.grad` (optionally cut every `truncation_length`
steps), clipped, and applied with Adam. Google Brax's `apg.train` keywords are accepted.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from typing import Any

import brax_envs
import brax_math
import jax
import jax.numpy as jnp
import optax  # type: ignore[import-untyped]  # this optax ships no py.typed
from jax.sharding import NamedSharding

from brax_train import _learner, networks, runner, running_statistics
from brax_train.apg import networks as apg_networks
from brax_train.apg.config import APGConfig, env_steps_per_update, merge, resolve, steps_per_update, validate
from brax_train.runner import NONFINITE, NonFiniteError, P, TrainResult, constrain
from brax_train.types import Policy, PRNGKey

logger = logging.getLogger("brax_train.apg")


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class TrainingState(_learner.PolicyState):
    """Device-side learner state: the policy's, and whether the environments' clocks are staggered."""

    started: jax.Array
    """() bool: an update has run (the first one staggers the environments' episode clocks)."""


def public_params(s: TrainingState) -> apg_networks.APGParams:
    """The policy parameters of a training state (what `make_policy` and checkpoints take)."""
    return apg_networks.APGParams(normalizer=s.normalizer, policy=s.params)


def make_optimizer(c: APGConfig) -> Any:
    """Brax's APG optimizer: global-norm clip, elementwise clip to [-1, 1], Adam (decaying rate)."""
    lr: Any = c.learning_rate
    if c.use_schedule:
        lr = optax.exponential_decay(
            init_value=c.learning_rate, transition_steps=1, decay_rate=c.schedule_decay
        )
    b1, b2 = c.adam_b
    return optax.chain(
        optax.clip_by_global_norm(c.max_gradient_norm),
        optax.clip(1.0),
        optax.adam(learning_rate=lr, b1=b1, b2=b2),
    )


def _nonfinite_code(loss: jax.Array, grads: Any, params: Any, normalizer: Any) -> jax.Array:
    """Code of the first non-finite quantity: 1 loss, 2 gradients, 3 parameters, 4 statistics."""
    code = jnp.where(~jnp.isfinite(loss), 1, 0)
    code = jnp.where((code == 0) & ~brax_math.all_finite(grads), 2, code)
    code = jnp.where((code == 0) & ~brax_math.all_finite(params), 3, code)
    return jnp.where((code == 0) & ~brax_math.all_finite(normalizer), 4, code)


def _cut(x: jax.Array, cut: jax.Array) -> jax.Array:
    """`x` whose gradient is stopped when `cut` (a () bool)."""
    return jnp.where(cut, jax.lax.stop_gradient(x), x)


def rollout_loss(
    policy: Policy,
    env: brax_envs.Env,
    env_state: brax_envs.State,
    key: PRNGKey,
    length: int,
    truncation_length: int | None = None,
) -> tuple[jax.Array, tuple[brax_envs.State, Any, Any]]:
    """`-mean(reward)` of `length` steps of the batched `env` under `policy`, differentiable through both.

    Differentiate it with respect to whatever `policy` closes over (the policy parameters). With
    `truncation_length` k, gradients stop at the state after every k-th step, so each reward is
    differentiated through at most k earlier steps. Returns the loss with `(final env state,
    observations (length, N, ...), per-step env info (episode_done, episode_metrics))`.
    """

    def body(
        carry: tuple[brax_envs.State, PRNGKey], t: jax.Array
    ) -> tuple[tuple[brax_envs.State, PRNGKey], tuple[jax.Array, Any, Any]]:
        st, k = carry
        k, k_act = jax.random.split(k)
        action, _ = policy(st.obs, k_act)
        nst = env.step(st, action)
        info = {n: nst.info[n] for n in ("episode_done", "episode_metrics") if n in nst.info}
        out = (nst.reward, st.obs, jax.lax.stop_gradient(info))
        if truncation_length is not None:  # this step's reward keeps its gradient; later ones stop here
            cut = (t + 1) % truncation_length == 0
            nst = jax.tree.map(functools.partial(_cut, cut=cut), nst)
        return (nst, k), out

    steps = jnp.arange(length, dtype=jnp.int32)
    (env_state, _), (rewards, obs, info) = jax.lax.scan(body, (env_state, key), steps)
    return -jnp.mean(rewards), (env_state, obs, info)


@dataclasses.dataclass(frozen=True)
class _APG:
    """The pieces of one APG run that the update closes over (static under `jit`)."""

    c: APGConfig
    env: brax_envs.Env
    net: apg_networks.APGNetworks
    optimizer: Any
    env_shardings: Any
    replicated: NamedSharding
    scramble: bool

    def rollout_loss(
        self, policy_params: Any, normalizer: Any, env_state: brax_envs.State, key: PRNGKey
    ) -> tuple[jax.Array, tuple[brax_envs.State, Any, Any]]:
        """`rollout_loss` of this run's policy, environment, horizon and truncation."""
        make_policy = apg_networks.make_inference_fn(self.net)
        policy = make_policy(apg_networks.APGParams(normalizer, policy_params))
        return rollout_loss(
            policy, self.env, env_state, key, steps_per_update(self.c), self.c.truncation_length
        )

    def stagger(self, s: TrainingState, env_state: brax_envs.State, key: PRNGKey) -> brax_envs.State:
        """On the first update, random episode clocks in [0, episode_length) (Brax's scramble_times)."""
        if not self.scramble:
            return env_state
        steps = env_state.info["steps"]
        assert self.c.episode_length is not None
        scrambled = jax.random.randint(key, steps.shape, 0, self.c.episode_length, steps.dtype)
        steps = jnp.where(s.started, steps, scrambled)
        return env_state.replace(info={**env_state.info, "steps": steps})

    def update(
        self, s: TrainingState, env_state: brax_envs.State, key: PRNGKey
    ) -> tuple[TrainingState, brax_envs.State, dict[str, jax.Array]]:
        """One policy update: differentiate a rollout's reward, clip, Adam step, statistics."""
        c = self.c
        key_stagger, key_roll = jax.random.split(key)
        env_state = self.stagger(s, env_state, key_stagger)
        grad_fn = jax.value_and_grad(self.rollout_loss, has_aux=True)
        (loss, (env_state, obs, info)), grads = grad_fn(s.params, s.normalizer, env_state, key_roll)
        grads = constrain(grads, jax.tree.map(lambda _: self.replicated, grads))
        with jax.numpy_dtype_promotion("standard"):  # optax mixes int step counts with float constants
            updates, opt_state = self.optimizer.update(grads, s.optimizer_state, s.params)
            params = optax.apply_updates(s.params, updates)
        params = constrain(params, jax.tree.map(lambda _: self.replicated, params))
        normalizer = s.normalizer
        if c.normalize_observations:
            normalizer = running_statistics.update(normalizer, obs)
        metrics: dict[str, jax.Array] = {
            "loss": loss,
            "grad_norm": optax.tree.norm(grads),
            "params_norm": optax.tree.norm(params),
        }
        metrics[NONFINITE] = _nonfinite_code(loss, grads, params, normalizer)
        metrics.update(runner.episode_sums(info))
        env_state = constrain(env_state, self.env_shardings)
        new = TrainingState(params, normalizer, opt_state, jnp.ones((), jnp.bool_))
        return new, env_state, metrics


def _make_agent(c: APGConfig, setup: runner.Setup) -> runner.Agent[TrainingState, apg_networks.APGParams]:
    """APG's `(init, update)` pair for the runner's wrapped training environment."""
    preprocess = networks.preprocessor(c.normalize_observations)
    obs_size = setup.observation_size
    net = networks.factory(c.network_factory, apg_networks.make_apg_networks)(
        obs_size, setup.env.action_size, preprocess_observations_fn=preprocess
    )
    optimizer = make_optimizer(c)
    scramble = c.wrap_env and c.episode_length is not None and "steps" in setup.state_shape.info
    apg = _APG(c, setup.env, net, optimizer, setup.env_shardings, NamedSharding(setup.mesh, P()), scramble)

    def init(key: PRNGKey) -> TrainingState:
        fields = _learner.initial_fields(net.policy_network, obs_size, optimizer, key)
        return TrainingState(*fields, jnp.zeros((), jnp.bool_))

    def warm_start(s: TrainingState, params: apg_networks.APGParams) -> TrainingState:
        return TrainingState(*_learner.warm_fields(apg_networks.check_params(params), optimizer), s.started)

    return runner.Agent(
        init=init,
        update=apg.update,
        policy_params=public_params,
        make_policy=apg_networks.make_inference_fn(net),
        env_steps_per_update=env_steps_per_update(c),
        warm_start=warm_start,
        meta=runner.checkpoint_meta("apg", net.description, c.normalize_observations),
    )


def train(environment: brax_envs.Env, config: APGConfig | None = None, **kwargs: Any) -> TrainResult:
    """Train a policy by analytic policy gradients through the differentiable `environment`.

    Settings come from `config` and/or keywords named as in Google Brax's `apg.train` (see
    `APGConfig`); a setting must not be given in both places. Everything is validated before any
    compilation. Returns `TrainResult(make_policy, params, metrics)`.
    """
    return runner.train(environment, merge(config, kwargs), validate, _make_agent, "apg", resolve=_resolve)


def _resolve(c: APGConfig) -> APGConfig:
    """`resolve(c)`, logging the env steps per update that the run schedules with."""
    c = resolve(c)
    logger.info("brax_train.apg: %d env steps per update", env_steps_per_update(c))
    return c


__all__ = [
    "NonFiniteError",
    "TrainResult",
    "TrainingState",
    "make_optimizer",
    "public_params",
    "rollout_loss",
    "train",
]
