"""Tests of `hopper`: sizes, reward terms by hand, the health rule and options."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from brax_envs.envs.hopper import Hopper
from brax_envs.testing import EnvCheck, check_env


@pytest.fixture(scope="module")
def checked() -> tuple[Hopper, EnvCheck]:
    env = Hopper()
    return env, check_env(env, vmap="trace", num_steps=2)


def test_sizes(checked: tuple[Hopper, EnvCheck]) -> None:
    env, _ = checked
    assert env.observation_size == 11 and env.action_size == 3
    assert float(env.dt) == pytest.approx(0.008)
    assert Hopper(exclude_current_positions_from_observation=False).observation_size == 12


def test_reward_terms(checked: tuple[Hopper, EnvCheck]) -> None:
    env, check = checked
    for s0, a, s in zip(check.states[:-1], check.actions, check.states[1:], strict=True):
        p0, p = s0.pipeline_state, s.pipeline_state
        vx = (float(p.x.pos[1, 0]) - float(p0.x.pos[1, 0])) / float(env.dt)
        ctrl = -1e-3 * float(np.sum(np.square(a)))
        np.testing.assert_allclose(s.metrics["reward_forward"], vx, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(s.metrics["reward_ctrl"], ctrl, rtol=1e-5)
        assert float(s.metrics["reward_healthy"]) == 1.0
        np.testing.assert_allclose(s.reward, vx + 1.0 + ctrl, rtol=1e-4, atol=1e-4)
        q, qd = np.asarray(p.q), np.asarray(p.qd)
        np.testing.assert_allclose(s.obs, np.concatenate([[p.x.pos[1, 2]], q[2:], np.clip(qd, -10, 10)]),
                                   atol=1e-6)
        assert float(s.done) == 0.0 and float(s.info["truncation"]) == 0.0


def test_unhealthy_terminates(checked: tuple[Hopper, EnvCheck]) -> None:
    env, check = checked
    tilted = env.pipeline_init(jnp.asarray([0.0, 0.0, 0.5, 0.0, 0.0, 0.0]), jnp.zeros(6))  # torso angle 0.5
    s = check.step(check.states[0].replace(pipeline_state=tilted), check.actions[0])
    assert float(s.done) == 1.0 and float(s.metrics["reward_healthy"]) == 1.0
    assert float(env.is_healthy(tilted)) == 0.0
    assert float(env.is_healthy(check.states[0].pipeline_state)) == 1.0
    low = env.pipeline_init(jnp.asarray([0.0, -0.6, 0.0, 0.0, 0.0, 0.0]), jnp.zeros(6))  # torso z 0.65
    assert float(env.is_healthy(low)) == 0.0
    relaxed = Hopper(healthy_z_range=(0.5, 2.0), healthy_angle_range=(-1.0, 1.0))
    assert float(relaxed.is_healthy(low)) == 1.0 and float(relaxed.is_healthy(tilted)) == 1.0


def test_no_termination_option(checked: tuple[Hopper, EnvCheck]) -> None:
    _, check = checked
    env = Hopper(terminate_when_unhealthy=False, healthy_reward=2.0, n_frames=1)
    tilted = env.pipeline_init(jnp.asarray([0.0, 0.0, 0.5, 0.0, 0.0, 0.0]), jnp.zeros(6))
    s = jax.jit(env.step)(check.states[0].replace(pipeline_state=tilted), check.actions[0])
    assert float(s.done) == 0.0 and float(s.metrics["reward_healthy"]) == 0.0
