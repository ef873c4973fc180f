"""dm_control's manipulator tasks against dm_control itself."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from brax_envs import testing
from brax_envs.dm_control import _oracle, load
from brax_envs.dm_control._suite import SuiteEnv

TASKS = ("bring_ball", "bring_peg", "insert_ball", "insert_peg")


@functools.cache
def _env(task: str) -> SuiteEnv:
    return load("manipulator", task)


@pytest.mark.parametrize("task", TASKS)
def test_matches_dm_control(task: str) -> None:
    env = _env(task)
    _oracle.check(env, _oracle.samples(env, "manipulator", task, steps=20, seed=1))


@pytest.mark.parametrize("task", TASKS)
def test_initial_states_match_dm_control(task: str) -> None:
    # the target lives in the model for dm_control, in info for us
    _oracle.check_initial_distribution(_env(task), "manipulator", task, info_keys=("target",))


def test_check_env_and_episode_length() -> None:
    env = _env("insert_ball")
    assert env.n_frames == 10 and env.episode_length == 1000
    # batching compiled and compared on cartpole (cartpole_test.py); traced here
    check = testing.check_env(env, vmap="trace")
    # the cup (a mocap body) sits at the target, from the reset state on
    for state in check.states[:2]:
        target = np.asarray(state.info["task"]["target"])
        cup = np.asarray(state.pipeline_state.x.pos[env.body_ids("cup")[0]])
        np.testing.assert_allclose(cup[[0, 2]], target[:2], atol=1e-6)
        mocap = np.asarray(state.pipeline_state.mocap_pos[0])
        np.testing.assert_allclose(mocap[[0, 2]], target[:2], atol=1e-6)
