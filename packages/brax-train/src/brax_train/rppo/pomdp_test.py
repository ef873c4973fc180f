"""Memory matters: on an inverted pendulum observed without velocities RPPO balances, PPO cannot."""

from __future__ import annotations

from typing import Any

import brax_envs
import jax
import pytest

from brax_train import ppo, rppo


class PositionsOnly(brax_envs.Wrapper):
    """`inverted_pendulum` observing cart position and pole angle only (its velocities dropped)."""

    @property
    def observation_size(self) -> int:
        """Two positions."""
        return 2

    def reset(self, rng: jax.Array) -> brax_envs.State:
        """Reset; positions only."""
        s = self.env.reset(rng)
        return s.replace(obs=s.obs[..., :2])

    def step(self, state: brax_envs.State, action: jax.Array) -> brax_envs.State:
        """Step; positions only."""
        s = self.env.step(state, action)
        return s.replace(obs=s.obs[..., :2])


SETTINGS: dict[str, Any] = dict(
    num_timesteps=80_000,  # 20 training steps of 64 unrolls x 16 steps x 4 minibatches
    num_evals=1,  # one evaluation, at the end
    episode_length=1000,
    num_envs=64,
    batch_size=64,
    num_minibatches=4,
    unroll_length=16,
    num_updates_per_batch=4,
    discounting=0.97,
    learning_rate=3e-3,
    entropy_cost=1e-2,
    normalize_observations=True,
    reward_scaling=0.1,
    num_eval_envs=16,
    deterministic_eval=True,
    seed=1,
)
NETS = {"policy_hidden_layer_sizes": [32, 32], "value_hidden_layer_sizes": [64, 64]}
THRESHOLD = 500.0  # of the 1000 a policy balancing for the whole episode earns


@pytest.fixture(scope="module")
def returns() -> dict[str, float]:
    env = PositionsOnly(brax_envs.get_environment("inverted_pendulum"))
    r = rppo.train(env, **SETTINGS, hidden_size=16, network_factory=NETS)
    p = ppo.train(env, **SETTINGS, network_factory=NETS)
    return {"rppo": r.metrics["eval/episode_reward"], "ppo": p.metrics["eval/episode_reward"]}


def test_rppo_balances_without_velocities(returns: dict[str, float]) -> None:
    print(f"eval return without velocities, {SETTINGS['num_timesteps']} steps: {returns}")
    assert returns["rppo"] > THRESHOLD


def test_feed_forward_ppo_cannot_with_the_same_budget(returns: dict[str, float]) -> None:
    assert returns["ppo"] < THRESHOLD
