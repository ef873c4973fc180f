"""dm_control's hopper tasks against dm_control itself."""

from __future__ import annotations

import functools

import pytest

from brax_envs import testing
from brax_envs.dm_control import _oracle, load
from brax_envs.dm_control._suite import SuiteEnv

TASKS = ("stand", "hop")


@functools.cache
def _env(task: str) -> SuiteEnv:
    return load("hopper", task)


@pytest.mark.parametrize("task", TASKS)
def test_matches_dm_control(task: str) -> None:
    env = _env(task)
    # short episodes from several random poses: standing ones make the reward nonzero
    samples = _oracle.samples(env, "hopper", task, steps=10, seed=0, episodes=3)
    # touch is log1p of contact forces, which a float32 constraint solve gets to ~1e-3 (float64: 3e-5)
    _oracle.check(env, samples, obs_tol={"touch": (1e-3, 1e-3)})


def test_initial_states_match_dm_control() -> None:
    # both tasks draw their initial state alike
    _oracle.check_initial_distribution(_env("hop"), "hopper", "hop")


def test_check_env_and_episode_length() -> None:
    env = _env("hop")
    assert env.n_frames == 4 and env.episode_length == 1000
    testing.check_env(env, vmap="trace")
