"""Tests of `inverted_pendulum` (against MuJoCo C and a hand computation)."""

from __future__ import annotations

import jax
import mujoco
import numpy as np
import pytest

from brax_envs.envs import _assets
from brax_envs.envs.inverted_pendulum import InvertedPendulum
from brax_envs.testing import EnvCheck, check_env


@pytest.fixture(scope="module")
def checked() -> tuple[InvertedPendulum, EnvCheck]:
    env = InvertedPendulum()
    return env, check_env(env, num_steps=2)


def test_sizes(checked: tuple[InvertedPendulum, EnvCheck]) -> None:
    env, _ = checked
    assert env.observation_size == 4 and env.action_size == 1
    assert float(env.dt) == pytest.approx(0.04)


def test_matches_mujoco_and_reward(checked: tuple[InvertedPendulum, EnvCheck]) -> None:
    env, check = checked
    m = _assets.mj_model("inverted_pendulum")
    d = mujoco.MjData(m)
    s0 = check.states[0]
    assert np.all(np.abs(np.asarray(s0.pipeline_state.q)) <= 0.01)
    d.qpos[:], d.qvel[:] = np.asarray(s0.pipeline_state.q), np.asarray(s0.pipeline_state.qd)
    for a, s in zip(check.actions, check.states[1:], strict=True):
        d.ctrl[:] = 3.0 * np.asarray(a)  # [-1, 1] onto the ctrlrange [-3, 3] (MuJoCo clamps beyond)
        for _ in range(env.n_frames):
            mujoco.mj_step(m, d)
        np.testing.assert_allclose(s.pipeline_state.q, d.qpos, atol=1e-3)
        ps = s.pipeline_state
        np.testing.assert_allclose(s.obs, np.concatenate([ps.q, ps.qd]), atol=1e-6)
        assert float(s.reward) == 1.0 and float(s.metrics["reward_survive"]) == 1.0
        assert float(s.done) == float(abs(float(s.pipeline_state.q[1])) > 0.2)
        assert float(s.info["truncation"]) == 0.0


def test_termination(checked: tuple[InvertedPendulum, EnvCheck]) -> None:
    env, check = checked
    ps = env.pipeline_init(jax.numpy.asarray([0.0, 0.5]), jax.numpy.zeros(2))
    s = check.step(check.states[0].replace(pipeline_state=ps), check.actions[0])
    assert float(s.done) == 1.0 and float(s.reward) == 1.0


def test_options() -> None:
    m = _assets.mj_model("inverted_pendulum")
    assert InvertedPendulum(n_frames=5).dt == pytest.approx(5 * m.opt.timestep)
    key = jax.random.PRNGKey(3)
    q = InvertedPendulum(reset_noise_scale=0.3).reset(key).pipeline_state.q
    assert float(np.max(np.abs(np.asarray(q)))) > 0.01  # wider than the default 0.01
