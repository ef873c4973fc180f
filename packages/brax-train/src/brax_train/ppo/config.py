"""`PPOConfig`: every `ppo.train` setting, typed and frozen, with validation before any compile."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from brax_train.config import (
    ConfigError,
    Instance,
    Int,
    Num,
    OneOf,
    RunConfig,
    Unsupported,
    factory_setting,
    raise_errors,
    run_errors,
    setting,
)
from brax_train.config import merge as _merge
from brax_train.ppo import networks as ppo_networks


class PPOConfigError(ConfigError):
    """Invalid or inconsistent PPO settings; the message names every offending key and rule."""


def schedule_name(schedule: Any) -> str:
    """Canonical name of a learning-rate schedule setting ('NONE', 'ADAPTIVE_KL' or 'LINEAR')."""
    if schedule is None:
        return "NONE"
    value = getattr(schedule, "value", schedule)  # accept enum members such as Brax's LRSchedule
    return str(value).upper()


@dataclasses.dataclass(frozen=True, kw_only=True)
class PPOConfig(RunConfig):
    """All settings of `ppo.train`, named and defaulted as in Google Brax's `ppo.train`.

    The runner's settings (environments, schedule, evaluation, checkpoints) come from `RunConfig`.
    """

    vision: bool = setting(False, Unsupported("brax_train.ppo"))
    """Pixel observations; not supported (must be False)."""
    augment_pixels: bool = setting(False, Unsupported("brax_train.ppo"))
    """Pixel augmentation; not supported (must be False)."""
    learning_rate: float = setting(1e-4, Num(ge=0))
    """Adam learning rate (the initial one under the adaptive-KL schedule)."""
    entropy_cost: float = setting(1e-4, Num(ge=0))
    """Weight of the entropy bonus."""
    discounting: float = setting(0.9, Num(ge=0, le=1))
    """Discount factor."""
    unroll_length: int = setting(10, Int(ge=1))
    """Steps per unroll (the time axis of the loss)."""
    batch_size: int = setting(32, Int(ge=1))
    """Unrolls per minibatch."""
    num_minibatches: int = setting(16, Int(ge=1))
    """Minibatches per update pass; `batch_size * num_minibatches` unrolls are collected per training step."""
    num_updates_per_batch: int = setting(2, Int(ge=1))
    """Passes over the collected data per training step."""
    normalize_observations: bool = False
    """Normalize observations with running statistics."""
    normalize_observations_std_eps: float = setting(0.0, Num(ge=0))
    """Added to the variance before the square root."""
    normalize_observations_mode: str = setting("welford", OneOf(("welford", "ema")))
    """`welford` (exact moments) or `ema`."""
    normalize_until_count: int | None = setting(None, Int(ge=1, optional=True))
    """Freeze the statistics after this many samples."""
    reward_scaling: float = setting(1.0, Num(ge=0))
    """Multiplier of rewards in the loss."""
    clipping_epsilon: float = setting(0.3, Num(ge=0))
    """PPO ratio clip."""
    clipping_epsilon_value: float | None = setting(None, Num(gt=0, optional=True))
    """Value clip around the rollout-time value; None disables it."""
    gae_lambda: float = setting(0.95, Num(ge=0, le=1))
    """GAE lambda."""
    max_grad_norm: float | None = setting(None, Num(gt=0, optional=True))
    """Global gradient-norm clip; None disables it."""
    normalize_advantage: bool = True
    """Standardize advantages per minibatch."""
    vf_loss_coefficient: float = setting(0.5, Num(ge=0))
    """Weight of the value loss."""
    bootstrap_on_timeout: bool = False
    """On time-limit steps add `discounting * V(final_obs)` to the reward instead of masking the step."""
    use_distributional_critic: bool = setting(False, Unsupported("brax_train.ppo"))
    """Distributional critic; not supported (must be False)."""
    desired_kl: float = setting(0.01, Num(ge=0))
    """Target KL of the adaptive-KL learning-rate schedule."""
    learning_rate_schedule: str | None = setting(
        None, OneOf(("NONE", "ADAPTIVE_KL", "LINEAR"), schedule_name)
    )
    """None/'NONE' (constant), 'ADAPTIVE_KL', or 'LINEAR' (from `learning_rate` at the first update to
    `learning_rate_schedule_min_lr` at `num_timesteps`, then held)."""
    learning_rate_schedule_min_lr: float = setting(1e-5, Num(ge=0))
    """Lower bound of the adaptive learning rate; the linear schedule's final rate."""
    learning_rate_schedule_max_lr: float = setting(1e-2, Num(ge=0))
    """Upper bound of the adaptive learning rate."""
    network_factory: Callable[..., ppo_networks.PPONetworks] | Mapping[str, Any] = factory_setting(
        ppo_networks.make_ppo_networks
    )
    """`fn(observation_size, action_size, preprocess_observations_fn=) -> PPONetworks`, or a mapping of
    `make_ppo_networks` keywords (as in MuJoCo Playground configs)."""
    use_pmap_on_reset: bool = True
    """Accepted for compatibility; resets always run sharded under `jax.jit`."""
    restore_params: ppo_networks.PPOParams | None = setting(
        None, Instance(ppo_networks.PPOParams, "PPOParams", optional=True)
    )
    """Start from these parameters (overrides the checkpoint's parameters)."""
    restore_value_fn: bool = True
    """Resume everything from the checkpoint; False: restore policy and normalizer only (warm start)."""


FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(PPOConfig))
"""Names of all `PPOConfig` fields (the keywords `ppo.train` accepts)."""


def merge(config: PPOConfig | None, kwargs: Mapping[str, Any]) -> PPOConfig:
    """`config` updated with `ppo.train` keywords; unknown keys and keys set in both places raise."""
    return _merge(PPOConfig, config, kwargs, "ppo.train", PPOConfigError)


def errors_of(c: PPOConfig, device_count: int) -> list[str]:
    """Every violated rule of `c` (field checks, the runner's rules, PPO's batch rules) as messages."""
    found = run_errors(c, device_count)
    _batch_errors(c, device_count, found)
    return found


def validate(c: PPOConfig, device_count: int) -> None:
    """Raise `PPOConfigError` listing every violated rule (names keys and values); no compilation."""
    raise_errors(errors_of(c, device_count), PPOConfigError, "PPO")


def _batch_errors(c: PPOConfig, device_count: int, errors: list[str]) -> None:
    names = ("num_envs", "batch_size", "num_minibatches")
    if not all(isinstance(getattr(c, n), int) and getattr(c, n) >= 1 for n in names):
        return
    if (c.batch_size * c.num_minibatches) % c.num_envs:
        errors.append(
            f"batch_size * num_minibatches ({c.batch_size} * {c.num_minibatches} = "
            f"{c.batch_size * c.num_minibatches}) must be divisible by num_envs ({c.num_envs})"
        )
    if c.batch_size % device_count:
        errors.append(
            f"batch_size ({c.batch_size}) must be divisible by the number of devices used "
            f"({device_count}): every minibatch is split evenly over the devices"
        )


__all__ = ["FIELDS", "PPOConfig", "PPOConfigError", "errors_of", "merge", "schedule_name", "validate"]
