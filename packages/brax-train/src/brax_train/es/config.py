"""`ESConfig`: every `es.train` setting, typed and frozen, with validation before any compile."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from brax_train import _population
from brax_train._population import (
    COUNTS_ENV_STEPS,
    PopulationConfig,
    env_steps_per_update,
    num_rollouts,
    run_config,
    steps_per_rollout,
)
from brax_train.config import Bool, ConfigError, Int, Num, OneOf, factory_setting, setting
from brax_train.config import merge as _merge
from brax_train.es import networks as es_networks
from brax_train.es.fitness import FitnessShaping, fitness_shaping_of


class ESConfigError(ConfigError):
    """Invalid or inconsistent ES settings; the message names every offending key and rule."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ESConfig(PopulationConfig):
    """All settings of `es.train`, named and defaulted as in Google Brax's `es.train`.

    Every generation runs `2 * population_size` rollouts, so `num_envs` is not an ES setting (leave it
    unset); the runner's other settings and Brax's run length come from `PopulationConfig`.
    """

    PAIRS = "population_size"
    population_size: int = setting(128, Int(ge=1))
    """Antithetic pairs per generation (2 * population_size rollouts)."""
    perturbation_std: float = setting(0.1, Num(gt=0))
    """Standard deviation of the parameter perturbations."""
    learning_rate: float = setting(1e-3, Num(ge=0))
    """Adam learning rate."""
    l2coeff: float = setting(0.0, Num(ge=0))
    """Weight decay of the parameters, added to the search direction."""
    fitness_shaping: FitnessShaping | str = setting(
        FitnessShaping.ORIGINAL,
        OneOf(tuple(FitnessShaping.__members__), lambda v: fitness_shaping_of(v).name),
    )
    """`ORIGINAL`, `CENTERED_RANK` or `WIERSTRA` (a `FitnessShaping`, its name, or Brax's enum member)."""
    center_fitness: bool = setting(False, Bool())
    """Standardize the shaped fitness (mean 0, std 1) before the update."""
    normalize_observations: bool = setting(False, Bool())
    """Normalize observations with running statistics of the rollouts' observations."""
    network_factory: Callable[..., es_networks.ESNetworks] | Mapping[str, Any] = factory_setting(
        es_networks.make_es_networks
    )
    """`fn(observation_size=, action_size=, preprocess_observations_fn=) -> ESNetworks`, or a mapping of
    `make_es_networks` keywords."""


FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(ESConfig))
"""Names of all `ESConfig` fields (the keywords `es.train` accepts)."""


def merge(config: ESConfig | None, kwargs: Mapping[str, Any]) -> ESConfig:
    """`config` updated with `es.train` keywords; unknown keys and keys set in both places raise."""
    return _merge(ESConfig, config, kwargs, "es.train", ESConfigError)


def validate(c: ESConfig, device_count: int) -> None:
    """Raise `ESConfigError` listing every violated rule (names keys and values); no compilation."""
    _population.validate(c, device_count, ESConfigError, "ES")


__all__ = [
    "COUNTS_ENV_STEPS",
    "FIELDS",
    "ESConfig",
    "ESConfigError",
    "env_steps_per_update",
    "merge",
    "num_rollouts",
    "run_config",
    "steps_per_rollout",
    "validate",
]
