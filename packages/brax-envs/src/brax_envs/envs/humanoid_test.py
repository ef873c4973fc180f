"""Tests of `humanoid`: sizes, observation layout (cinert/cvel vs MuJoCo), reward terms, termination."""

from __future__ import annotations

import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from brax_envs.envs import _assets
from brax_envs.envs.humanoid import Humanoid
from brax_envs.testing import EnvCheck, check_env


@pytest.fixture(scope="module")
def checked() -> tuple[Humanoid, EnvCheck]:
    env = Humanoid()
    # the humanoid's mass matrix is ill-conditioned: batched and unbatched float32 solves differ
    # by rounding amplified to ~5e-4 relative in qacc, as in humanoidstandup
    return env, check_env(env, num_steps=2, rtol=1e-3, atol=1e-3)


def test_sizes(checked: tuple[Humanoid, EnvCheck]) -> None:
    env, _ = checked
    assert env.observation_size == 244 and env.action_size == 17
    assert float(env.dt) == pytest.approx(0.015)
    assert Humanoid(exclude_current_positions_from_observation=False).observation_size == 246


def test_observation_matches_mujoco(checked: tuple[Humanoid, EnvCheck]) -> None:
    _, check = checked
    s = check.states[1]
    m = _assets.mj_model("humanoid")
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = np.asarray(s.pipeline_state.q), np.asarray(s.pipeline_state.qd)
    d.ctrl[:] = np.asarray(s.pipeline_state.ctrl)
    mujoco.mj_forward(m, d)
    obs = np.asarray(s.obs)
    np.testing.assert_allclose(obs[:45], np.concatenate([d.qpos[2:], d.qvel]), atol=1e-6)
    np.testing.assert_allclose(obs[45:155], d.cinert[1:].ravel(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(obs[155:221], d.cvel[1:].ravel(), rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(obs[221:], d.qfrc_actuator, rtol=1e-4, atol=1e-4)


def test_reward_terms(checked: tuple[Humanoid, EnvCheck]) -> None:
    env, check = checked
    for s0, a, s in zip(check.states[:-1], check.actions, check.states[1:], strict=True):
        mass = np.asarray(env.sys.body_mass)
        com0 = mass @ np.asarray(s0.pipeline_state.xipos) / mass.sum()
        com1 = mass @ np.asarray(s.pipeline_state.xipos) / mass.sum()
        vx = 1.25 * (com1[0] - com0[0]) / float(env.dt)
        ctrl = -0.1 * float(np.sum(np.square(0.4 * np.asarray(a))))
        np.testing.assert_allclose(s.metrics["reward_linvel"], vx, rtol=1e-3, atol=1e-3)
        np.testing.assert_allclose(s.metrics["reward_quadctrl"], ctrl, rtol=1e-5)
        np.testing.assert_allclose(s.reward, vx + 5.0 + ctrl, rtol=1e-3, atol=1e-3)
        np.testing.assert_allclose(s.pipeline_state.ctrl, 0.4 * np.asarray(a), rtol=1e-6)
        assert float(s.done) == 0.0


def test_fallen_terminates(checked: tuple[Humanoid, EnvCheck]) -> None:
    env, check = checked
    q = np.asarray(check.states[0].pipeline_state.q).copy()
    q[2] = 0.5
    fallen = env.pipeline_init(jnp.asarray(q), jnp.zeros(env.sys.nv))
    s = check.step(check.states[0].replace(pipeline_state=fallen), check.actions[0])
    assert float(s.done) == 1.0 and float(s.info["truncation"]) == 0.0
