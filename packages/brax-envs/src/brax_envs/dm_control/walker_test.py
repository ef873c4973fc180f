"""dm_control's walker tasks against dm_control itself."""

from __future__ import annotations

import functools

import pytest

from brax_envs import testing
from brax_envs.dm_control import _oracle, load
from brax_envs.dm_control._suite import SuiteEnv

TASKS = ("stand", "walk", "run")


@functools.cache
def _env(task: str) -> SuiteEnv:
    return load("walker", task)


@pytest.mark.parametrize("task", TASKS)
def test_matches_dm_control(task: str) -> None:
    env = _env(task)
    _oracle.check(env, _oracle.samples(env, "walker", task, steps=20, seed=1))


def test_initial_states_match_dm_control() -> None:
    # every task draws its initial state alike
    _oracle.check_initial_distribution(_env("walk"), "walker", "walk")


def test_check_env_and_episode_length() -> None:
    env = _env("walk")
    assert env.n_frames == 10 and env.episode_length == 1000
    testing.check_env(env, vmap="trace")
