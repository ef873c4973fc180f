"""Augmented random search as a pure `(init, update)` pair on the shared runner, with Brax's `ars.train`.

One `update` is one iteration of Mania et al. 2018 (arXiv:1803.07055, V1-t / V2-t with observation
normalization): `number_of_directions` Gaussian directions of a linear policy, each evaluated at
`M + nu * delta` and `M - nu * delta` for one episode from fresh resets in one sharded `vmap`; the
`top_directions` with the best `max(r+, r-)` step along `(r+ - r-) * delta`, scaled by the step size
over `top_directions` times the standard deviation of their returns.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import brax_envs
import jax
import jax.numpy as jnp

from brax_train import _population, networks, runner, running_statistics
from brax_train.ars import networks as ars_networks
from brax_train.ars.config import (
    ARSConfig,
    merge,
    steps_per_rollout,
    top,
    validate,
)
from brax_train.runner import NonFiniteError, TrainResult
from brax_train.types import PRNGKey


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class TrainingState:
    """Device-side learner state."""

    params: Any
    """Policy parameters (the (observation_size, action_size) matrix for the linear policy)."""
    normalizer: running_statistics.RunningStatisticsState
    """Observation statistics."""


def public_params(s: TrainingState) -> ars_networks.ARSParams:
    """The policy parameters of a training state (what `make_policy` and checkpoints take)."""
    return ars_networks.ARSParams(normalizer=s.normalizer, policy=s.params)


def top_direction_mask(plus: jax.Array, minus: jax.Array, num_top: int) -> jax.Array:
    """(n,) bool: the `num_top` directions with the largest `max(plus, minus)` (ties: lower index first)."""
    best = jnp.maximum(plus, minus)
    rank = jnp.argsort(jnp.argsort(-best))
    return rank < num_top


def step_direction(noise: Any, plus: jax.Array, minus: jax.Array, num_top: int) -> Any:
    """`sum_top (r+ - r-) * delta / (num_top * sigma_R)` leafwise (noise leaves (n, ...), returns (n,)).

    `sigma_R` is the standard deviation of the 2 * num_top returns of the selected directions
    (1e-6 when they are all equal).
    """
    mask = top_direction_mask(plus, minus, num_top)
    both = jnp.concatenate([mask, mask])
    sigma = jnp.std(jnp.concatenate([plus, minus]), where=both)
    sigma = sigma + jnp.where(sigma == 0.0, jnp.float32(1e-6), jnp.float32(0.0))
    weights = jnp.where(mask, plus - minus, 0.0) / (jnp.float32(num_top) * sigma)
    return jax.tree.map(lambda eps: jnp.tensordot(weights, eps, axes=1), noise)


def _make_agent(c: ARSConfig, setup: runner.Setup) -> runner.Agent[TrainingState, ars_networks.ARSParams]:
    """ARS's `(init, update)` pair for the runner's wrapped environment (`num_envs` = rollouts)."""
    preprocess = networks.preprocessor(c.normalize_observations)
    obs_size = setup.observation_size
    net = c.network_factory(
        observation_size=obs_size, action_size=setup.env.action_size, preprocess_observations_fn=preprocess
    )
    policy, num_top = functools.partial(ars_networks.actions, net), top(c)
    population = _population.Population(
        setup,
        policy,
        c.number_of_directions,
        c.exploration_noise_std,
        steps_per_rollout(c),
        c.normalize_observations,
        c.action_repeat,
        c.reward_shift,
    )

    def init(key: PRNGKey) -> TrainingState:
        normalizer = running_statistics.init_state(networks.observation_shapes(obs_size))
        return TrainingState(params=net.init(key), normalizer=normalizer)

    def update(
        s: TrainingState, env_state: brax_envs.State, key: PRNGKey
    ) -> tuple[TrainingState, brax_envs.State, dict[str, jax.Array]]:
        del env_state  # every generation starts from fresh resets
        g = population.run(s.params, s.normalizer, key)
        plus, minus = jnp.split(g.returns, 2)
        direction = step_direction(g.noise, plus, minus, num_top)
        params = jax.tree.map(lambda p, d: p + c.step_size * d, s.params, direction)
        weights = jnp.mean(top_direction_mask(plus, minus, num_top).astype(jnp.float32))
        params, metrics = population.finish(g, params, direction, weights)
        return TrainingState(params=params, normalizer=g.normalizer), g.rollouts.env_state, metrics

    def warm_start(s: TrainingState, params: ars_networks.ARSParams) -> TrainingState:
        del s
        return TrainingState(params=params.policy, normalizer=params.normalizer)

    fields = _population.agent_fields("ars", c, net, c.normalize_observations)
    return runner.Agent(
        init, update, public_params, ars_networks.make_inference_fn(net), warm_start=warm_start, **fields
    )


def train(environment: brax_envs.Env, config: ARSConfig | None = None, **kwargs: Any) -> TrainResult:
    """Train a linear policy with augmented random search on `environment`.

    Settings come from `config` and/or keywords named as in Google Brax's `ars.train` (see
    `ARSConfig`); a setting must not be given in both places. Everything is validated before any
    compilation. Returns `TrainResult(make_policy, params, metrics)` with `ARSParams`.
    """
    return _population.train(environment, merge(config, kwargs), validate, _make_agent, "ars")


__all__ = [
    "NonFiniteError",
    "TrainResult",
    "TrainingState",
    "public_params",
    "step_direction",
    "top_direction_mask",
    "train",
]
