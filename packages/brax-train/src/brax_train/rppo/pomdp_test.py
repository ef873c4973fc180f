"""Memory matters: on a cue-recall task RPPO earns what feed-forward PPO cannot with the same budget.

`CueRecall` shows a random sign only on an episode's first step and then pays `action * sign` on
every later step. A feed-forward policy's later actions cannot depend on the sign, so over the
evaluation's many episodes (signs half +1, half -1) it earns about 0; remembering the sign earns up
to `LENGTH - 1`. (The same holds on `inverted_pendulum` observed without velocities: with this
package's settings RPPO balances for the whole episode and PPO falls, but the physics compiles take
minutes on 2 cores, so the suite runs this pure-JAX task.)
"""

from __future__ import annotations

from typing import Any

import brax_envs
import jax
import jax.numpy as jnp
import pytest

from brax_train import ppo, rppo

LENGTH = 8
"""Steps per episode; every step after the first pays at most 1."""


class CueRecall(brax_envs.Env):
    """Observation `[sign if first step else 0, step / LENGTH]`; reward `action * sign` after step one."""

    def reset(self, rng: jax.Array) -> brax_envs.State:
        """A new random sign, shown now only."""
        sign = jnp.where(jax.random.bernoulli(rng), 1.0, -1.0).astype(jnp.float32)
        zero = jnp.zeros((), jnp.float32)
        return brax_envs.State(
            pipeline_state=jnp.stack([sign, zero]),
            obs=jnp.stack([sign, zero]),
            reward=zero,
            done=zero,
            metrics={},
            info={"truncation": zero},
        )

    def step(self, state: brax_envs.State, action: jax.Array) -> brax_envs.State:
        """Pay `action * sign` unless this is the first step; the episode ends after `LENGTH` steps."""
        sign, t = state.pipeline_state[0], state.pipeline_state[1]
        reward = jnp.where(t >= 1, jnp.clip(action[0], -1.0, 1.0) * sign, 0.0).astype(jnp.float32)
        t = t + 1.0
        done = (t >= LENGTH).astype(jnp.float32)
        return state.replace(
            pipeline_state=jnp.stack([sign, t]),
            obs=jnp.stack([jnp.zeros((), jnp.float32), t / LENGTH]),
            reward=reward,
            done=done,
        )

    @property
    def observation_size(self) -> int:
        """The shown sign and the time."""
        return 2

    @property
    def action_size(self) -> int:
        """One number, whose sign should be the remembered one."""
        return 1

    @property
    def backend(self) -> str:
        """No physics."""
        return "none"


SETTINGS: dict[str, Any] = dict(
    num_timesteps=100_000,
    num_evals=2,
    episode_length=100,  # longer than an episode: episodes terminate, they are never truncated
    num_envs=64,
    batch_size=64,
    num_minibatches=4,
    unroll_length=5,  # not a divisor of LENGTH: many unrolls start mid-episode from a stored state
    num_updates_per_batch=4,
    discounting=0.9,
    learning_rate=3e-3,
    entropy_cost=1e-3,
    num_eval_envs=512,
    deterministic_eval=True,
    seed=0,
)
NETS = {"policy_hidden_layer_sizes": [32], "value_hidden_layer_sizes": [32]}
THRESHOLD = (LENGTH - 1) / 2


@pytest.fixture(scope="module")
def returns() -> dict[str, float]:
    r = rppo.train(CueRecall(), **SETTINGS, hidden_size=16, network_factory=NETS)
    p = ppo.train(CueRecall(), **SETTINGS, network_factory=NETS)
    return {
        "rppo": r.metrics["eval/episode_reward"],
        "ppo": p.metrics["eval/episode_reward"],
        "ppo_std": p.metrics["eval/episode_reward_std"],
    }


def test_rppo_remembers_the_cue(returns: dict[str, float]) -> None:
    print(f"cue recall eval return after {SETTINGS['num_timesteps']} steps (max {LENGTH - 1}): {returns}")
    assert returns["rppo"] > THRESHOLD


def test_feed_forward_ppo_cannot_with_the_same_budget(returns: dict[str, float]) -> None:
    assert returns["ppo"] < THRESHOLD
