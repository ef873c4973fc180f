"""Evolution strategies as a pure `(init, update)` pair hosted by the shared runner, with Brax's `es.train`.

One `update` is one generation (Salimans et al. 2017, arXiv:1703.03864): `population_size`
antithetic pairs of Gaussian parameter perturbations each run one episode from fresh resets, all
in one `vmap` sharded over devices; the returns are shaped into weights and Adam follows the
search direction. Observation statistics are updated from the generation's observations.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import brax_envs
import jax
import jax.numpy as jnp
import optax  # type: ignore[import-untyped]  # this optax ships no py.typed

from brax_train import _learner, _population, networks, runner
from brax_train._population import check_observations
from brax_train.es import fitness
from brax_train.es import networks as es_networks
from brax_train.es.config import (
    ESConfig,
    merge,
    steps_per_rollout,
    validate,
)
from brax_train.runner import NonFiniteError, TrainResult
from brax_train.types import PRNGKey


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class TrainingState(_learner.PolicyState):
    """Device-side learner state: `params` is the centre of the population, `optimizer_state` Adam's."""


def public_params(s: TrainingState) -> es_networks.ESParams:
    """The policy parameters of a training state (what `make_policy` and checkpoints take)."""
    return es_networks.ESParams(normalizer=s.normalizer, policy=s.params)


def _make_agent(c: ESConfig, setup: runner.Setup) -> runner.Agent[TrainingState, es_networks.ESParams]:
    """ES's `(init, update)` pair for the runner's wrapped environment (`num_envs` = rollouts)."""
    preprocess = networks.preprocessor(c.normalize_observations)
    obs_size = setup.observation_size
    net = networks.factory(c.network_factory, es_networks.make_es_networks)(
        observation_size=obs_size, action_size=setup.env.action_size, preprocess_observations_fn=preprocess
    )
    optimizer = optax.adam(learning_rate=c.learning_rate)
    shaping = fitness.fitness_shaping_of(c.fitness_shaping)
    policy = functools.partial(es_networks.actions, net)
    population = _population.Population(
        setup,
        policy,
        c.population_size,
        c.perturbation_std,
        steps_per_rollout(c),
        c.normalize_observations,
        c.action_repeat,
    )

    def init(key: PRNGKey) -> TrainingState:
        return TrainingState(*_learner.initial_fields(net.policy_network, obs_size, optimizer, key))

    def update(
        s: TrainingState, env_state: brax_envs.State, key: PRNGKey
    ) -> tuple[TrainingState, brax_envs.State, dict[str, jax.Array]]:
        del env_state  # every generation starts from fresh resets
        g = population.run(s.params, s.normalizer, key)
        weights = fitness.pair_weights(fitness.shape_fitness(g.returns, shaping, c.center_fitness))
        ascent = fitness.ascent_direction(s.params, g.noise, weights, c.l2coeff)
        with jax.numpy_dtype_promotion("standard"):  # optax mixes int step counts with float constants
            updates, opt_state = optimizer.update(jax.tree.map(jnp.negative, ascent), s.optimizer_state)
            params = optax.apply_updates(s.params, updates)
        params, metrics = population.finish(g, params, ascent, jnp.mean(weights))
        new = TrainingState(params=params, normalizer=g.normalizer, optimizer_state=opt_state)
        return new, g.rollouts.env_state, metrics

    def warm_start(s: TrainingState, params: es_networks.ESParams) -> TrainingState:
        return TrainingState(*_learner.warm_fields(params, optimizer))

    fields = _population.agent_fields("es", c, net, c.normalize_observations)
    return runner.Agent(
        init, update, public_params, es_networks.make_inference_fn(net), warm_start=warm_start, **fields
    )


def train(environment: brax_envs.Env, config: ESConfig | None = None, **kwargs: Any) -> TrainResult:
    """Train a policy with evolution strategies on `environment`.

    Settings come from `config` and/or keywords named as in Google Brax's `es.train` (see
    `ESConfig`); a setting must not be given in both places. Everything is validated before any
    compilation. Returns `TrainResult(make_policy, params, metrics)` with `ESParams`.
    """
    return _population.train(environment, merge(config, kwargs), validate, _make_agent, "es")


__all__ = ["NonFiniteError", "TrainResult", "TrainingState", "check_observations", "public_params", "train"]
