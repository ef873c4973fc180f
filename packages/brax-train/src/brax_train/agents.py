"""The registry of training agents: their names, and each agent's pieces found by name.

One owner of "which agents exist": checkpoints name their agent in `meta["agent"]`, and
`checkpoint.load` and the CLI find the agent here. An agent `name` is a subpackage
`brax_train.<name>` exporting `train`, `policy_from_checkpoint`, `env_steps_per_update` and its
config class `<NAME>Config` (a `RunConfig`), whose module `brax_train.<name>.config` has
`validate(config, device_count)` and, where the agent derives settings from others, `resolve(config)`
(and `COUNTS_ENV_STEPS = True` where its updates count the env steps they consumed); an agent
whose policies act on a wrapped environment (RPPO's carries the hidden state) also exports
`policy_env(env, settings)`, which the CLI's eval, render and replay use.
Subpackages are imported on first use, so loading a PPO
checkpoint never imports another agent's code.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import pathlib
from collections.abc import Callable, Mapping
from typing import Any

from brax_train.config import RunConfig

AGENTS: tuple[str, ...] = ("ppo", "sac", "apg", "es", "ars", "bc", "rppo")
"""Names of the agents (`brax-train train --agent NAME`, `meta["agent"]` of checkpoints)."""


@dataclasses.dataclass(frozen=True)
class AgentSpec:
    """What the runner's users (checkpoints, CLI) need of one agent."""

    name: str
    """The agent's name in `AGENTS`."""
    config_class: type[RunConfig]
    """Its config dataclass, the only place its defaults live."""
    validate: Callable[[Any, int], None]
    """`validate(config, device_count)`: raises a `ConfigError` naming every bad setting."""
    resolve: Callable[[Any], Any]
    """A validated config in the runner's terms (e.g. `num_timesteps` from APG's `policy_updates`)."""
    env_steps_per_update: Callable[[Any], int]
    """Environment steps one training step consumes under a config (at most, if `counts_env_steps`)."""
    counts_env_steps: bool
    """The agent counts the env steps each update consumed (its config module's `COUNTS_ENV_STEPS`;
    `runner.Agent.counts_env_steps`): the run ends at `num_timesteps` counted steps."""
    train: Callable[..., Any]
    """`train(environment, config=None, **kwargs) -> runner.TrainResult`."""
    policy_from_checkpoint: Callable[[pathlib.Path, dict[str, Any], Any], tuple[Callable[..., Any], Any]]
    """`(step_dir, meta, network_factory) -> (make_policy, params)`, rebuilt from `meta` alone."""
    policy_env: Callable[[Any, Mapping[str, Any]], Any]
    """`policy_env(env, settings) -> env`: the environment the agent's policies act on, from a run's
    JSON settings (the package's `policy_env`; else `env` itself, as for every feed-forward agent)."""


def _identity(c: Any) -> Any:
    """A config that needs no resolving."""
    return c


def _same_env(env: Any, settings: Mapping[str, Any]) -> Any:
    """Policies that act on the environment itself."""
    del settings
    return env


@functools.cache
def spec(name: str) -> AgentSpec:
    """The pieces of agent `name`; `ValueError` naming the known agents for any other name."""
    if name not in AGENTS:
        raise ValueError(f"unknown agent {name!r}; known agents: {', '.join(AGENTS)}")
    package = importlib.import_module(f"brax_train.{name}")
    config = importlib.import_module(f"brax_train.{name}.config")
    return AgentSpec(
        name=name,
        config_class=getattr(package, f"{name.upper()}Config"),
        validate=config.validate,
        resolve=getattr(config, "resolve", _identity),
        env_steps_per_update=package.env_steps_per_update,
        counts_env_steps=bool(getattr(config, "COUNTS_ENV_STEPS", False)),
        train=package.train,
        policy_from_checkpoint=package.policy_from_checkpoint,
        policy_env=getattr(package, "policy_env", _same_env),
    )


__all__ = ["AGENTS", "AgentSpec", "spec"]
