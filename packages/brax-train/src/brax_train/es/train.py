"""Evolution strategies as a pure `(init, update)` pair hosted by the shared runner, with Brax's `es.train`.

One `update` is one generation (Salimans et al. 2017, arXiv:1703.03864): `population_size`
antithetic pairs of Gaussian parameter perturbations each run one episode from fresh resets, all
in one `vmap` sharded over devices; the returns are shaped into weights and Adam follows the
search direction. Observation statistics are updated from the generation's observations.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any

import brax_envs
import jax
import jax.numpy as jnp
import optax  # type: ignore[import-untyped]  # this optax ships no py.typed
from jax.sharding import NamedSharding

from brax_train import _population, networks, runner, running_statistics
from brax_train._population import check_observations
from brax_train.es import fitness
from brax_train.es import networks as es_networks
from brax_train.es.config import (
    COUNTS_ENV_STEPS,
    ESConfig,
    env_steps_per_update,
    merge,
    num_rollouts,
    run_config,
    steps_per_rollout,
    validate,
)
from brax_train.runner import NONFINITE, NonFiniteError, P, TrainResult, constrain
from brax_train.types import PRNGKey


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class TrainingState:
    """Device-side learner state."""

    params: Any
    """Policy MLP parameters (the centre of the population)."""
    normalizer: running_statistics.RunningStatisticsState
    """Observation statistics."""
    optimizer_state: Any
    """optax Adam state."""


def public_params(s: TrainingState) -> es_networks.ESParams:
    """The policy parameters of a training state (what `make_policy` and checkpoints take)."""
    return es_networks.ESParams(normalizer=s.normalizer, policy=s.params)


_CUSTOM = "a network_factory whose networks carry no description; pass network_factory= to load_policy"


def _network_factory(c: ESConfig) -> Callable[..., es_networks.ESNetworks]:
    nf = c.network_factory
    if isinstance(nf, Mapping):
        kw: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in nf.items()}
        return functools.partial(es_networks.make_es_networks, **kw)
    return nf


def _make_agent(c: ESConfig, setup: runner.Setup) -> runner.Agent[TrainingState, es_networks.ESParams]:
    """ES's `(init, update)` pair for the runner's wrapped environment (`num_envs` = rollouts)."""
    preprocess = networks.preprocessor(c.normalize_observations)
    obs_size = setup.observation_size
    net = _network_factory(c)(
        observation_size=obs_size, action_size=setup.env.action_size, preprocess_observations_fn=preprocess
    )
    optimizer = optax.adam(learning_rate=c.learning_rate)
    shaping = fitness.fitness_shaping_of(c.fitness_shaping)
    n, rollouts, length = c.population_size, num_rollouts(c), steps_per_rollout(c)
    repl = NamedSharding(setup.mesh, P())

    def init(key: PRNGKey) -> TrainingState:
        params = net.policy_network.init(key)
        normalizer = running_statistics.init_state(networks.observation_shapes(obs_size))
        return TrainingState(params=params, normalizer=normalizer, optimizer_state=optimizer.init(params))

    def update(
        s: TrainingState, env_state: brax_envs.State, key: PRNGKey
    ) -> tuple[TrainingState, brax_envs.State, dict[str, jax.Array]]:
        del env_state  # every generation starts from fresh resets
        key_noise, key_eval = jax.random.split(key)
        members, noise = _population.perturb(s.params, key_noise, n, c.perturbation_std)

        def act(members: Any, obs: Any) -> jax.Array:
            one = functools.partial(es_networks.actions, net, s.normalizer)
            return jax.vmap(one)(members, obs)

        r = _population.evaluate(
            setup.env,
            act,
            members,
            key_eval,
            num_rollouts=rollouts,
            length=length,
            mesh=setup.mesh,
            env_shardings=setup.env_shardings,
            track_moments=c.normalize_observations,
        )
        normalizer = s.normalizer
        if r.moments is not None:
            normalizer = _population.update_statistics(normalizer, r.moments)
        returns = constrain(r.returns, repl)
        weights = fitness.pair_weights(fitness.shape_fitness(returns, shaping, c.center_fitness))
        ascent = fitness.ascent_direction(s.params, noise, weights, c.l2coeff)
        with jax.numpy_dtype_promotion("standard"):  # optax mixes int step counts with float constants
            updates, opt_state = optimizer.update(jax.tree.map(jnp.negative, ascent), s.optimizer_state)
            params = optax.apply_updates(s.params, updates)
        params = constrain(params, jax.tree.map(lambda _: repl, params))
        metrics = {
            "params_norm": optax.tree.norm(params),
            "eval_scores_mean": jnp.mean(returns),
            "eval_scores_std": jnp.std(returns),
            "weights": jnp.mean(weights),
            "rollout_length": r.active_steps / rollouts,
            runner.ENV_STEPS: _population.counted_steps(r, c.action_repeat),
            **r.metrics,
        }
        metrics[NONFINITE] = _population.nonfinite_code(returns, ascent, params, normalizer)
        new = TrainingState(params=params, normalizer=normalizer, optimizer_state=opt_state)
        return new, r.env_state, metrics

    def warm_start(s: TrainingState, params: es_networks.ESParams) -> TrainingState:
        return TrainingState(
            params=params.policy, normalizer=params.normalizer, optimizer_state=optimizer.init(params.policy)
        )

    return runner.Agent(
        init=init,
        update=update,
        policy_params=public_params,
        make_policy=es_networks.make_inference_fn(net),
        env_steps_per_update=env_steps_per_update(c),
        warm_start=warm_start,
        counts_env_steps=COUNTS_ENV_STEPS,
        meta={
            "agent": "es",
            "network": getattr(net, "description", None) or {"recordable": False, "notes": [_CUSTOM]},
            "normalize_observations": c.normalize_observations,
        },
    )


def train(environment: brax_envs.Env, config: ESConfig | None = None, **kwargs: Any) -> TrainResult:
    """Train a policy with evolution strategies on `environment`.

    Settings come from `config` and/or keywords named as in Google Brax's `es.train` (see
    `ESConfig`); a setting must not be given in both places. Everything is validated before any
    compilation. Returns `TrainResult(make_policy, params, metrics)` with `ESParams`.
    """
    c = merge(config, kwargs)
    # The user's settings are checked before num_envs is derived from the population.
    validate(c, len(runner.mesh_devices(c)))
    check_observations(environment, "es.train")
    return runner.train(environment, run_config(c), validate, _make_agent, "es")


__all__ = ["NonFiniteError", "TrainResult", "TrainingState", "check_observations", "public_params", "train"]
