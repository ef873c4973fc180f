"""Tests of `reacher`: sizes, observation and reward by hand, physics against MuJoCo C."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from brax_envs.envs import _assets
from brax_envs.envs.reacher import Reacher
from brax_envs.testing import EnvCheck, check_env


@pytest.fixture(scope="module")
def checked() -> tuple[Reacher, EnvCheck]:
    env = Reacher()
    return env, check_env(env, vmap="trace", num_steps=2)


def test_sizes(checked: tuple[Reacher, EnvCheck]) -> None:
    env, _ = checked
    assert env.observation_size == 11 and env.action_size == 2
    assert float(env.dt) == pytest.approx(0.02)


def test_matches_mujoco_and_reward(checked: tuple[Reacher, EnvCheck]) -> None:
    env, check = checked
    m = _assets.mj_model("reacher")
    d = mujoco.MjData(m)
    s0 = check.states[0]
    target = np.asarray(s0.pipeline_state.q[2:])
    assert np.linalg.norm(target) < 0.2 and np.all(np.asarray(s0.pipeline_state.qd[2:]) == 0)
    d.qpos[:], d.qvel[:] = np.asarray(s0.pipeline_state.q), np.asarray(s0.pipeline_state.qd)
    for a, s in zip(check.actions, check.states[1:], strict=True):
        d.ctrl[:] = np.asarray(a)
        for _ in range(env.n_frames):
            mujoco.mj_step(m, d)
        mujoco.mj_forward(m, d)  # positions/velocities derived from the new qpos/qvel
        np.testing.assert_allclose(s.pipeline_state.q, d.qpos, atol=1e-3)
        tip, tgt = d.xpos[3], d.xpos[4]
        vel = np.zeros(6)
        mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_BODY, 3, vel, 0)  # world frame
        obs = np.asarray(s.obs)
        arm = d.qpos[:2]
        np.testing.assert_allclose(obs[:4], np.concatenate([np.cos(arm), np.sin(arm)]), atol=1e-3)
        np.testing.assert_allclose(obs[4:6], d.qpos[2:], atol=1e-5)
        np.testing.assert_allclose(obs[6:8], vel[3:5], atol=2e-3)
        np.testing.assert_allclose(obs[8:], tip - tgt, atol=1e-3)
        dist, ctrl = -np.linalg.norm(tip - tgt), -float(np.sum(np.square(a)))
        np.testing.assert_allclose(s.metrics["reward_dist"], dist, atol=1e-3)
        np.testing.assert_allclose(s.metrics["reward_ctrl"], ctrl, rtol=1e-5)
        np.testing.assert_allclose(s.reward, dist + ctrl, atol=1e-3)
        assert float(s.done) == 0.0


def test_options(checked: tuple[Reacher, EnvCheck]) -> None:
    import jax
    _, check = checked
    env = Reacher(ctrl_cost_weight=0.0, n_frames=1)
    s = jax.jit(env.step)(check.states[0], check.actions[0])
    assert float(s.metrics["reward_ctrl"]) == 0.0
