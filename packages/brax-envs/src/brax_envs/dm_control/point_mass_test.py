"""dm_control's point_mass tasks against dm_control itself."""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest

from brax_envs import testing
from brax_envs.dm_control import _oracle, load
from brax_envs.dm_control._suite import SuiteEnv
from brax_envs.dm_control.point_mass import PointMass


@functools.cache
def _env(task: str) -> PointMass:
    env = load("point_mass", task)
    assert isinstance(env, PointMass)
    return env


@pytest.mark.parametrize("task", ["easy", "hard"])
def test_matches_dm_control(task: str) -> None:
    env: SuiteEnv = _env(task)
    batch = _oracle.samples(env, "point_mass", task, steps=30, seed=1)
    if task == "hard":
        # One episode, so one draw of the actuation directions: the oracle simulates that System.
        wrap = batch[0].task_info["wrap_prm"]
        assert all(np.array_equal(s.task_info["wrap_prm"], wrap) for s in batch)
        episode = env.with_sys(_env(task).episode_sys({"wrap_prm": jax.numpy.asarray(wrap)}))
        assert isinstance(episode, SuiteEnv)
        env = episode
    _oracle.check(env, batch)


def test_initial_states_match_dm_control() -> None:
    _oracle.check_initial_distribution(_env("easy"), "point_mass", "easy")


def _directions(wrap: np.ndarray) -> np.ndarray:
    """(n, 5): both unit directions and the |cosine| between them."""
    return np.concatenate([wrap, np.abs(np.sum(wrap[:, :2] * wrap[:, 2:], axis=1, keepdims=True))], axis=1)


def test_hard_actuation_directions_match_dm_control() -> None:
    n = 256
    dm = _oracle.dm_env("point_mass", "hard", 0)
    want = []
    for _ in range(n):
        dm.reset()
        want.append(np.array(dm.physics.model.wrap_prm[:4]))
    env = _env("hard")
    # the draw alone (reset's physics state adds a compile and tells nothing more here)
    _, _, info = _oracle.initial_draws(env, jax.random.split(jax.random.key(0), n))
    got = np.asarray(info["wrap_prm"])
    w, g = _directions(np.stack(want)), _directions(got.astype(np.float64))
    assert g[:, 4].max() <= 0.9 + 1e-6
    np.testing.assert_allclose(np.linalg.norm(got.reshape(n, 2, 2), axis=2), 1.0, atol=1e-6)
    se = np.sqrt((w.std(0) ** 2 + g.std(0) ** 2) / n)
    assert np.all(np.abs(g.mean(0) - w.mean(0)) <= 5 * se), (g.mean(0), w.mean(0), se)
    assert np.all((0.75 * w.std(0) <= g.std(0)) & (g.std(0) <= 1.33 * w.std(0))), (g.std(0), w.std(0))


def test_check_env_and_episode_length() -> None:
    env = _env("hard")
    assert env.n_frames == 1 and env.episode_length == 1000
    testing.check_env(env, vmap="trace")
