"""dm_control's cartpole tasks against dm_control itself."""

from __future__ import annotations

import pytest

from brax_envs import testing
from brax_envs.dm_control import _oracle, load

TASKS = ("balance", "balance_sparse", "swingup", "swingup_sparse", "two_poles", "three_poles")


@pytest.mark.parametrize("task", TASKS)
def test_matches_dm_control(task: str) -> None:
    env = load("cartpole", task)
    _oracle.check(env, _oracle.samples(env, "cartpole", task, steps=30, seed=1))


@pytest.mark.parametrize("task", ["balance", "swingup", "three_poles"])
def test_initial_states_match_dm_control(task: str) -> None:
    _oracle.check_initial_distribution(load("cartpole", task), "cartpole", task)


def test_check_env_and_episode_length() -> None:
    env = load("cartpole", "swingup")
    assert env.n_frames == 1 and env.episode_length == 1000
    testing.check_env(env)
