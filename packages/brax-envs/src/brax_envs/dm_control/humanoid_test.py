"""dm_control's humanoid tasks against dm_control itself."""

from __future__ import annotations

import functools

import pytest

from brax_envs import testing
from brax_envs.dm_control import _oracle, load
from brax_envs.dm_control._suite import SuiteEnv

# Velocities after a step with contacts or joint limits carry our float32 constraint solver's error
# against MuJoCo's float64 one (about 1e-4 relative).
OBS_TOL = {"velocity": (1e-4, 1e-4)}
TASKS = ("stand", "walk", "run", "run_pure_state")


@functools.cache
def _env(task: str) -> SuiteEnv:
    return load("humanoid", task)


@pytest.mark.parametrize("task", TASKS)
def test_matches_dm_control(task: str) -> None:
    env = _env(task)
    _oracle.check(env, _oracle.samples(env, "humanoid", task, steps=20, seed=1), obs_tol=OBS_TOL)


def test_initial_states_match_dm_control() -> None:
    # every task draws its initial state the same way
    _oracle.check_initial_distribution(_env("stand"), "humanoid", "stand", n=64)


def test_check_env_and_episode_length() -> None:
    env = _env("walk")
    assert env.n_frames == 5 and env.episode_length == 1000
    testing.check_env(env, vmap="trace")
