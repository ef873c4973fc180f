"""Tests of `pendulum_swingup` against MuJoCo C."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

import brax_envs
from brax_envs.envs.pendulum_swingup import PendulumSwingup, _asset_xml
from brax_envs.testing import EnvCheck, check_env


@pytest.fixture(scope="module")
def checked() -> tuple[PendulumSwingup, EnvCheck]:
    env = brax_envs.get_environment("pendulum_swingup")
    assert isinstance(env, PendulumSwingup)
    return env, check_env(env, vmap="trace", num_steps=4)


def test_sizes() -> None:
    env = PendulumSwingup(n_frames=3)
    assert env.observation_size == 3 and env.action_size == 1 and env.backend == "generalized"
    assert float(env.dt) == pytest.approx(0.03)


def test_matches_mujoco_and_reward_terms(checked: tuple[PendulumSwingup, EnvCheck]) -> None:
    env, check = checked
    m = mujoco.MjModel.from_xml_string(_asset_xml())
    d = mujoco.MjData(m)
    s0 = check.states[0]
    d.qpos[:] = np.asarray(s0.pipeline_state.q)
    d.qvel[:] = np.asarray(s0.pipeline_state.qd)
    assert 0.0 <= d.qpos[0] <= 2 * np.pi and abs(d.qvel[0]) <= 1.0  # the reset ranges
    for a, s in zip(check.actions, check.states[1:], strict=True):
        d.ctrl[:] = np.asarray(a)
        for _ in range(env.n_frames):
            mujoco.mj_step(m, d)
        np.testing.assert_allclose(s.pipeline_state.q, d.qpos, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(s.pipeline_state.qd, d.qvel, rtol=1e-4, atol=1e-4)
        q = d.qpos[0]
        np.testing.assert_allclose(s.obs, [-np.cos(q), -np.sin(q), d.qvel[0]], rtol=1e-4, atol=1e-4)
        upright = (1.0 - np.cos(q)) / 2.0
        ctrl = -0.001 * float(np.sum(np.square(a)))
        np.testing.assert_allclose(s.metrics["reward_upright"], upright, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(s.metrics["reward_ctrl"], ctrl, rtol=1e-5, atol=1e-8)
        np.testing.assert_allclose(s.reward, upright + ctrl, rtol=1e-4, atol=1e-5)
        assert float(s.done) == 0.0
