"""Tests of `ant`: sizes, reward terms by hand, the health rule and options."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from brax_envs.envs.ant import Ant
from brax_envs.testing import EnvCheck, check_env


@pytest.fixture(scope="module")
def checked() -> tuple[Ant, EnvCheck]:
    env = Ant()
    return env, check_env(env, num_steps=2)


def test_sizes(checked: tuple[Ant, EnvCheck]) -> None:
    env, _ = checked
    assert env.observation_size == 27 and env.action_size == 8
    assert float(env.dt) == pytest.approx(0.05)
    assert Ant(exclude_current_positions_from_observation=False).observation_size == 29
    with pytest.raises(NotImplementedError):
        Ant(use_contact_forces=True)


def test_reward_terms(checked: tuple[Ant, EnvCheck]) -> None:
    env, check = checked
    q0 = np.asarray(check.states[0].pipeline_state.q)
    assert np.linalg.norm(q0[3:7]) == pytest.approx(1.0, abs=1e-6)
    for s0, a, s in zip(check.states[:-1], check.actions, check.states[1:], strict=True):
        v = (np.asarray(s.pipeline_state.x.pos[1]) - np.asarray(s0.pipeline_state.x.pos[1])) / float(env.dt)
        ctrl = -0.5 * float(np.sum(np.square(a)))
        np.testing.assert_allclose(s.metrics["reward_forward"], v[0], rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(s.metrics["y_velocity"], v[1], rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(s.metrics["reward_ctrl"], ctrl, rtol=1e-5)
        assert float(s.metrics["reward_contact"]) == 0.0 and float(s.metrics["reward_survive"]) == 1.0
        np.testing.assert_allclose(s.reward, v[0] + 1.0 + ctrl, rtol=1e-4, atol=1e-4)
        z = float(s.pipeline_state.x.pos[1, 2])
        assert float(s.done) == float(not 0.2 <= z <= 1.0)
        np.testing.assert_allclose(s.obs, np.concatenate([s.pipeline_state.q[2:], s.pipeline_state.qd]))


def test_unhealthy_terminates(checked: tuple[Ant, EnvCheck]) -> None:
    env, check = checked
    q = np.asarray(check.states[0].pipeline_state.q).copy()
    q[2] = 1.5  # torso above healthy_z_range
    high = env.pipeline_init(jnp.asarray(q), jnp.zeros(env.sys.nv))
    s = check.step(check.states[0].replace(pipeline_state=high), check.actions[0])
    assert float(s.done) == 1.0 and float(s.info["truncation"]) == 0.0
    relaxed = Ant(terminate_when_unhealthy=False, n_frames=1)
    s = jax.jit(relaxed.step)(check.states[0].replace(pipeline_state=high), check.actions[0])
    assert float(s.done) == 0.0 and float(s.metrics["reward_survive"]) == 0.0
