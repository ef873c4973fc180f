"""dm_control's finger tasks against dm_control itself."""

from __future__ import annotations

import functools

import jax
import mujoco
import numpy as np
import pytest

from brax_envs import testing
from brax_envs.dm_control import _oracle, load
from brax_envs.dm_control._suite import SuiteEnv
from brax_envs.dm_control.finger import Finger

TASKS = ("spin", "turn_easy", "turn_hard")


@functools.cache
def _env(task: str) -> SuiteEnv:
    return load("finger", task)


@pytest.mark.parametrize("task", TASKS)
def test_matches_dm_control(task: str) -> None:
    env = _env(task)
    _oracle.check(env, _oracle.samples(env, "finger", task, steps=25, seed=1))


def test_initial_states_match_dm_control() -> None:
    _oracle.check_initial_distribution(_env("turn_easy"), "finger", "turn_easy")


def test_targets_match_dm_control() -> None:
    n = 256
    dm = _oracle.dm_env("finger", "turn_easy", 0)
    want = []
    for _ in range(n):
        dm.reset()
        want.append(np.array(dm.physics.named.model.site_pos["target", ["x", "z"]]))
    w = np.stack(want)
    env = _env("turn_easy")
    # the draw alone (reset's physics state adds a compile and tells nothing more here)
    _, _, info = _oracle.initial_draws(env, jax.random.split(jax.random.key(0), n))
    g = np.asarray(info["target"], np.float64)
    # Both lie on the same circle; compare x and z by moments.
    for xz in (g, w):
        np.testing.assert_allclose(np.linalg.norm(xz - [0.2, 0.4], axis=1), 0.13, atol=1e-6)
    for j in range(2):
        se = np.sqrt((g[:, j].std() ** 2 + w[:, j].std() ** 2) / n)
        assert abs(g[:, j].mean() - w[:, j].mean()) <= 5 * se
        assert 0.75 <= g[:, j].std() / w[:, j].std() <= 1.33


def test_contact_check_matches_mujoco() -> None:
    env = _env("spin")
    assert isinstance(env, Finger)
    m, rng = env.model, np.random.default_rng(0)
    lo, hi = np.where(m.jnt_limited[:, None], m.jnt_range, [-np.pi, np.pi]).T
    qs = rng.uniform(lo, hi, (2000, m.nq))
    d = mujoco.MjData(m)
    want = []
    for q in qs:
        d.qpos[:] = q
        mujoco.mj_forward(m, d)
        want.append(d.ncon > 0)
    got = np.asarray(jax.jit(jax.vmap(env.touching))(jax.numpy.asarray(qs, jax.numpy.float32)))
    assert 100 < sum(want) < 1900
    np.testing.assert_array_equal(got, np.asarray(want))


def test_check_env_and_episode_length() -> None:
    env = _env("turn_hard")
    assert env.n_frames == 2 and env.episode_length == 1000
    testing.check_env(env, vmap="trace")
