"""`ARSConfig`: every `ars.train` setting, typed and frozen, with validation before any compile."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from brax_train import networks
from brax_train._population import population_errors
from brax_train.ars import networks as ars_networks
from brax_train.config import (
    Bool,
    ConfigError,
    Function,
    Int,
    Num,
    RunConfig,
    raise_errors,
    run_errors,
    setting,
)
from brax_train.config import merge as _merge


class ARSConfigError(ConfigError):
    """Invalid or inconsistent ARS settings; the message names every offending key and rule."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ARSConfig(RunConfig):
    """All settings of `ars.train`, named and defaulted as in Google Brax's `ars.train`.

    The runner's settings come from `RunConfig`; `num_envs` is not an ARS setting: every generation
    runs `2 * number_of_directions` rollouts (leave it unset).
    """

    num_timesteps: int = 100
    """Environment steps to train for (counting action repeats); 0 returns the initial parameters."""
    episode_length: int | None = 1000
    """Time limit of every rollout and evaluation episode, in environment steps."""
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
    network_factory: Callable[..., networks.FeedForwardNetwork] = setting(
        ars_networks.make_policy_network, Function()
    )
    """`fn(observation_size=, action_size=, preprocess_observations_fn=) -> FeedForwardNetwork`."""


FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(ARSConfig))
"""Names of all `ARSConfig` fields (the keywords `ars.train` accepts)."""


def merge(config: ARSConfig | None, kwargs: Mapping[str, Any]) -> ARSConfig:
    """`config` updated with `ars.train` keywords; unknown keys and keys set in both places raise."""
    return _merge(ARSConfig, config, kwargs, "ars.train", ARSConfigError)


def num_rollouts(c: ARSConfig) -> int:
    """Rollouts per generation: one per sign of each direction."""
    return 2 * c.number_of_directions


def top(c: ARSConfig) -> int:
    """Directions the update uses: `top_directions`, at most `number_of_directions` (as in Brax)."""
    return min(c.top_directions, c.number_of_directions)


def steps_per_rollout(c: ARSConfig) -> int:
    """Policy steps of one rollout: a whole episode of `episode_length` env steps."""
    assert c.episode_length is not None
    return c.episode_length // c.action_repeat


COUNTS_ENV_STEPS = True
"""A generation counts the env steps of running episodes only (`runner.Agent.counts_env_steps`)."""


def env_steps_per_update(c: ARSConfig) -> int:
    """Environment steps one generation steps at most (action repeats included); the run counts only
    those before each rollout's first `done`, as Google Brax does (`runner.Agent.counts_env_steps`)."""
    return num_rollouts(c) * steps_per_rollout(c) * c.action_repeat


def run_config(c: ARSConfig) -> ARSConfig:
    """`c` with `num_envs` set to the rollouts per generation (what the runner shards)."""
    return c.replace(num_envs=num_rollouts(c))


def validate(c: ARSConfig, device_count: int) -> None:
    """Raise `ARSConfigError` listing every violated rule (names keys and values); no compilation."""
    errors: list[str] = []
    derived = population_errors(
        c, errors, device_count, "number_of_directions", c.number_of_directions, "ars.train"
    )
    # The runner's own divisibility rule would name num_envs; population_errors names the ARS setting.
    errors += run_errors(derived, 1)
    raise_errors(errors, ARSConfigError, "ARS")


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
