"""PPO as a pure `(init, update)` pair hosted by the shared runner, with Google Brax's `ppo.train`.

One `update` is one training step: `batch_size * num_minibatches` unrolls of `unroll_length` steps
collected with the current policy, then `num_updates_per_batch` shuffled passes of minibatch SGD.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any, Self

import brax_envs
import brax_math
import jax
import jax.numpy as jnp
import optax  # type: ignore[import-untyped]  # this optax ships no py.typed
from jax.sharding import Mesh, NamedSharding

from brax_train import acting, networks, runner, running_statistics
from brax_train.ppo import losses, optim
from brax_train.ppo import networks as ppo_networks
from brax_train.ppo.config import PPOConfig, merge, schedule_name, validate
from brax_train.runner import AXIS, NONFINITE, NonFiniteError, P, TrainResult, constrain
from brax_train.types import PRNGKey, Transition

Carry = tuple[losses.NetworkParams, Any, PRNGKey]


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class TrainingState:
    """Device-side learner state."""

    params: losses.NetworkParams
    """Policy and value parameters."""
    normalizer: running_statistics.RunningStatisticsState
    """Observation statistics."""
    optimizer_state: Any
    """optax state."""


def public_params(s: TrainingState) -> ppo_networks.PPOParams:
    """The policy parameters of a training state (what `make_policy` and checkpoints take)."""
    return ppo_networks.PPOParams(normalizer=s.normalizer, policy=s.params.policy, value=s.params.value)


def env_steps_per_update(c: PPOConfig) -> int:
    """Environment steps one PPO training step consumes (action repeats included)."""
    return c.batch_size * c.unroll_length * c.num_minibatches * c.action_repeat


def _gradient_updates(c: PPOConfig) -> int:
    """Adam updates in `num_timesteps` env steps (training steps x SGD passes x minibatches)."""
    steps = math.ceil(c.num_timesteps / env_steps_per_update(c))
    return steps * c.num_updates_per_batch * c.num_minibatches


def _optimizer(c: PPOConfig) -> Any:
    schedule = schedule_name(c.learning_rate_schedule)
    kl = (c.desired_kl, c.learning_rate_schedule_min_lr, c.learning_rate_schedule_max_lr)
    linear = (c.learning_rate_schedule_min_lr, _gradient_updates(c))
    return optim.make_optimizer(
        c.learning_rate,
        c.max_grad_norm,
        kl if schedule == "ADAPTIVE_KL" else None,
        linear if schedule == "LINEAR" else None,
    )


def _nonfinite_code(metrics: dict[str, jax.Array], normalizer: Any) -> jax.Array:
    """Code of the first non-finite quantity: 1 loss, 2 gradients, 3 parameters, 4 statistics."""
    codes = jnp.where(
        metrics.pop("bad_loss"),
        1,
        jnp.where(metrics.pop("bad_grads"), 2, jnp.where(metrics.pop("bad_params"), 3, 0)),
    )
    codes = jnp.ravel(codes)
    code = codes[jnp.argmax(codes > 0)]
    return jnp.where((code == 0) & ~brax_math.all_finite(normalizer), 4, code)


@dataclasses.dataclass(frozen=True)
class _PPO:
    """The pieces of one PPO run that the update closes over (static under `jit`)."""

    c: PPOConfig
    env: brax_envs.Env
    net: ppo_networks.PPONetworks
    optimizer: Any
    mesh: Mesh
    env_shardings: Any
    extra_fields: tuple[str, ...]

    @classmethod
    def of(cls, c: PPOConfig, setup: runner.Setup, net: ppo_networks.PPONetworks) -> Self:
        """The pieces of a run of `c` with networks `net` on the runner's `setup` (optimizer from `c`)."""
        extra = ("truncation", "episode_metrics", "episode_done", "time_out")
        fields = tuple(k for k in extra if k in setup.state_shape.info)
        return cls(c, setup.env, net, _optimizer(c), setup.mesh, setup.env_shardings, fields)

    def loss(self) -> Callable[..., tuple[jax.Array, dict[str, jax.Array]]]:
        """`loss(params, normalizer, data, key) -> (loss, metrics)` with this run's settings."""
        c = self.c
        return functools.partial(
            losses.compute_ppo_loss,
            ppo_networks=self.net,
            entropy_cost=c.entropy_cost,
            discounting=c.discounting,
            reward_scaling=c.reward_scaling,
            gae_lambda=c.gae_lambda,
            clipping_epsilon=c.clipping_epsilon,
            normalize_advantage=c.normalize_advantage,
            vf_loss_coefficient=c.vf_loss_coefficient,
            clipping_epsilon_value=c.clipping_epsilon_value,
        )

    def loss_and_grad(self) -> Callable[..., Any]:
        return jax.value_and_grad(self.loss(), has_aux=True)

    def minibatch_step(
        self, carry: Carry, data: Transition, normalizer: Any
    ) -> tuple[Carry, dict[str, jax.Array]]:
        """One gradient step on one minibatch."""
        params, opt_state, key = carry
        key, key_loss = jax.random.split(key)
        (loss, metrics), grads = self.loss_and_grad()(params, normalizer, data, key_loss)
        with jax.numpy_dtype_promotion("standard"):  # optax mixes int step counts with float constants
            updates, opt_state = self.optimizer.update(grads, opt_state, params, kl_mean=metrics["kl_mean"])
            params = optax.apply_updates(params, updates)
        metrics["learning_rate"] = optim.current_learning_rate(opt_state, self.c.learning_rate)
        params = constrain(params, NamedSharding(self.mesh, P()))
        metrics["bad_loss"] = ~jnp.isfinite(loss)
        metrics["bad_grads"] = ~jnp.isfinite(optax.tree.norm(grads))
        metrics["bad_params"] = ~brax_math.all_finite(params)
        return (params, opt_state, key), metrics

    def sgd_pass(self, carry: Carry, data: Transition, normalizer: Any) -> tuple[Carry, dict[str, jax.Array]]:
        """One shuffled pass over the training step's data in `num_minibatches` minibatches."""
        c = self.c
        params, opt_state, key = carry
        key, key_perm, key_grad = jax.random.split(key, 3)
        perm = jax.random.permutation(key_perm, c.batch_size * c.num_minibatches)
        sharding = NamedSharding(self.mesh, P(None, AXIS))

        def shuffle(x: jax.Array) -> jax.Array:
            x = jnp.take(x, perm, axis=0)
            return constrain(jnp.reshape(x, (c.num_minibatches, c.batch_size, *x.shape[1:])), sharding)  # type: ignore[no-any-return]

        def body(carry: Carry, mb: Transition) -> tuple[Carry, dict[str, jax.Array]]:
            return self.minibatch_step(carry, mb, normalizer)

        minibatches = jax.tree.map(shuffle, data)
        (params, opt_state, _), metrics = jax.lax.scan(body, (params, opt_state, key_grad), minibatches)
        return (params, opt_state, key), metrics

    def collect(
        self, s: TrainingState, env_state: brax_envs.State, key: PRNGKey
    ) -> tuple[brax_envs.State, Transition]:
        """The training step's unrolls, as (unrolls * envs, T, ...) transitions with PPO's extras."""
        c = self.c
        policy = ppo_networks.make_inference_fn(self.net)(public_params(s))

        def unroll(st_key: tuple[brax_envs.State, PRNGKey], _: None) -> tuple[Any, Transition]:
            st, k = st_key
            k, k_now = jax.random.split(k)
            st, data = acting.generate_unroll(self.env, st, policy, k_now, c.unroll_length, self.extra_fields)
            return (constrain(st, self.env_shardings), k), data

        length = c.batch_size * c.num_minibatches // c.num_envs
        (env_state, _), data = jax.lax.scan(unroll, (env_state, key), None, length=length)
        data = jax.tree.map(
            lambda x: jnp.reshape(jnp.swapaxes(x, 1, 2), (-1, *x.shape[1:2], *x.shape[3:])), data
        )
        data = constrain(data, jax.tree.map(lambda _: NamedSharding(self.mesh, P(AXIS)), data))
        return env_state, self._with_extras(s, data)

    def _with_extras(self, s: TrainingState, data: Transition) -> Transition:
        c = self.c
        se: dict[str, Any] = dict(data.extras["state_extras"])
        if "truncation" not in se:
            se["truncation"] = jnp.zeros_like(data.reward)
        if c.bootstrap_on_timeout:
            time_out = se.get("time_out", se["truncation"])
            v_final = self.net.value_network.apply(s.normalizer, s.params.value, data.next_observation)
            scale = c.discounting / c.reward_scaling if c.reward_scaling else 0.0
            data = dataclasses.replace(data, reward=data.reward + scale * time_out * v_final)
            se["truncation"] = se["truncation"] * (1.0 - time_out)
        pe = dict(data.extras["policy_extras"])
        if c.clipping_epsilon_value is not None:
            # The value clip is centred on the rollout-time value: the pre-update networks and statistics.
            pe["value"] = self.net.value_network.apply(s.normalizer, s.params.value, data.observation)
        return dataclasses.replace(data, extras={**data.extras, "state_extras": se, "policy_extras": pe})

    def update(
        self, s: TrainingState, env_state: brax_envs.State, key: PRNGKey
    ) -> tuple[TrainingState, brax_envs.State, dict[str, jax.Array]]:
        """One training step: collect, then `num_updates_per_batch` SGD passes."""
        c = self.c
        key_sgd, key_unroll = jax.random.split(key)
        env_state, data = self.collect(s, env_state, key_unroll)

        def update_stats(
            norm: running_statistics.RunningStatisticsState,
        ) -> running_statistics.RunningStatisticsState:
            if not c.normalize_observations:
                return norm
            return running_statistics.update(norm, data.observation, until_count=c.normalize_until_count)

        # Brax updates the statistics after SGD under adaptive KL (the old distributions stay valid).
        late = schedule_name(c.learning_rate_schedule) == "ADAPTIVE_KL"
        normalizer = s.normalizer if late else update_stats(s.normalizer)
        (params, opt_state, _), metrics = jax.lax.scan(
            lambda carry, _: self.sgd_pass(carry, data, normalizer),
            (s.params, s.optimizer_state, key_sgd),
            None,
            length=c.num_updates_per_batch,
        )
        if late:
            normalizer = update_stats(normalizer)
        code = _nonfinite_code(metrics, normalizer)
        out = {k: jnp.mean(v) for k, v in metrics.items()}
        out[NONFINITE] = code
        out.update(runner.episode_sums(data.extras["state_extras"]))
        return TrainingState(params=params, normalizer=normalizer, optimizer_state=opt_state), env_state, out


