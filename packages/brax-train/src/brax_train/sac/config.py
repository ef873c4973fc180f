"""`SACConfig`: every `sac.train` setting, typed and frozen, with validation before any compile."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from typing import Any

from brax_train.config import (
    Bool,
    ConfigError,
    Int,
    Num,
    RunConfig,
    factory_setting,
    is_int,
    raise_errors,
    run_errors,
    setting,
)
from brax_train.config import merge as _merge
from brax_train.sac import networks as sac_networks


class SACConfigError(ConfigError):
    """Invalid or inconsistent SAC settings; the message names every offending key and rule."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class SACConfig(RunConfig):
    """All settings of `sac.train`, named and defaulted as in Google Brax's `sac.train`.

    The runner's settings (environments, schedule, evaluation, checkpoints) come from `RunConfig`;
    `checkpoint_logdir` (Brax's name) is another name for `save_checkpoint_path`.
    `alpha_learning_rate` and `target_entropy` are brax-train additions.
    """

    learning_rate: float = setting(1e-4, Num(ge=0))
    """Adam learning rate of the policy and the Q networks."""
    discounting: float = setting(0.9, Num(ge=0, le=1))
    """Discount factor."""
    batch_size: int = setting(256, Int(ge=1))
    """Transitions per gradient step (split evenly over the devices)."""
    normalize_observations: bool = setting(False, Bool())
    """Normalize observations with running statistics (policy and Q networks)."""
    reward_scaling: float = setting(1.0, Num(ge=0))
    """Multiplier of rewards in the critic's target."""
    tau: float = setting(0.005, Num(ge=0, le=1))
    """Polyak rate of the target Q networks: `target <- (1 - tau) * target + tau * q` per gradient step."""
    min_replay_size: int = setting(0, Int(ge=0))
    """Transitions collected with a uniform-random policy before gradient steps start (counted in
    `num_timesteps`; rounded up to whole steps of `num_envs` environments)."""
    max_replay_size: int | None = setting(None, Int(ge=1, optional=True))
    """Replay capacity in transitions (a whole number of steps of `num_envs` environments is kept;
    None: `num_timesteps`, so give it explicitly to resume a run with a different `num_timesteps`)."""
    grad_updates_per_step: int = setting(1, Int(ge=1))
    """Gradient steps per environment step of all `num_envs` environments."""
    network_factory: Callable[..., sac_networks.SACNetworks] | Mapping[str, Any] = factory_setting(
        sac_networks.make_sac_networks
    )
    """`fn(observation_size, action_size, preprocess_observations_fn=) -> SACNetworks`, or a mapping of
    `make_sac_networks` keywords."""
    checkpoint_logdir: str | os.PathLike[str] | None = None
    """Brax's name of `save_checkpoint_path` (give one of the two)."""
    alpha_learning_rate: float = setting(3e-4, Num(ge=0))
    """Adam learning rate of the entropy temperature's logarithm (Brax's fixed value)."""
    target_entropy: float | None = setting(None, Num(optional=True))
    """Entropy the temperature steers the policy towards; None: `-action_size` (the SAC paper's)."""


FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(SACConfig))
"""Names of all `SACConfig` fields (the keywords `sac.train` accepts)."""

_INDEX_LIMIT = 2**31
"""Replay sampling computes `slot * num_envs` in int32."""


def merge(config: SACConfig | None, kwargs: Mapping[str, Any]) -> SACConfig:
    """`config` updated with `sac.train` keywords; unknown keys and keys set in both places raise."""
    return _merge(SACConfig, config, kwargs, "sac.train", SACConfigError)


def replay_capacity(c: SACConfig) -> int:
    """Replay capacity in transitions: `max_replay_size`, or `num_timesteps` when it is None."""
    return c.num_timesteps if c.max_replay_size is None else c.max_replay_size


def validate(c: SACConfig, device_count: int) -> None:
    """Raise `SACConfigError` listing every violated rule (names keys and values); no compilation."""
    errors = run_errors(c, device_count)
    if c.checkpoint_logdir is not None and c.save_checkpoint_path is not None:
        errors.append(
            "checkpoint_logdir and save_checkpoint_path name the same directory; give only one of them"
        )
    _replay_errors(c, device_count, errors)
    raise_errors(errors, SACConfigError, "SAC")


def _replay_errors(c: SACConfig, device_count: int, errors: list[str]) -> None:
    """The rules tying the replay buffer to the batch, the environments and the devices."""
    ints = ("num_envs", "batch_size", "min_replay_size", "num_timesteps")
    if not all(is_int(getattr(c, n)) and getattr(c, n) >= 0 for n in ints):
        return
    if c.max_replay_size is not None and not is_int(c.max_replay_size):
        return
    if c.batch_size >= 1 and c.batch_size % device_count:
        errors.append(
            f"batch_size ({c.batch_size}) must be divisible by the number of devices used "
            f"({device_count}): each device samples its share of every batch from its part of the buffer"
        )
    if c.batch_size * c.num_envs >= _INDEX_LIMIT:
        errors.append(
            f"batch_size * num_envs ({c.batch_size} * {c.num_envs}) must be below 2**31 "
            "(replay sampling indexes with 32-bit integers)"
        )
    if c.num_timesteps > 0 and c.min_replay_size >= c.num_timesteps:
        errors.append(
            f"min_replay_size ({c.min_replay_size}) must be below num_timesteps ({c.num_timesteps}): "
            "otherwise no gradient step would ever be taken"
        )
    if c.max_replay_size is None and c.num_timesteps == 0:
        return  # no training: the buffer's default size does not matter
    what = "max_replay_size" if c.max_replay_size is not None else "max_replay_size (None: num_timesteps)"
    capacity = replay_capacity(c)
    if capacity < c.batch_size:
        errors.append(
            f"{what} = {capacity} must be >= batch_size ({c.batch_size}): the replay buffer must hold a batch"
        )
    if c.num_envs >= 1 and capacity < c.num_envs:
        errors.append(
            f"{what} = {capacity} must be >= num_envs ({c.num_envs}): the replay buffer must hold one "
            "step of every environment"
        )
    if c.min_replay_size > capacity:
        errors.append(f"min_replay_size ({c.min_replay_size}) must be <= {what} = {capacity}")


__all__ = ["FIELDS", "SACConfig", "SACConfigError", "merge", "replay_capacity", "validate"]
