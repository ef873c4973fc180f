"""The registry of training agents: their names, and each agent's explicit spec.

One owner of "which agents exist": checkpoints name their agent in `meta["agent"]`, and
`checkpoint.load` and the CLI find the agent here. An agent `name` is a subpackage
`brax_train.<name>` whose `spec.py` builds its `SPEC`, an `AgentSpec` (its config class and rules,
its trainer, its checkpoint codec, whether it counts env steps), exported by the package. To add an
agent: a subpackage with `config.py`, `networks.py`, `train.py` and `spec.py` as the others have,
and its name in `AGENTS`. Subpackages are imported on first use, so loading a PPO checkpoint never
imports another agent's code.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import pathlib
from collections.abc import Callable, Mapping
from typing import Any, Generic, Protocol, TypeVar

from brax_train.config import RunConfig

AGENTS: tuple[str, ...] = ("ppo", "sac", "apg", "es", "ars", "bc", "rppo")
"""Names of the agents (`brax-train train --agent NAME`, `meta["agent"]` of checkpoints)."""


C = TypeVar("C", bound=RunConfig)
_T = TypeVar("_T")


def _identity(c: _T) -> _T:
    """A config that needs no resolving."""
    return c


def _same_env(env: Any, settings: Mapping[str, Any]) -> Any:
    """Policies that act on the environment itself."""
    del settings
    return env


class PolicyFromCheckpoint(Protocol):
    """`(step_dir, meta, network_factory=None) -> (make_policy, params)` (a `checkpoint.NetworksCodec`'s)."""

    def __call__(
        self, step_dir: pathlib.Path, meta: dict[str, Any],
        network_factory: Callable[..., Any] | None = None, /,
    ) -> tuple[Callable[..., Any], Any]: ...


@dataclasses.dataclass(frozen=True, kw_only=True)
class AgentSpec(Generic[C]):
    """What the runner's users (checkpoints, CLI) need of one agent."""

    name: str
    """The agent's name in `AGENTS`."""
    config_class: type[C]
    """Its config dataclass, the only place its defaults live."""
    validate: Callable[[C, int], None]
    """`validate(config, device_count)`: raises a `ConfigError` naming every bad setting."""
    env_steps_per_update: Callable[[C], int]
    """Environment steps one training step consumes under a config (at most, if `counts_env_steps`)."""
    train: Callable[..., Any]
    """`train(environment, config=None, **kwargs) -> runner.TrainResult`."""
    policy_from_checkpoint: PolicyFromCheckpoint
    """`(step_dir, meta, network_factory) -> (make_policy, params)`, rebuilt from `meta` alone (its
    `checkpoint.NetworksCodec`)."""
    resolve: Callable[[C], C] = _identity
    """A validated config in the runner's terms (e.g. `num_timesteps` from APG's `policy_updates`)."""
    counts_env_steps: bool = False
    """The agent counts the env steps each update consumed (its config module's `COUNTS_ENV_STEPS`;
    `runner.Agent.counts_env_steps`): the run ends at `num_timesteps` counted steps."""
    policy_env: Callable[[Any, Mapping[str, Any]], Any] = _same_env
    """`policy_env(env, settings) -> env`: the environment the agent's policies act on, from a run's
    JSON settings (RPPO's carries the hidden state; feed-forward agents act on `env` itself)."""


@functools.cache
def spec(name: str) -> AgentSpec[Any]:
    """Agent `name`'s spec (its package's `SPEC`); `ValueError` naming the known agents for any other name."""
    if name not in AGENTS:
        raise ValueError(f"unknown agent {name!r}; known agents: {', '.join(AGENTS)}")
    found = getattr(importlib.import_module(f"brax_train.{name}"), "SPEC", None)
    if not isinstance(found, AgentSpec) or found.name != name:
        raise TypeError(f"brax_train.{name}.SPEC must be the AgentSpec named {name!r}, got {found!r}")
    return found


__all__ = ["AGENTS", "AgentSpec", "PolicyFromCheckpoint", "spec"]
