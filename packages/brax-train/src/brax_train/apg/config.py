"""`APGConfig`: every `apg.train` setting, typed and frozen, with validation before any compile."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

from brax_train.apg import networks as apg_networks
from brax_train.config import (
    Bool,
    ConfigError,
    Int,
    Num,
    RunConfig,
    Satisfies,
    Unsupported,
    factory_setting,
    is_int,
    is_num,
    raise_errors,
    run_errors,
    setting,
)
from brax_train.config import merge as _merge


class APGConfigError(ConfigError):
    """Invalid or inconsistent APG settings; the message names every offending key and rule."""


def _betas(b: object) -> bool:
    """Adam's (b1, b2): a pair of numbers in [0, 1)."""
    return isinstance(b, tuple | list) and len(b) == 2 and all(is_num(x) and 0 <= x < 1 for x in b)


@dataclasses.dataclass(frozen=True, kw_only=True)
class APGConfig(RunConfig):
    """All settings of `apg.train`, named and defaulted as in Google Brax's `apg.train`.

    The runner's settings (environments, schedule, evaluation, checkpoints) come from `RunConfig`.
    The length of a run is `policy_updates` (Brax's) or, equivalently, `num_timesteps` (env steps).
    """

    policy_updates: int | None = setting(None, Int(ge=0, optional=True))
    """Policy updates (training steps) to run; None: derived from `num_timesteps`."""
    horizon_length: int = setting(32, Int(ge=1))
    """Environment steps (action repeats included) differentiated through per policy update."""
    truncation_length: int | None = setting(None, Int(ge=1, optional=True))
    """Cut the backward pass every this many steps of a rollout (stop_gradient of the state); None: never."""
    learning_rate: float = setting(1e-4, Num(gt=0))
    """Adam learning rate (the initial one when `use_schedule`)."""
    adam_b: tuple[float, float] = setting(
        (0.7, 0.95), Satisfies(_betas, "a pair (b1, b2) of numbers in [0, 1)")
    )
    """Adam's `(b1, b2)`."""
    use_schedule: bool = setting(True, Bool())
    """Decay the learning rate exponentially, by `schedule_decay` per update."""
    schedule_decay: float = setting(0.997, Num(gt=0, le=1))
    """Per-update learning-rate decay factor when `use_schedule`."""
    use_float64: bool = setting(False, Unsupported("brax_train.apg", " (it computes in float32)"))
    """Float64 statistics; not supported (must be False): brax_train computes in float32."""
    max_gradient_norm: float = setting(1e9, Num(gt=0))
    """Global gradient-norm clip applied before Adam (each element is also clipped to [-1, 1], as Brax)."""
    normalize_observations: bool = setting(False, Bool())
    """Normalize observations with running statistics."""
    network_factory: Callable[..., apg_networks.APGNetworks] | Mapping[str, Any] = factory_setting(
        apg_networks.make_apg_networks
    )
    """`fn(observation_size, action_size, preprocess_observations_fn=) -> APGNetworks`, or a mapping of
    `make_apg_networks` keywords."""


FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(APGConfig))
"""Names of all `APGConfig` fields (the keywords `apg.train` accepts)."""


def merge(config: APGConfig | None, kwargs: Mapping[str, Any]) -> APGConfig:
    """`config` updated with `apg.train` keywords; unknown keys and keys set in both places raise."""
    return _merge(APGConfig, config, kwargs, "apg.train", APGConfigError)


def steps_per_update(c: APGConfig) -> int:
    """Environment steps per env in one rollout (`horizon_length // action_repeat`)."""
    return c.horizon_length // c.action_repeat


def env_steps_per_update(c: APGConfig) -> int:
    """Environment steps one policy update consumes (all envs, action repeats included)."""
    return c.num_envs * steps_per_update(c) * c.action_repeat


def validate(c: APGConfig, device_count: int) -> None:
    """Raise `APGConfigError` listing every violated rule (names keys and values); no compilation."""
    errors = run_errors(c, device_count)
    ints = is_int(c.horizon_length) and is_int(c.action_repeat) and c.action_repeat >= 1
    if ints and c.horizon_length < c.action_repeat:
        errors.append(
            f"horizon_length ({c.horizon_length}) must be >= action_repeat ({c.action_repeat}): "
            "a rollout has horizon_length // action_repeat steps"
        )
    if not errors:
        _length_errors(c, errors)
    raise_errors(errors, APGConfigError, "APG")


def _length_errors(c: APGConfig, errors: list[str]) -> None:
    if c.policy_updates is None or c.num_timesteps == 0:
        return
    per_update = env_steps_per_update(c)
    if math.ceil(c.num_timesteps / per_update) != c.policy_updates:
        errors.append(
            f"policy_updates ({c.policy_updates}) and num_timesteps ({c.num_timesteps}) disagree: one "
            f"update is {per_update} env steps (num_envs * horizon_length, in whole action repeats); "
            "give only one of them"
        )


def resolve(c: APGConfig) -> APGConfig:
    """A validated config with `num_timesteps` set from `policy_updates` (what the runner schedules)."""
    if c.policy_updates is None:
        return c
    return c.replace(num_timesteps=c.policy_updates * env_steps_per_update(c))


__all__ = [
    "FIELDS",
    "APGConfig",
    "APGConfigError",
    "env_steps_per_update",
    "merge",
    "resolve",
    "steps_per_update",
    "validate",
]
