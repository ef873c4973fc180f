"""dm_control's stacker tasks against dm_control itself."""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest

from brax_envs import testing
from brax_envs.dm_control import _oracle, load
from brax_envs.dm_control._suite import SuiteEnv

TASKS = ("stack_2", "stack_4")


@functools.cache
def _env(task: str) -> SuiteEnv:
    return load("stacker", task)


@pytest.mark.parametrize("task", TASKS)
def test_matches_dm_control(task: str) -> None:
    env = _env(task)
    _oracle.check(env, _oracle.samples(env, "stacker", task, steps=20, seed=1))


@pytest.mark.parametrize("task", TASKS)
def test_initial_states_match_dm_control(task: str) -> None:
    env, n = _env(task), 256
    # the target lives in the model for dm_control, in info for us
    _oracle.check_initial_distribution(env, "stacker", task, n=n, info_keys=("target",))
    # its z is one of the stack's box centres, each equally likely
    keys = jax.random.split(jax.random.key(0), n)
    got = np.asarray(_oracle.initial_draws(env, keys)[2]["target"])
    want = _oracle.initial_states(env, "stacker", task, n, info_keys=("target",))["target"]
    np.testing.assert_allclose(np.unique(got[:, 1]), np.unique(want[:, 1]), rtol=1e-6)


def test_check_env_and_episode_length() -> None:
    env = _env("stack_2")
    assert env.n_frames == 10 and env.episode_length == 1000
    testing.check_env(env, vmap="trace")
