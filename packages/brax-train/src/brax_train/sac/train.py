"""SAC as a pure `(init, update)` pair hosted by the shared runner, with Google Brax's `sac.train`.

One `update` is one training step: one step of all `num_envs` environments (`action_repeat` times),
its transitions inserted into the replay buffer, then `grad_updates_per_step` gradient steps on
batches of `batch_size` transitions drawn from the buffer. Until the buffer holds
`min_replay_size` transitions the actions are uniform in [-1, 1] and no gradient step is taken.
The buffer is part of the learner state, so checkpoints and exact resume include it.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable
from typing import Any

import brax_envs
import brax_math
import jax
import jax.numpy as jnp
import optax  # type: ignore[import-untyped]  # this optax ships no py.typed
from jax.sharding import Mesh, NamedSharding

from brax_train import acting, networks, runner, running_statistics
from brax_train.runner import AXIS, NONFINITE, NonFiniteError, P, TrainResult, constrain
from brax_train.sac import losses, replay
from brax_train.sac import networks as sac_networks
from brax_train.sac.config import SACConfig, merge, replay_capacity, validate
from brax_train.types import PRNGKey, Transition

logger = logging.getLogger("brax_train.sac")


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Learner:
    """What gradient steps change: the networks, the temperature and their optimizer states."""

    policy_params: Any
    """Policy network parameters."""
    q_params: Any
    """Q network parameters (all critics)."""
    target_q_params: Any
    """Polyak-averaged copy of `q_params` used in the critic's target."""
    log_alpha: jax.Array
    """() logarithm of the entropy temperature."""
    policy_optimizer_state: Any
    """optax state of the policy's optimizer."""
    q_optimizer_state: Any
    """optax state of the Q networks' optimizer."""
    alpha_optimizer_state: Any
    """optax state of the temperature's optimizer."""


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class TrainingState:
    """Device-side state of a SAC run, replay buffer included."""

    learner: Learner
    """Networks, temperature and optimizer states."""
    normalizer: running_statistics.RunningStatisticsState
    """Observation statistics."""
    buffer: replay.ReplayBuffer
    """Replay buffer (rows of all environments' transitions)."""


def public_params(s: TrainingState) -> sac_networks.SACParams:
    """The policy parameters of a training state (what `make_policy` and checkpoints take)."""
    return sac_networks.SACParams(normalizer=s.normalizer, policy=s.learner.policy_params)


def env_steps_per_update(c: SACConfig) -> int:
    """Environment steps one SAC training step consumes (action repeats included)."""
    return c.num_envs * c.action_repeat


