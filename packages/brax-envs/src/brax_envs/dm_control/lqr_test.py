"""dm_control's LQR tasks against dm_control itself."""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np
import pytest

from brax_envs import testing
from brax_envs.dm_control import _oracle, load
from brax_envs.dm_control._suite import SuiteEnv

TASKS = ("lqr_2_1", "lqr_6_2")
SEED = 1  # dm_control's task seed, which also draws its model's springs: ours are built from the same


@functools.cache
def _env(task: str) -> SuiteEnv:
    return load("lqr", task, model_seed=SEED)


@pytest.mark.parametrize("task", TASKS)
def test_matches_dm_control(task: str) -> None:
    env = _env(task)
    # the action spec is ±1e10 (unbounded motors): scale random actions to ±1
    _oracle.check(env, _oracle.samples(env, "lqr", task, steps=30, seed=SEED, action_scale=1e-10))


@pytest.mark.parametrize("task", TASKS)
def test_initial_states_match_dm_control(task: str) -> None:
    _oracle.check_initial_distribution(_env(task), "lqr", task, seed=SEED)


def test_model_is_dm_controls_for_the_seed() -> None:
    dm = _oracle.dm_env("lqr", "lqr_6_2", SEED)
    np.testing.assert_allclose(np.asarray(_env("lqr_6_2").sys.jnt_stiffness), dm.physics.model.jnt_stiffness,
                               rtol=1e-6)
    assert not np.allclose(load("lqr", "lqr_6_2", model_seed=SEED + 1).model.jnt_stiffness,
                           dm.physics.model.jnt_stiffness)


def test_terminates_at_rest_at_zero() -> None:
    env = _env("lqr_2_1")
    dm = _oracle.dm_env("lqr", "lqr_2_1", SEED)
    dm.reset()
    with dm.physics.reset_context():
        dm.physics.data.qpos[:] = 0.0
    assert dm.task.get_termination(dm.physics) is not None
    zero = jnp.zeros(env.sys.nq, jnp.float32)
    assert float(env.termination(env.pipeline_init(zero, zero), {})) == 1.0
    assert float(env.termination(env.pipeline_init(zero.at[0].set(1e-3), zero), {})) == 0.0


def test_check_env_and_episode_length() -> None:
    env = _env("lqr_6_2")
    assert env.n_frames == 1 and env.episode_length is None
    testing.check_env(env, vmap="trace")
