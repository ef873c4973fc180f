"""Tests of `swimmer`: sizes, reward terms by hand, physics (with fluid forces) against MuJoCo C."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from brax_envs.envs import _assets
from brax_envs.envs.swimmer import Swimmer
from brax_envs.testing import EnvCheck, check_env


@pytest.fixture(scope="module")
def checked() -> tuple[Swimmer, EnvCheck]:
    env = Swimmer()
    return env, check_env(env, vmap="trace", num_steps=2)


def test_sizes(checked: tuple[Swimmer, EnvCheck]) -> None:
    env, _ = checked
    assert env.observation_size == 8 and env.action_size == 2
    assert float(env.dt) == pytest.approx(0.04)
    assert Swimmer(exclude_current_positions_from_observation=False).observation_size == 10


def test_reward_terms(checked: tuple[Swimmer, EnvCheck]) -> None:
    env, check = checked
    for s0, a, s in zip(check.states[:-1], check.actions, check.states[1:], strict=True):
        vx = (float(s.pipeline_state.q[0]) - float(s0.pipeline_state.q[0])) / float(env.dt)
        ctrl = -1e-4 * float(np.sum(np.square(a)))
        np.testing.assert_allclose(s.metrics["reward_fwd"], vx, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(s.reward, vx + ctrl, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(s.obs, np.concatenate([s.pipeline_state.q[2:], s.pipeline_state.qd]))


def test_matches_mujoco(checked: tuple[Swimmer, EnvCheck]) -> None:
    env, check = checked
    m = _assets.mj_model("swimmer")
    d = mujoco.MjData(m)
    s0 = check.states[0]
    d.qpos[:], d.qvel[:] = np.asarray(s0.pipeline_state.q), np.asarray(s0.pipeline_state.qd)
    for a, s in zip(check.actions, check.states[1:], strict=True):
        d.ctrl[:] = np.asarray(a)
        for _ in range(env.n_frames):
            mujoco.mj_step(m, d)
        np.testing.assert_allclose(s.pipeline_state.q, d.qpos, atol=1e-3)