def buffer_rows(c: SACConfig) -> int:
    """Rows (steps of all `num_envs` environments) the replay buffer holds."""
    return max(1, replay_capacity(c) // c.num_envs)


def prefill_rows(c: SACConfig) -> int:
    """Training steps that act uniformly at random before gradient steps start."""
    return min(math.ceil(c.min_replay_size / c.num_envs), buffer_rows(c))


@dataclasses.dataclass(frozen=True)
class _SAC:
    """The pieces of one SAC run that the update closes over (static under `jit`)."""

    c: SACConfig
    env: brax_envs.Env
    net: sac_networks.SACNetworks
    policy_optimizer: Any
    q_optimizer: Any
    alpha_optimizer: Any
    target_entropy: float
    prefill: int
    mesh: Mesh
    env_shardings: Any
    extra_fields: tuple[str, ...]

    def learner(self, policy_params: Any, q_params: Any, target_q_params: Any) -> Learner:
        """A learner at its start: these networks, temperature 1 (`log_alpha` 0), fresh optimizer states."""
        log_alpha = jnp.zeros((), jnp.float32)
        return Learner(
            policy_params=policy_params,
            q_params=q_params,
            target_q_params=target_q_params,
            log_alpha=log_alpha,
            policy_optimizer_state=self.policy_optimizer.init(policy_params),
            q_optimizer_state=self.q_optimizer.init(q_params),
            alpha_optimizer_state=self.alpha_optimizer.init(log_alpha),
        )

    def sgd_step(
        self, s: Learner, normalizer: Any, batch: Transition, noise: jax.Array
    ) -> tuple[Learner, dict[str, jax.Array]]:
        """One gradient step of the critics, the policy and the temperature, then the target update.

        All three losses see the parameters from before the step (as in Brax); `noise` (2, B, A)
        holds the standard normal draws of the critic's next actions and the policy's actions.
        """
        c, net = self.c, self.net
        alpha = jnp.exp(s.log_alpha)
        critic_loss, q_grad = jax.value_and_grad(losses.critic_loss)(
            s.q_params,
            s.policy_params,
            normalizer,
            s.target_q_params,
            alpha,
            batch,
            noise[0],
            sac_networks=net,
            reward_scaling=c.reward_scaling,
            discounting=c.discounting,
        )
        (actor_loss, log_prob), policy_grad = jax.value_and_grad(losses.actor_loss, has_aux=True)(
            s.policy_params, normalizer, s.q_params, alpha, batch, noise[1], sac_networks=net
        )
        alpha_loss, alpha_grad = jax.value_and_grad(losses.alpha_loss)(
            s.log_alpha, log_prob, target_entropy=self.target_entropy
        )
        with jax.numpy_dtype_promotion("standard"):  # optax mixes int step counts with float constants
            upd, alpha_opt = self.alpha_optimizer.update(alpha_grad, s.alpha_optimizer_state, s.log_alpha)
            log_alpha = optax.apply_updates(s.log_alpha, upd)
            upd, q_opt = self.q_optimizer.update(q_grad, s.q_optimizer_state, s.q_params)
            q_params = optax.apply_updates(s.q_params, upd)
            upd, policy_opt = self.policy_optimizer.update(
                policy_grad, s.policy_optimizer_state, s.policy_params
            )
            policy_params = optax.apply_updates(s.policy_params, upd)
        target_q = jax.tree.map(lambda t, q: (1.0 - c.tau) * t + c.tau * q, s.target_q_params, q_params)
        repl = NamedSharding(self.mesh, P())
        learned = constrain((policy_params, q_params, target_q, log_alpha), repl)
        policy_params, q_params, target_q, log_alpha = learned
        s = Learner(
            policy_params=policy_params,
            q_params=q_params,
            target_q_params=target_q,
            log_alpha=log_alpha,
            policy_optimizer_state=policy_opt,
            q_optimizer_state=q_opt,
            alpha_optimizer_state=alpha_opt,
        )
        metrics = {
            "critic_loss": critic_loss,
            "actor_loss": actor_loss,
            "alpha_loss": alpha_loss,
            "alpha": jnp.exp(log_alpha),
            "bad_loss": ~jnp.isfinite(alpha_loss + critic_loss + actor_loss),
            "bad_grads": ~jnp.isfinite(optax.tree.norm((alpha_grad, q_grad, policy_grad))),
            "bad_params": ~brax_math.all_finite(learned),
        }
        return s, metrics

    def learn(
        self, s: Learner, normalizer: Any, batches: Transition, noise: jax.Array
    ) -> tuple[Learner, dict[str, jax.Array]]:
        """`grad_updates_per_step` gradient steps, one per batch (leading axis of `batches`, `noise`)."""

        def step(s: Learner, xs: tuple[Transition, jax.Array]) -> tuple[Learner, dict[str, jax.Array]]:
            return self.sgd_step(s, normalizer, *xs)

        s, metrics = jax.lax.scan(step, s, (batches, noise))
        codes = jnp.where(
            metrics.pop("bad_loss"),
            1,
            jnp.where(metrics.pop("bad_grads"), 2, jnp.where(metrics.pop("bad_params"), 3, 0)),
        )
        out = {k: jnp.mean(v) for k, v in metrics.items()}
        out[NONFINITE] = codes[jnp.argmax(codes > 0)].astype(jnp.int32)
        return s, out

    def skip(
        self, s: Learner, normalizer: Any, batches: Transition, noise: jax.Array
    ) -> tuple[Learner, dict[str, jax.Array]]:
        """No gradient step (the buffer is still being filled); metrics shaped as `learn`'s."""
        del normalizer, batches, noise
        zero = jnp.zeros((), jnp.float32)
        out = {"critic_loss": zero, "actor_loss": zero, "alpha_loss": zero, "alpha": jnp.exp(s.log_alpha)}
        out[NONFINITE] = jnp.zeros((), jnp.int32)
        return s, out

    def update(
        self, s: TrainingState, env_state: brax_envs.State, key: PRNGKey
    ) -> tuple[TrainingState, brax_envs.State, dict[str, jax.Array]]:
        """One training step: act, record, then learn unless the buffer is still being prefilled."""
        c = self.c
        key_act, key_explore, key_sample, key_noise = jax.random.split(key, 4)
        prefilling = s.buffer.size < self.prefill
        policy = sac_networks.make_inference_fn(self.net)(public_params(s))

        def behaviour(obs: Any, k: PRNGKey) -> tuple[jax.Array, dict[str, Any]]:
            action, _ = policy(obs, k)
            uniform = jax.random.uniform(key_explore, action.shape, action.dtype, -1.0, 1.0)
            return jnp.where(prefilling, uniform, action), {}

        env_state, data = acting.actor_step(self.env, env_state, behaviour, key_act, self.extra_fields)
        env_state = constrain(env_state, self.env_shardings)
        se = data.extras["state_extras"]
        truncation = se.get("truncation", jnp.zeros_like(data.reward))
        row = dataclasses.replace(data, extras={"state_extras": {"truncation": truncation}})
        normalizer = s.normalizer
        if c.normalize_observations:
            normalizer = running_statistics.update(normalizer, data.observation)
        buffer = replay.shard(replay.insert(s.buffer, row), self.mesh)
        # Batches are drawn outside the conditional, which then never carries the (large) buffer.
        shape = (c.grad_updates_per_step, c.batch_size)
        batches = replay.sample(buffer, key_sample, shape, self.mesh)
        # Every gradient step's action noise in one draw (one random-number kernel to compile).
        action_size = self.net.parametric_action_distribution.event_size
        noise = jax.random.normal(key_noise, (shape[0], 2, shape[1], action_size), jnp.float32)
        noise = constrain(noise, NamedSharding(self.mesh, P(None, None, AXIS)))
        learner, out = jax.lax.cond(prefilling, self.skip, self.learn, s.learner, normalizer, batches, noise)
        code = out[NONFINITE]
        out[NONFINITE] = jnp.where((code == 0) & ~brax_math.all_finite(normalizer), 4, code)
        out["buffer_current_size"] = (buffer.size * c.num_envs).astype(jnp.float32)
        out.update(runner.episode_sums(se))
        return TrainingState(learner=learner, normalizer=normalizer, buffer=buffer), env_state, out


def _row_shapes(setup: runner.Setup) -> Any:
    """Shapes of one buffer row: a transition of every environment."""
    batch = setup.state_shape.reward.shape

    def row() -> Transition:
        obs = jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), setup.state_shape.obs)
        scalar = jnp.zeros(batch, jnp.float32)
        return Transition(
            observation=obs,
            action=jnp.zeros((*batch, setup.env.action_size), jnp.float32),
            reward=scalar,
            discount=scalar,
            next_observation=obs,
            extras={"state_extras": {"truncation": scalar}},
        )

    return jax.eval_shape(row)


