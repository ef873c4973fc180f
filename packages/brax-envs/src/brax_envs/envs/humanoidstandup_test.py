"""Tests of `humanoidstandup`: sizes and reward terms by hand."""

from __future__ import annotations

import numpy as np
import pytest

from brax_envs.envs.humanoidstandup import HumanoidStandup
from brax_envs.testing import EnvCheck, check_env


@pytest.fixture(scope="module")
def checked() -> tuple[HumanoidStandup, EnvCheck]:
    env = HumanoidStandup()
    return env, check_env(env, vmap="trace", num_steps=2)


def test_sizes(checked: tuple[HumanoidStandup, EnvCheck]) -> None:
    env, check = checked
    assert env.observation_size == 244 and env.action_size == 17
    assert float(env.dt) == pytest.approx(0.015)
    assert float(check.states[0].pipeline_state.x.pos[1, 2]) == pytest.approx(0.12, abs=0.02)  # lying


def test_reward_terms(checked: tuple[HumanoidStandup, EnvCheck]) -> None:
    env, check = checked
    for a, s in zip(check.actions, check.states[1:], strict=True):
        up = float(s.pipeline_state.x.pos[1, 2]) / float(env.dt)
        ctrl = -0.01 * float(np.sum(np.square(0.4 * np.asarray(a))))
        np.testing.assert_allclose(s.metrics["reward_linup"], up, rtol=1e-5)
        np.testing.assert_allclose(s.metrics["reward_quadctrl"], ctrl, rtol=1e-5)
        np.testing.assert_allclose(s.reward, up + ctrl + 1.0, rtol=1e-5)
        assert float(s.done) == 0.0
