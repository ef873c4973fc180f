"""dm_control's reacher tasks against dm_control itself."""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest

from brax_envs import testing
from brax_envs.dm_control import _oracle, load
from brax_envs.dm_control._suite import SuiteEnv


@functools.cache
def _env(task: str) -> SuiteEnv:
    return load("reacher", task)


@pytest.mark.parametrize("task", ["easy", "hard"])
def test_matches_dm_control(task: str) -> None:
    env = _env(task)
    _oracle.check(env, _oracle.samples(env, "reacher", task, steps=30, seed=1))


def test_initial_states_match_dm_control() -> None:
    _oracle.check_initial_distribution(_env("easy"), "reacher", "easy")


def test_targets_match_dm_control() -> None:
    n = 256
    dm = _oracle.dm_env("reacher", "easy", 0)
    want = []
    for _ in range(n):
        dm.reset()
        want.append(np.array(dm.physics.named.model.geom_pos["target", :2]))
    w = np.stack(want)
    env = _env("easy")
    # the draw alone (reset's physics state adds a compile and tells nothing more here)
    _, _, info = _oracle.initial_draws(env, jax.random.split(jax.random.key(0), n))
    g = np.asarray(info["target"], np.float64)
    # Compare the target's radius and its x, y by moments (angles are uniform, so x, y centre on 0).
    for name, gv, wv in (("radius", np.linalg.norm(g, axis=1), np.linalg.norm(w, axis=1)),
                         ("x", g[:, 0], w[:, 0]), ("y", g[:, 1], w[:, 1])):
        se = np.sqrt((gv.std() ** 2 + wv.std() ** 2) / n)
        assert abs(gv.mean() - wv.mean()) <= 5 * se, (name, gv.mean(), wv.mean())
        assert 0.75 <= gv.std() / wv.std() <= 1.33, (name, gv.std(), wv.std())
    r = np.linalg.norm(g, axis=1)
    assert r.min() >= 0.05 - 1e-6 and r.max() <= 0.2 + 1e-6


def test_check_env_and_episode_length() -> None:
    env = _env("hard")
    assert env.n_frames == 1 and env.episode_length == 1000
    testing.check_env(env, vmap="trace")
