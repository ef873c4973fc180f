"""Tests for `acting.Evaluator`: stopping once every first episode has ended changes no metric."""

from __future__ import annotations

from typing import Any

import brax_envs
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from brax_envs import wrappers

from brax_train import acting
from brax_train.types import Policy

EPISODE = 100
NUM_ENVS = 8


class _EndsPastX(wrappers.Wrapper):
    """`fast` with a terminal condition: the episode ends once the position passes 0.12."""

    def step(self, state: brax_envs.State, action: jax.Array) -> brax_envs.State:
        s = self.env.step(state, action)
        return s.replace(done=jnp.where(s.pipeline_state[0] > 0.12, 1.0, 0.0))


def _policy(force: Any) -> Policy:
    def policy(obs: Any, key: jax.Array) -> tuple[jax.Array, dict[str, Any]]:
        del key
        return jnp.full((obs.shape[0], 1), force, jnp.float32), {}

    return policy


@pytest.fixture(scope="module")
def setup() -> tuple[brax_envs.Env, acting.Evaluator]:
    env = wrappers.wrap_for_training(_EndsPastX(brax_envs.get_environment("fast")), episode_length=EPISODE)
    ev = acting.Evaluator(env, _policy, num_eval_envs=NUM_ENVS, episode_length=EPISODE, action_repeat=1,
                          key=jax.random.PRNGKey(0))
    return env, ev


def _full_length(env: brax_envs.Env, force: float, key: jax.Array) -> wrappers.EvalMetrics:
    """Reference: the same evaluation stepped for the whole episode length."""
    ev_env = wrappers.EvalWrapper(env)
    key_reset, key_run = jax.random.split(key)
    state = ev_env.reset(jax.random.split(key_reset, NUM_ENVS))
    state, _ = acting.generate_unroll(ev_env, state, _policy(force), key_run, EPISODE)
    em = state.info["eval_metrics"]
    assert isinstance(em, wrappers.EvalMetrics)
    return em


@pytest.mark.parametrize("force", [1.0, 0.3, -1.0])
def test_evaluator_early_stop_matches_full_episode(setup: tuple[brax_envs.Env, acting.Evaluator],
                                                   force: float) -> None:
    env, ev = setup
    key = jax.random.PRNGKey(7)
    got = ev.run_evaluation(jnp.float32(force), {}, key)
    want = _full_length(env, force, key)
    np.testing.assert_array_equal(got["eval/avg_episode_length"], np.mean(np.asarray(want.episode_steps)))
    for name, value in want.episode_metrics.items():
        np.testing.assert_allclose(got[f"eval/episode_{name}"], np.mean(np.asarray(value, np.float64)),
                                   rtol=1e-6, err_msg=name)
    longest = float(np.max(np.asarray(want.episode_steps)))
    if force < 0:  # never terminates: the whole episode is stepped
        assert longest == EPISODE
        assert got["eval/steps"] == NUM_ENVS * EPISODE
    else:  # pushed past the line: it stops within one block (25 steps) of the last episode's end
        assert longest <= EPISODE - 25
        assert longest <= got["eval/steps"] / NUM_ENVS < longest + 25


def test_block_length_divides_steps() -> None:
    assert acting._block_length(1000) == 25
    assert acting._block_length(997) == 1  # a prime: checks every step
    assert acting._block_length(12) == 12
