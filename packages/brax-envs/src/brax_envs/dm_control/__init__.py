"""dm_control's suite as brax_envs tasks: its models, rewards, observations and initial states.

Every task of `dm_control.suite.ALL_TASKS` is registered as `dm_control/DOMAIN-TASK` (flat
observations by default; `flatten_observation=False` keeps dm_control's dict). The models come
from the installed dm_control package (the `brax-envs[dm-control]` extra); the task code is ours.
"""

from __future__ import annotations

import importlib
from typing import Any

from brax_envs.dm_control._suite import EXTRA, SOLVERS, SuiteEnv, randomize_limited_and_rotational_joints
from brax_envs.dm_control.rewards import tolerance

TASKS: dict[str, tuple[str, ...]] = {
    "acrobot": ("swingup", "swingup_sparse"),
    "ball_in_cup": ("catch",),
    "cartpole": ("balance", "balance_sparse", "swingup", "swingup_sparse", "two_poles", "three_poles"),
    "cheetah": ("run",),
    "dog": ("stand", "walk", "trot", "run", "fetch"),
    "finger": ("spin", "turn_easy", "turn_hard"),
    "fish": ("upright", "swim"),
    "hopper": ("stand", "hop"),
    "humanoid": ("stand", "walk", "run", "run_pure_state"),
    "humanoid_CMU": ("stand", "walk", "run"),
    "lqr": ("lqr_2_1", "lqr_6_2"),
    "manipulator": ("bring_ball", "bring_peg", "insert_ball", "insert_peg"),
    "pendulum": ("swingup",),
    "point_mass": ("easy", "hard"),
    "quadruped": ("walk", "run", "escape", "fetch"),
    "reacher": ("easy", "hard"),
    "stacker": ("stack_2", "stack_4"),
    "swimmer": ("swimmer6", "swimmer15"),
    "walker": ("stand", "walk", "run"),
}
"""The tasks of each domain, as dm_control's suite names them."""

DOMAINS: dict[str, str] = {d: f"brax_envs.dm_control.{d.lower()}" for d in TASKS}
"""The module of ours that holds each domain's `SuiteEnv` subclass (its `ENV`)."""

ALL_TASKS: tuple[tuple[str, str], ...] = tuple((d, t) for d, ts in TASKS.items() for t in ts)
"""(domain, task) pairs, as `dm_control.suite.ALL_TASKS`."""


def domain_class(domain: str) -> type[SuiteEnv]:
    """The `SuiteEnv` subclass of `domain`."""
    if domain not in TASKS:
        raise KeyError(f"unknown dm_control domain {domain!r}; domains: {sorted(TASKS)}")
    cls: type[SuiteEnv] = importlib.import_module(DOMAINS[domain]).ENV
    return cls


def load(domain: str, task: str, **kwargs: Any) -> SuiteEnv:
    """dm_control's `domain`-`task` on brax-physics (`kwargs`: `solver`, `debug`, task options)."""
    if task not in TASKS.get(domain, ()):
        known = TASKS.get(domain)
        raise KeyError(f"unknown dm_control task {domain}-{task}; "
                       + (f"{domain}'s tasks: {known}" if known else f"domains: {sorted(TASKS)}"))
    return domain_class(domain)(task, **kwargs)


__all__ = [
    "ALL_TASKS",
    "DOMAINS",
    "EXTRA",
    "SOLVERS",
    "TASKS",
    "SuiteEnv",
    "domain_class",
    "load",
    "randomize_limited_and_rotational_joints",
    "tolerance",
]
