"""Tests of the `fast` environment."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brax_envs
from brax_envs.envs import Fast
from brax_envs.testing import check_env


def test_fast_conforms() -> None:
    env = brax_envs.get_environment("fast")
    assert env.observation_size == 2 and env.action_size == 1
    assert float(env.dt) == pytest.approx(0.02)
    check_env(env)


def test_fast_dynamics_and_reward_terms() -> None:
    env = Fast(reset_noise_scale=0.0, ctrl_cost_weight=0.01)
    s = env.reset(jax.random.PRNGKey(0))
    np.testing.assert_array_equal(s.obs, [0.0, 0.0])
    s = env.step(s, jnp.array([2.0], jnp.float32))  # clipped to 1
    vel = 0.02 * 1.0
    pos = 0.02 * vel
    np.testing.assert_allclose(s.obs, [pos, vel], rtol=1e-6)
    np.testing.assert_allclose(s.metrics["reward_distance"], -((pos - 1.0) ** 2), rtol=1e-6)
    np.testing.assert_allclose(s.metrics["reward_ctrl"], -0.01, rtol=1e-6)
    np.testing.assert_allclose(s.reward, s.metrics["reward_distance"] + s.metrics["reward_ctrl"], rtol=1e-6)
    assert float(s.done) == 0.0 and float(s.info["truncation"]) == 0.0


def test_fast_rewards_a_good_policy() -> None:
    env = Fast()

    @jax.jit
    def episode_return(gain: jax.Array) -> jax.Array:
        def body(s: brax_envs.State, _: None) -> tuple[brax_envs.State, jax.Array]:
            pos, vel = s.obs[0], s.obs[1]
            s = env.step(s, jnp.reshape(gain * (1.0 - pos) - vel, (1,)))
            return s, s.reward

        return jnp.sum(jax.lax.scan(body, env.reset(jax.random.PRNGKey(0)), None, length=200)[1])

    idle, good = float(episode_return(jnp.float32(0.0))), float(episode_return(jnp.float32(3.0)))
    assert idle < -150.0 and good > 0.5 * idle
