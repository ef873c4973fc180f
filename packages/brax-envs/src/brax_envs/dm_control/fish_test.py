"""dm_control's fish tasks against dm_control itself."""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest

from brax_envs import testing
from brax_envs.dm_control import _oracle, load
from brax_envs.dm_control._suite import SuiteEnv

TASKS = ("upright", "swim")


@functools.cache
def _env(task: str) -> SuiteEnv:
    return load("fish", task)


@pytest.mark.parametrize("task", TASKS)
def test_matches_dm_control(task: str) -> None:
    env = _env(task)
    _oracle.check(env, _oracle.samples(env, "fish", task, steps=20, seed=1))


def test_initial_states_match_dm_control() -> None:
    # both tasks draw the fish's pose alike
    _oracle.check_initial_distribution(_env("upright"), "fish", "upright")


def test_target_distribution_matches_dm_control() -> None:
    n = 1024
    dm = _oracle.dm_env("fish", "swim", 0)
    want = []
    for _ in range(n):
        dm.reset()
        want.append(np.array(dm.physics.named.model.geom_pos["target"]))
    w = np.stack(want)
    keys = jax.random.split(jax.random.key(0), n)
    g = np.asarray(_oracle.initial_draws(_env("swim"), keys)[2]["target"])
    assert np.all(g.min(0) >= w.min(0) - 0.01) and np.all(g.max(0) <= w.max(0) + 0.01)
    assert np.all(np.abs(g.mean(0) - w.mean(0)) <= 5 * np.sqrt(2 / n) * w.std(0))
    ratio = g.std(0) / w.std(0)
    assert np.all((ratio >= 0.9) & (ratio <= 1.1))


def test_check_env_and_episode_length() -> None:
    env = _env("swim")
    assert env.n_frames == 10 and env.episode_length == 1000
    testing.check_env(env, vmap="trace")