def _make_agent(c: PPOConfig, setup: runner.Setup) -> runner.Agent[TrainingState, ppo_networks.PPOParams]:
    """PPO's `(init, update)` pair for the runner's wrapped training environment."""
    preprocess = networks.preprocessor(c.normalize_observations)
    obs_size = setup.observation_size
    net = networks.factory(c.network_factory, ppo_networks.make_ppo_networks)(
        obs_size, setup.env.action_size, preprocess_observations_fn=preprocess
    )
    return _agent(c, _PPO.of(c, setup, net), obs_size, "ppo")


def _agent(
    c: PPOConfig, core: _PPO, observation_size: Any, name: str, **meta: Any
) -> runner.Agent[TrainingState, ppo_networks.PPOParams]:
    """The runner's `Agent` of a PPO-family update `core` (PPO's, or a subclass's): parameter and
    normalizer initialization, warm start and the metadata of agent `name` (with `meta`)."""
    net, optimizer = core.net, core.optimizer

    def init(key: PRNGKey) -> TrainingState:
        key_policy, key_value = jax.random.split(key)
        params = losses.NetworkParams(
            policy=net.policy_network.init(key_policy), value=net.value_network.init(key_value)
        )
        normalizer = running_statistics.init_state(
            networks.observation_shapes(observation_size),
            std_eps=c.normalize_observations_std_eps,
            mode=c.normalize_observations_mode,
        )
        return TrainingState(params=params, normalizer=normalizer, optimizer_state=optimizer.init(params))

    def warm_start(s: TrainingState, params: ppo_networks.PPOParams) -> TrainingState:
        value = params.value if c.restore_value_fn else s.params.value
        new = losses.NetworkParams(policy=params.policy, value=value)
        return TrainingState(params=new, normalizer=params.normalizer, optimizer_state=s.optimizer_state)

    return runner.Agent(
        init=init,
        update=core.update,
        policy_params=public_params,
        make_policy=ppo_networks.make_inference_fn(net),
        env_steps_per_update=env_steps_per_update(c),
        warm_start=warm_start,
        full_resume=c.restore_value_fn,
        meta=runner.checkpoint_meta(
            name, net.description, c.normalize_observations, **meta,
            normalize_observations_std_eps=c.normalize_observations_std_eps,
            normalize_observations_mode=c.normalize_observations_mode,
        ),
    )


def train(environment: brax_envs.Env, config: PPOConfig | None = None, **kwargs: Any) -> TrainResult:
    """Train a PPO agent on `environment`.

    Settings come from `config` and/or keywords named as in Google Brax's `ppo.train` (see
    `PPOConfig`); a setting must not be given in both places. Everything is validated before any
    compilation. Returns `TrainResult(make_policy, params, metrics)`.
    """
    return runner.train(environment, merge(config, kwargs), validate, _make_agent, "ppo")


__all__ = ["NonFiniteError", "TrainResult", "TrainingState", "env_steps_per_update", "public_params", "train"]
