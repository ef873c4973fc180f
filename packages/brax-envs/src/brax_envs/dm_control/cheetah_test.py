"""dm_control's cheetah task against dm_control itself."""

from __future__ import annotations

import functools

import brax_physics
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from brax_envs import testing
from brax_envs.dm_control import _oracle, load
from brax_envs.dm_control.cheetah import Cheetah


@functools.cache
def _env() -> Cheetah:
    env = load("cheetah", "run")
    assert isinstance(env, Cheetah)
    return env


def test_matches_dm_control() -> None:
    env = _env()
    # a contact step's qvel differs from MuJoCo's by 4e-6 in float64 (1e-7 without contacts), 1.2e-5 in f32
    samples = _oracle.samples(env, "cheetah", "run", steps=30, seed=1)
    _oracle.check(env, samples, obs_tol={"velocity": (5e-5, 1e-5)})


@pytest.mark.parametrize("domain", ["cheetah", "hopper"])
def test_subtree_velocity_matches_mujoco_sensor(domain: str) -> None:
    # hopper's hop reward, zero unless it stands, barely tests the speed its oracle samples reach
    env = _env() if domain == "cheetah" else load(domain, "hop")
    m = env.model
    d = mujoco.MjData(m)
    rng = np.random.default_rng(0)
    qs, vs, want = [], [], []
    for _ in range(8):
        d.qpos[:] = m.qpos0 + rng.uniform(-0.5, 0.5, m.nq)
        d.qvel[:] = rng.normal(0.0, 2.0, m.nv)
        mujoco.mj_forward(m, d)
        qs.append(d.qpos.copy())
        vs.append(d.qvel.copy())
        want.append(d.sensor("torso_subtreelinvel").data.copy())

    def speed(q: jax.Array, qd: jax.Array) -> jax.Array:
        return env.subtree_linvel(brax_physics.init(env.sys, q, qd), "torso")

    f32 = np.float32
    got = jax.jit(jax.vmap(speed))(jnp.asarray(np.stack(qs), f32), jnp.asarray(np.stack(vs), f32))
    np.testing.assert_allclose(np.asarray(got), np.stack(want), rtol=1e-5, atol=1e-5)


def test_initial_states_match_dm_control() -> None:
    # each reset settles for 200 physics steps: a smaller sample keeps the test short
    _oracle.check_initial_distribution(_env(), "cheetah", "run", n=128)


def test_check_env_and_episode_length() -> None:
    env = _env()
    assert env.n_frames == 1 and env.episode_length == 1000
    testing.check_env(env, vmap="trace")
