"""Tests of `inverted_double_pendulum` (tip against MuJoCo's site, physics against mj_step)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from brax_envs.envs import _assets
from brax_envs.envs.inverted_double_pendulum import InvertedDoublePendulum, tip_position
from brax_envs.testing import EnvCheck, check_env


@pytest.fixture(scope="module")
def checked() -> tuple[InvertedDoublePendulum, EnvCheck]:
    env = InvertedDoublePendulum()
    return env, check_env(env, vmap="trace", num_steps=2)


def test_sizes(checked: tuple[InvertedDoublePendulum, EnvCheck]) -> None:
    env, _ = checked
    assert env.observation_size == 8 and env.action_size == 1
    assert float(env.dt) == pytest.approx(0.02)


def test_tip_is_mujoco_site() -> None:
    m = _assets.mj_model("inverted_double_pendulum")
    d = mujoco.MjData(m)
    env = InvertedDoublePendulum()
    for q in ([0.0, 0.0, 0.0], [0.3, 0.7, -1.2], [-0.5, 2.5, 1.0]):
        d.qpos[:] = q
        mujoco.mj_kinematics(m, d)
        ps = env.pipeline_init(jnp.asarray(q, jnp.float32), jnp.zeros(3, jnp.float32))
        np.testing.assert_allclose(tip_position(ps), d.site_xpos[0], atol=1e-5)


def test_matches_mujoco_and_reward(checked: tuple[InvertedDoublePendulum, EnvCheck]) -> None:
    env, check = checked
    m = _assets.mj_model("inverted_double_pendulum")
    d = mujoco.MjData(m)
    s0 = check.states[0]
    d.qpos[:], d.qvel[:] = np.asarray(s0.pipeline_state.q), np.asarray(s0.pipeline_state.qd)
    for a, s in zip(check.actions, check.states[1:], strict=True):
        d.ctrl[:] = np.asarray(a)
        for _ in range(env.n_frames):
            mujoco.mj_step(m, d)
        mujoco.mj_forward(m, d)  # positions/velocities derived from the new qpos/qvel
        np.testing.assert_allclose(s.pipeline_state.q, d.qpos, atol=1e-3)
        x, _, z = d.site_xpos[0]
        v = d.qvel
        dist = -(0.01 * x**2 + (z - 2) ** 2)
        vel = -(1e-3 * v[1] ** 2 + 5e-3 * v[2] ** 2)
        np.testing.assert_allclose(s.metrics["reward_distance"], dist, atol=1e-3)
        np.testing.assert_allclose(s.metrics["reward_velocity"], vel, atol=1e-3)
        assert float(s.done) == 0.0 and float(s.metrics["reward_alive"]) == 10.0
        np.testing.assert_allclose(s.reward, 10.0 + dist + vel, atol=2e-3)
        q = np.asarray(s.pipeline_state.q)
        expected = [q[:1], np.sin(q[1:]), np.cos(q[1:]), np.clip(s.pipeline_state.qd, -10, 10)]
        np.testing.assert_allclose(s.obs, np.concatenate(expected), atol=1e-6)


def test_termination(checked: tuple[InvertedDoublePendulum, EnvCheck]) -> None:
    env, check = checked
    ps = env.pipeline_init(jnp.asarray([0.0, 1.5, 0.5]), jnp.zeros(3))  # tip below 1 m
    s = check.step(check.states[0].replace(pipeline_state=ps), check.actions[0])
    assert float(s.done) == 1.0 and float(s.metrics["reward_alive"]) == 0.0
    assert float(s.info["truncation"]) == 0.0


def test_options() -> None:
    env = InvertedDoublePendulum(reset_noise_scale=0.5, n_frames=5)
    assert float(env.dt) == pytest.approx(0.05)
    q = env.reset(jax.random.PRNGKey(1)).pipeline_state.q
    assert float(np.max(np.abs(np.asarray(q)))) > 0.01
