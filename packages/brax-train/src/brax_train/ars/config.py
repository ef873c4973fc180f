"""`ARSConfig`: every `ars.train` setting, typed and frozen, with validation before any compile."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from brax_train import networks
from brax_train._population import population_errors
from brax_train.ars import networks as ars_networks
from brax_train.config import ConfigError, RunConfig, is_int, is_num, run_errors
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
    number_of_directions: int = 60
    """Random directions per generation (2 * number_of_directions rollouts)."""
    top_directions: int = 20
    """Directions with the best `max(r+, r-)` used in the update (capped at number_of_directions)."""
    step_size: float = 0.015
    """Step size of the update."""
    exploration_noise_std: float = 0.025
    """Standard deviation of the parameter perturbations."""
    reward_shift: float = 0.0
    """Subtracted from every training reward (the paper's survival-bonus removal)."""
    normalize_observations: bool = False
    """Normalize observations with running statistics of the rollouts' observations (ARS V2)."""
    network_factory: Callable[..., networks.FeedForwardNetwork] = ars_networks.make_policy_network
    """`fn(observation_size=, action_size=, preprocess_observations_fn=) -> FeedForwardNetwork`."""


FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(ARSConfig))
"""Names of all `ARSConfig` fields (the keywords `ars.train` accepts)."""


def merge(config: ARSConfig | None, kwargs: Mapping[str, Any]) -> ARSConfig:
    """`config` updated with `ars.train` keywords; unknown keys and keys set in both places raise."""
    try:
        return _merge(ARSConfig, config, kwargs, "ars.train")
    except ConfigError as e:
        raise ARSConfigError(str(e)) from None


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
    v: Any = c.top_directions
    if not is_int(v) or v < 1:
        errors.append(f"top_directions must be an int >= 1, got {v!r}")
    for name in ("step_size", "exploration_noise_std"):
        v = getattr(c, name)
        if not is_num(v) or not v > 0:
            errors.append(f"{name} must be a number > 0, got {v!r}")
    v = c.reward_shift
    if not is_num(v):
        errors.append(f"reward_shift must be a number, got {v!r}")
    v = c.normalize_observations
    if not isinstance(v, bool):
        errors.append(f"normalize_observations must be a bool, got {v!r}")
    nf: object = c.network_factory
    if not callable(nf):
        errors.append(f"network_factory must be callable, got {type(nf).__name__}")
    if errors:
        raise ARSConfigError("invalid ARS settings:\n  - " + "\n  - ".join(errors))


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
