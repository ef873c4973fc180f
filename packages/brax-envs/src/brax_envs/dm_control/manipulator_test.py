"""dm_control's manipulator tasks against dm_control itself."""

from __future__ import annotations

import functools
from typing import NamedTuple, cast

import jax
import numpy as np
import pytest

from brax_envs import testing
from brax_envs.dm_control import _oracle, load
from brax_envs.dm_control._suite import SuiteEnv

TASKS = ("bring_ball", "bring_peg", "insert_ball", "insert_peg")


@functools.cache
def _env(task: str) -> SuiteEnv:
    return load("manipulator", task)


@pytest.mark.parametrize("task", TASKS)
def test_matches_dm_control(task: str) -> None:
    env = _env(task)
    _oracle.check(env, _oracle.samples(env, "manipulator", task, steps=20, seed=1))


class _Physics(NamedTuple):
    q: jax.Array
    qd: jax.Array


class _Reset(NamedTuple):
    pipeline_state: _Physics
    target: jax.Array


class _Draws:
    """The env's initial-state draws without the physics init (which leaves q and qd as drawn)."""

    def __init__(self, env: SuiteEnv) -> None:
        self.env = env

    def reset(self, rng: jax.Array) -> _Reset:
        q, qd, info = self.env.initial_state(rng)
        return _Reset(_Physics(q, qd), info["target"])


@pytest.mark.parametrize("task", TASKS)
def test_initial_states_match_dm_control(task: str) -> None:
    env, n = _env(task), 256
    draws = _Draws(env)
    _oracle.check_initial_distribution(cast(SuiteEnv, draws), "manipulator", task, n=n)
    # the target (in the model for dm_control, in info for us): the same program (a compile-cache hit)
    got = np.asarray(jax.jit(jax.vmap(draws.reset))(jax.random.split(jax.random.key(0), n)).target)
    dm = _oracle.dm_env("manipulator", task, 0)
    want = []
    for _ in range(n):
        dm.reset()
        want.append(np.asarray(env.task_info_from_physics(dm.physics)["target"]))
    w = np.stack(want)
    se = np.sqrt((w.var(0) + got.var(0)) / n)
    np.testing.assert_array_less(np.abs(got.mean(0) - w.mean(0)), 5 * se)
    np.testing.assert_allclose(got.std(0), w.std(0), rtol=0.25)
    np.testing.assert_allclose(got.min(0), w.min(0), atol=0.05)
    np.testing.assert_allclose(got.max(0), w.max(0), atol=0.05)


def test_check_env_and_episode_length() -> None:
    env = _env("insert_ball")
    assert env.n_frames == 10 and env.episode_length == 1000
    check = testing.check_env(env)
    # the cup (a mocap body) sits at the target, from the reset state on
    for state in check.states[:2]:
        target = np.asarray(state.info["task"]["target"])
        cup = np.asarray(state.pipeline_state.x.pos[env.body_ids("cup")[0]])
        np.testing.assert_allclose(cup[[0, 2]], target[:2], atol=1e-6)
        mocap = np.asarray(state.pipeline_state.mocap_pos[0])
        np.testing.assert_allclose(mocap[[0, 2]], target[:2], atol=1e-6)
