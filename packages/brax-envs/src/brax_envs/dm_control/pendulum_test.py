"""dm_control's pendulum task against dm_control itself."""

from __future__ import annotations

import functools

from brax_envs import testing
from brax_envs.dm_control import _oracle, load
from brax_envs.dm_control._suite import SuiteEnv


@functools.cache
def _env(task: str) -> SuiteEnv:
    return load("pendulum", task)


def test_matches_dm_control() -> None:
    env = _env("swingup")
    _oracle.check(env, _oracle.samples(env, "pendulum", "swingup", steps=30, seed=1))


def test_initial_states_match_dm_control() -> None:
    _oracle.check_initial_distribution(_env("swingup"), "pendulum", "swingup")


def test_check_env_and_episode_length() -> None:
    env = _env("swingup")
    assert env.n_frames == 1 and env.episode_length == 1000
    testing.check_env(env, vmap="trace")
