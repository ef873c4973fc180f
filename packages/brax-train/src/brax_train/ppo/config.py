"""`PPOConfig`: every `ppo.train` setting, typed and frozen, with validation before any compile."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from brax_train.config import ConfigError, RunConfig, check_ints, is_num, run_errors
from brax_train.config import merge as _merge
from brax_train.ppo import networks as ppo_networks


class PPOConfigError(ConfigError):
    """Invalid or inconsistent PPO settings; the message names every offending key and rule."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class PPOConfig(RunConfig):
    """All settings of `ppo.train`, named and defaulted as in Google Brax's `ppo.train`.

    The runner's settings (environments, schedule, evaluation, checkpoints) come from `RunConfig`.
    """

    vision: bool = False
    """Pixel observations; not supported (must be False)."""
    augment_pixels: bool = False
    """Pixel augmentation; not supported (must be False)."""
    learning_rate: float = 1e-4
    """Adam learning rate (the initial one under the adaptive-KL schedule)."""
    entropy_cost: float = 1e-4
    """Weight of the entropy bonus."""
    discounting: float = 0.9
    """Discount factor."""
    unroll_length: int = 10
    """Steps per unroll (the time axis of the loss)."""
    batch_size: int = 32
    """Unrolls per minibatch."""
    num_minibatches: int = 16
    """Minibatches per update pass; `batch_size * num_minibatches` unrolls are collected per training step."""
    num_updates_per_batch: int = 2
    """Passes over the collected data per training step."""
    normalize_observations: bool = False
    """Normalize observations with running statistics."""
    normalize_observations_std_eps: float = 0.0
    """Added to the variance before the square root."""
    normalize_observations_mode: str = "welford"
    """`welford` (exact moments) or `ema`."""
    normalize_until_count: int | None = None
    """Freeze the statistics after this many samples."""
    reward_scaling: float = 1.0
    """Multiplier of rewards in the loss."""
    clipping_epsilon: float = 0.3
    """PPO ratio clip."""
    clipping_epsilon_value: float | None = None
    """Value clip around the rollout-time value; None disables it."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    max_grad_norm: float | None = None
    """Global gradient-norm clip; None disables it."""
    normalize_advantage: bool = True
    """Standardize advantages per minibatch."""
    vf_loss_coefficient: float = 0.5
    """Weight of the value loss."""
    bootstrap_on_timeout: bool = False
    """On time-limit steps add `discounting * V(final_obs)` to the reward instead of masking the step."""
    use_distributional_critic: bool = False
    """Distributional critic; not supported (must be False)."""
    desired_kl: float = 0.01
    """Target KL of the adaptive-KL learning-rate schedule."""
    learning_rate_schedule: str | None = None
    """None/'NONE' (constant) or 'ADAPTIVE_KL'."""
    learning_rate_schedule_min_lr: float = 1e-5
    """Lower bound of the adaptive learning rate."""
    learning_rate_schedule_max_lr: float = 1e-2
    """Upper bound of the adaptive learning rate."""
    network_factory: Callable[..., ppo_networks.PPONetworks] | Mapping[str, Any] = (
        ppo_networks.make_ppo_networks
    )
    """`fn(observation_size, action_size, preprocess_observations_fn=) -> PPONetworks`, or a mapping of
    `make_ppo_networks` keywords (as in MuJoCo Playground configs)."""
    use_pmap_on_reset: bool = True
    """Accepted for compatibility; resets always run sharded under `jax.jit`."""
    restore_params: ppo_networks.PPOParams | None = None
    """Start from these parameters (overrides the checkpoint's parameters)."""
    restore_value_fn: bool = True
    """Resume everything from the checkpoint; False: restore policy and normalizer only (warm start)."""


FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(PPOConfig))
"""Names of all `PPOConfig` fields (the keywords `ppo.train` accepts)."""


def merge(config: PPOConfig | None, kwargs: Mapping[str, Any]) -> PPOConfig:
    """`config` updated with `ppo.train` keywords; unknown keys and keys set in both places raise."""
    try:
        return _merge(PPOConfig, config, kwargs, "ppo.train")
    except ConfigError as e:
        raise PPOConfigError(str(e)) from None


def validate(c: PPOConfig, device_count: int) -> None:
    """Raise `PPOConfigError` listing every violated rule (names keys and values); no compilation."""
    errors = run_errors(c, device_count)
    check_ints(c, errors, 1, ("unroll_length", "batch_size", "num_minibatches", "num_updates_per_batch"))
    check_ints(c, errors, 1, ("normalize_until_count",), optional=True)
    for name in (
        "learning_rate",
        "entropy_cost",
        "discounting",
        "reward_scaling",
        "clipping_epsilon",
        "gae_lambda",
        "vf_loss_coefficient",
        "desired_kl",
        "learning_rate_schedule_min_lr",
        "learning_rate_schedule_max_lr",
        "normalize_observations_std_eps",
    ):
        v = getattr(c, name)
        if not is_num(v) or v < 0:
            errors.append(f"{name} must be a number >= 0, got {v!r}")
    for name in ("clipping_epsilon_value", "max_grad_norm"):
        v = getattr(c, name)
        if v is not None and (not is_num(v) or v <= 0):
            errors.append(f"{name} must be None or a number > 0, got {v!r}")
    for name in ("discounting", "gae_lambda"):
        v = getattr(c, name)
        if is_num(v) and not 0 <= v <= 1:
            errors.append(f"{name} must be in [0, 1], got {v!r}")
    for name in ("vision", "augment_pixels", "use_distributional_critic"):
        if getattr(c, name):
            errors.append(f"{name}=True is not supported by brax_train.ppo")
    if c.normalize_observations_mode not in ("welford", "ema"):
        errors.append(
            f"normalize_observations_mode must be 'welford' or 'ema', got {c.normalize_observations_mode!r}"
        )
    if schedule_name(c.learning_rate_schedule) not in ("NONE", "ADAPTIVE_KL"):
        errors.append(
            f"learning_rate_schedule must be None, 'NONE' or 'ADAPTIVE_KL', got {c.learning_rate_schedule!r}"
        )
    nf: object = c.network_factory  # runtime checks of values typed statically
    if not (callable(nf) or isinstance(nf, Mapping)):
        errors.append(
            f"network_factory must be callable or a mapping of make_ppo_networks keywords, "
            f"got {type(nf).__name__}"
        )
    restore_params: object = c.restore_params
    if restore_params is not None and not isinstance(restore_params, ppo_networks.PPOParams):
        errors.append(f"restore_params must be PPOParams, got {type(restore_params).__name__}")
    _batch_errors(c, device_count, errors)
    if errors:
        raise PPOConfigError("invalid PPO settings:\n  - " + "\n  - ".join(errors))


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


def schedule_name(schedule: Any) -> str:
    """Canonical name of a learning-rate schedule setting ('NONE' or 'ADAPTIVE_KL')."""
    if schedule is None:
        return "NONE"
    value = getattr(schedule, "value", schedule)  # accept enum members such as Brax's LRSchedule
    return str(value).upper()


__all__ = ["FIELDS", "PPOConfig", "PPOConfigError", "merge", "schedule_name", "validate"]