def _init_fn(sac: _SAC, setup: runner.Setup, rows: int) -> Callable[[PRNGKey], TrainingState]:
    """`init(key)`: fresh networks, optimizer states, statistics and an empty replay buffer of `rows`."""
    net = sac.net

    @jax.jit  # one compilation instead of one per initializer and shape
    def init(key: PRNGKey) -> TrainingState:
        key_policy, key_q = jax.random.split(key)
        policy_params = net.policy_network.init(key_policy)
        q_params = net.q_network.init(key_q)
        return TrainingState(
            learner=sac.learner(policy_params, q_params, q_params),
            normalizer=running_statistics.init_state(networks.observation_shapes(setup.observation_size)),
            buffer=replay.init(_row_shapes(setup), rows),
        )

    return init


def _make_agent(c: SACConfig, setup: runner.Setup) -> runner.Agent[TrainingState, sac_networks.SACParams]:
    """SAC's `(init, update)` pair for the runner's wrapped training environment."""
    preprocess = networks.preprocessor(c.normalize_observations)
    obs_size, action_size = setup.observation_size, setup.env.action_size
    net = networks.factory(c.network_factory, sac_networks.make_sac_networks)(
        obs_size, action_size, preprocess_observations_fn=preprocess
    )
    target_entropy = float(-action_size if c.target_entropy is None else c.target_entropy)
    sac = _SAC(
        c,
        setup.env,
        net,
        # Adam on each network's parameters raveled into one vector: the same arithmetic as per-leaf
        # Adam, in far fewer kernels for XLA to compile.
        optax.flatten(optax.adam(c.learning_rate)),
        optax.flatten(optax.adam(c.learning_rate)),
        optax.adam(c.alpha_learning_rate),
        target_entropy,
        prefill_rows(c),
        setup.mesh,
        setup.env_shardings,
        tuple(k for k in ("truncation", "episode_metrics", "episode_done") if k in setup.state_shape.info),
    )
    rows = buffer_rows(c)

    def warm_start(s: TrainingState, params: sac_networks.SACParams) -> TrainingState:
        p = sac_networks.check_params(params)
        learner = dataclasses.replace(
            s.learner, policy_params=p.policy, policy_optimizer_state=sac.policy_optimizer.init(p.policy)
        )
        return dataclasses.replace(s, learner=learner, normalizer=p.normalizer)

    return runner.Agent(
        init=_init_fn(sac, setup, rows),
        update=sac.update,
        policy_params=public_params,
        make_policy=sac_networks.make_inference_fn(net),
        env_steps_per_update=env_steps_per_update(c),
        warm_start=warm_start,
        meta=runner.checkpoint_meta(
            "sac", net.description, c.normalize_observations, replay_buffer_rows=rows
        ),
    )


def train(environment: brax_envs.Env, config: SACConfig | None = None, **kwargs: Any) -> TrainResult:
    """Train a SAC agent on `environment`.

    Settings come from `config` and/or keywords named as in Google Brax's `sac.train` (see
    `SACConfig`); a setting must not be given in both places. Everything is validated before any
    compilation. Returns `TrainResult(make_policy, params, metrics)` with `SACParams` params.
    """
    return runner.train(environment, merge(config, kwargs), validate, _make_agent, "sac", resolve=_resolve)


def _resolve(c: SACConfig) -> SACConfig:
    """`c` saving its checkpoints where Brax's `checkpoint_logdir` says, when that is given."""
    return c if c.checkpoint_logdir is None else c.replace(save_checkpoint_path=c.checkpoint_logdir)


__all__ = [
    "Learner",
    "NonFiniteError",
    "TrainResult",
    "TrainingState",
    "buffer_rows",
    "env_steps_per_update",
    "prefill_rows",
    "public_params",
    "train",
]
