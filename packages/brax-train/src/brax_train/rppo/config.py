"""`RPPOConfig`: PPO's settings plus the recurrent state size, validated before any compile."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from brax_train.config import Int, factory_setting, raise_errors, setting
from brax_train.config import merge as _merge
from brax_train.ppo import config as ppo_config
from brax_train.ppo import networks as ppo_networks
from brax_train.rppo import networks as rppo_networks


class RPPOConfigError(ppo_config.PPOConfigError):
    """Invalid or inconsistent recurrent-PPO settings; the message names every offending key and rule."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class RPPOConfig(ppo_config.PPOConfig):
    """All settings of `rppo.train`: `PPOConfig`'s, with a recurrent network and its state size.

    An update trains on whole unrolls: each minibatch is `batch_size` unrolls of `unroll_length`
    steps, replayed from the hidden state stored at each unroll's first step.
    """

    hidden_size: int = setting(32, Int(ge=1))
    """Size of the policy's GRU state, which the environment state carries (`MemoryWrapper`)."""
    network_factory: Callable[..., ppo_networks.PPONetworks] | Mapping[str, Any] = factory_setting(
        rppo_networks.make_rppo_networks
    )
    """`fn(observation_size, action_size, preprocess_observations_fn=, hidden_size=) -> RPPONetworks`
    (the environment's own sizes), or a mapping of `make_rppo_networks` keywords."""


FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RPPOConfig))
"""Names of all `RPPOConfig` fields (the keywords `rppo.train` accepts)."""


def merge(config: RPPOConfig | None, kwargs: Mapping[str, Any]) -> RPPOConfig:
    """`config` updated with `rppo.train` keywords; unknown keys and keys set in both places raise."""
    return _merge(RPPOConfig, config, kwargs, "rppo.train", RPPOConfigError)


def validate(c: RPPOConfig, device_count: int) -> None:
    """Raise `RPPOConfigError` listing every violated rule (PPO's and the recurrent ones); no compilation."""
    errors = ppo_config.errors_of(c, device_count)
    if not c.wrap_env:
        errors.append(
            "wrap_env=False is not supported by brax_train.rppo: its auto-reset zeroes the hidden state"
        )
    raise_errors(errors, RPPOConfigError, "RPPO")


__all__ = ["FIELDS", "RPPOConfig", "RPPOConfigError", "merge", "validate"]
