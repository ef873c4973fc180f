"""dm_control's swimmer tasks against dm_control itself."""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest

from brax_envs import testing
from brax_envs.dm_control import _oracle, load
from brax_envs.dm_control._suite import SuiteEnv

TASKS = ("swimmer6", "swimmer15")


@functools.cache
def _env(task: str) -> SuiteEnv:
    return load("swimmer", task)


@pytest.mark.parametrize("task", TASKS)
def test_matches_dm_control(task: str) -> None:
    env = _env(task)
    # 15 light links make a float32 mass-matrix solve lose ~1.5e-4 of the head's spin (float64: 2e-8)
    obs_tol = {"body_velocities": (5e-4, 1e-4)} if task == "swimmer15" else None
    # two episodes: two targets, one reached (swimmer6), one not
    samples = _oracle.samples(env, "swimmer", task, steps=10, seed=1, episodes=2)
    _oracle.check(env, samples, obs_tol=obs_tol)


@pytest.mark.parametrize("task", TASKS)
def test_initial_states_match_dm_control(task: str) -> None:
    _oracle.check_initial_distribution(_env(task), "swimmer", task)


def test_target_distribution_matches_dm_control() -> None:
    n = 1024
    env = _env("swimmer6")
    dm = _oracle.dm_env("swimmer", "swimmer6", 0)
    want = []
    for _ in range(n):
        dm.reset()
        want.append(np.array(dm.physics.named.model.geom_pos["target"]))
    w = np.stack(want)
    keys = jax.random.split(jax.random.key(0), n)
    g = np.asarray(_oracle.initial_draws(env, keys)[2]["target"])
    np.testing.assert_allclose(g[:, 2], w[:, 2], atol=1e-7)
    assert np.abs(g[:, :2]).max() <= 2.0
    # the near box's share: its 20% plus the far draws landing in it
    p_g, p_w = (np.mean(np.all(np.abs(t[:, :2]) <= 0.3, axis=1)) for t in (g, w))
    assert abs(p_g - p_w) <= 5 * np.sqrt(2 * p_w * (1 - p_w) / n), (p_g, p_w)
    for j in range(2):
        assert abs(g[:, j].mean() - w[:, j].mean()) <= 5 * np.sqrt(2 / n) * w[:, j].std()
        assert 0.9 <= g[:, j].std() / w[:, j].std() <= 1.1


def test_check_env_and_episode_length() -> None:
    env = _env("swimmer6")
    assert env.n_frames == 15 and env.episode_length == 1000
    testing.check_env(env, vmap="trace")
