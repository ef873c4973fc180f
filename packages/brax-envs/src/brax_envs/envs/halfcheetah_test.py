"""Tests of `halfcheetah`: sizes, reward terms by hand, one step against MuJoCo C."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from brax_envs.envs import _assets
from brax_envs.envs.halfcheetah import Halfcheetah
from brax_envs.testing import EnvCheck, check_env


@pytest.fixture(scope="module")
def checked() -> tuple[Halfcheetah, EnvCheck]:
    env = Halfcheetah()
    return env, check_env(env, vmap="trace", num_steps=2)


def test_sizes(checked: tuple[Halfcheetah, EnvCheck]) -> None:
    env, _ = checked
    assert env.observation_size == 17 and env.action_size == 6
    assert float(env.dt) == pytest.approx(0.05)
    assert Halfcheetah(exclude_current_positions_from_observation=False).observation_size == 18


def test_reward_terms(checked: tuple[Halfcheetah, EnvCheck]) -> None:
    env, check = checked
    for s0, a, s in zip(check.states[:-1], check.actions, check.states[1:], strict=True):
        vx = (float(s.pipeline_state.x.pos[1, 0]) - float(s0.pipeline_state.x.pos[1, 0])) / float(env.dt)
        ctrl = -0.1 * float(np.sum(np.square(a)))
        np.testing.assert_allclose(s.metrics["reward_run"], vx, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(s.metrics["reward_ctrl"], ctrl, rtol=1e-5)
        np.testing.assert_allclose(s.reward, vx + ctrl, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(s.obs, np.concatenate([s.pipeline_state.q[1:], s.pipeline_state.qd]))
        assert float(s.done) == 0.0


def test_first_step_matches_mujoco(checked: tuple[Halfcheetah, EnvCheck]) -> None:
    env, check = checked
    m = _assets.mj_model("halfcheetah")
    d = mujoco.MjData(m)
    s0, s1 = check.states[0], check.states[1]
    d.qpos[:], d.qvel[:] = np.asarray(s0.pipeline_state.q), np.asarray(s0.pipeline_state.qd)
    d.ctrl[:] = np.asarray(check.actions[0])
    for _ in range(env.n_frames):
        mujoco.mj_step(m, d)
    np.testing.assert_allclose(s1.pipeline_state.q, d.qpos, atol=1e-3)


def test_options(checked: tuple[Halfcheetah, EnvCheck]) -> None:
    _, check = checked
    import jax
    env = Halfcheetah(forward_reward_weight=2.0, ctrl_cost_weight=1.0, n_frames=1)
    s = jax.jit(env.step)(check.states[0], check.actions[0])
    p0, p = check.states[0].pipeline_state, s.pipeline_state
    vx = (float(p.x.pos[1, 0]) - float(p0.x.pos[1, 0])) / float(env.dt)
    np.testing.assert_allclose(s.metrics["reward_run"], 2.0 * vx, rtol=1e-4, atol=1e-4)
    ctrl_cost = float(np.sum(np.square(check.actions[0])))
    np.testing.assert_allclose(s.metrics["reward_ctrl"], -ctrl_cost, rtol=1e-5)
