"""Tests of `pusher`: sizes, reset distribution, reward terms by hand."""

from __future__ import annotations

import numpy as np
import pytest

from brax_envs.envs.pusher import Pusher
from brax_envs.testing import EnvCheck, check_env


@pytest.fixture(scope="module")
def checked() -> tuple[Pusher, EnvCheck]:
    env = Pusher()
    return env, check_env(env, vmap="trace", num_steps=2)


def test_sizes(checked: tuple[Pusher, EnvCheck]) -> None:
    env, _ = checked
    assert env.observation_size == 23 and env.action_size == 7
    assert float(env.dt) == pytest.approx(0.05)


def test_reset_and_reward_terms(checked: tuple[Pusher, EnvCheck]) -> None:
    env, check = checked
    q0 = np.asarray(check.states[0].pipeline_state.q)
    assert np.linalg.norm(q0[-4:-2]) >= 0.17 - 1e-6 and np.all(q0[-2:] == 0) and np.all(q0[:7] == 0)
    names = env.sys.body_names
    tips, obj, goal = (names.index(n) for n in ("tips_arm", "object", "goal"))
    for s0, a, s in zip(check.states[:-1], check.actions, check.states[1:], strict=True):
        pos = np.asarray(s0.pipeline_state.x.pos)
        near = -np.linalg.norm(pos[obj] - pos[tips])
        dist = -np.linalg.norm(pos[obj] - pos[goal])
        ctrl = -float(np.sum(np.square(2.0 * np.asarray(a))))
        np.testing.assert_allclose(s.metrics["reward_near"], near, rtol=1e-5)
        np.testing.assert_allclose(s.metrics["reward_dist"], dist, rtol=1e-5)
        np.testing.assert_allclose(s.metrics["reward_ctrl"], ctrl, rtol=1e-5)
        np.testing.assert_allclose(s.reward, dist + 0.1 * ctrl + 0.5 * near, rtol=1e-5)
        p = s.pipeline_state
        np.testing.assert_allclose(
            s.obs, np.concatenate([p.q[:7], p.qd[:7], p.x.pos[tips], p.x.pos[obj], p.x.pos[goal]]))
        assert float(s.done) == 0.0
