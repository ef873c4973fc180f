"""`ARSConfig`: every `ars.train` setting, typed and frozen, with validation before any compile."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from brax_train import _population, networks
from brax_train._population import (
    COUNTS_ENV_STEPS,
    PopulationConfig,
    env_steps_per_update,
    num_rollouts,
    run_config,
    steps_per_rollout,
)
from brax_train.ars import networks as ars_networks
from brax_train.config import Bool, ConfigError, Int, Num, factory_setting, setting
from brax_train.config import merge as _merge


class ARSConfigError(ConfigError):
    """Invalid or inconsistent ARS settings; the message names every offending key and rule."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ARSConfig(PopulationConfig):
    """All settings of `ars.train`, named and defaulted as in Google Brax's `ars.train`.

    `PopulationConfig` holds the runner's settings and Brax's run length; `num_envs` is not an ARS
    setting: every generation runs `2 * number_of_directions` rollouts (leave it unset).
    """

    PAIRS = "number_of_directions"
    number_of_directions: int = setting(60, Int(ge=1))
    """Random directions per generation (2 * number_of_directions rollouts)."""
    top_directions: int = setting(20, Int(ge=1))
    """Directions with the best `max(r+, r-)` used in the update (capped at number_of_directions)."""
    step_size: float = setting(0.015, Num(gt=0))
    """Step size of the update."""
    exploration_noise_std: float = setting(0.025, Num(gt=0))
    """Standard deviation of the parameter perturbations."""
    reward_shift: float = setting(0.0, Num())
    """Subtracted from every training reward (the paper's survival-bonus removal)."""
    normalize_observations: bool = setting(False, Bool())
    """Normalize observations with running statistics of the rollouts' observations (ARS V2)."""
    network_factory: Callable[..., networks.FeedForwardNetwork] = factory_setting(
        ars_networks.make_policy_network, keywords=False
    )
    """`fn(observation_size=, action_size=, preprocess_observations_fn=) -> FeedForwardNetwork`."""


FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(ARSConfig))
"""Names of all `ARSConfig` fields (the keywords `ars.train` accepts)."""


def merge(config: ARSConfig | None, kwargs: Mapping[str, Any]) -> ARSConfig:
    """`config` updated with `ars.train` keywords; unknown keys and keys set in both places raise."""
    return _merge(ARSConfig, config, kwargs, "ars.train", ARSConfigError)


def top(c: ARSConfig) -> int:
    """Directions the update uses: `top_directions`, at most `number_of_directions` (as in Brax)."""
    return min(c.top_directions, c.number_of_directions)


def validate(c: ARSConfig, device_count: int) -> None:
    """Raise `ARSConfigError` listing every violated rule (names keys and values); no compilation."""
    _population.validate(c, device_count, ARSConfigError, "ARS")


__all__ = [
    "COUNTS_ENV_STEPS",
    "FIELDS",
    "ARSConfig",
    "ARSConfigError",
    "env_steps_per_update",
    "merge",
    "num_rollouts",
    "run_config",
    "steps_per_rollout",
    "top",
    "validate",
]
