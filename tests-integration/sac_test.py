"""SAC learns to balance `inverted_pendulum`: 1 per step up to 1000; a random policy drops the pole
within a few dozen steps.

One seeded run on CPU: 64 environments, 64 gradient steps of 256 transitions per environment step,
evaluated once at the end with the deterministic policy (one compilation of the training step and
one of the evaluation, which dominate the run time on CPU).
"""

from __future__ import annotations

from typing import Any

import brax_envs
import pytest
from brax_train import sac

pytestmark = pytest.mark.slow

SETTINGS: dict[str, Any] = dict(
    num_timesteps=64 * 250,
    episode_length=1000,
    num_envs=64,
    batch_size=256,
    grad_updates_per_step=64,
    min_replay_size=1024,
    max_replay_size=100_000,
    learning_rate=1e-3,
    discounting=0.99,
    reward_scaling=1.0,
    normalize_observations=True,
    network_factory={"hidden_layer_sizes": (64, 64)},
    num_evals=1,
    num_eval_envs=16,
    deterministic_eval=True,
    seed=0,
)


def test_sac_balances_inverted_pendulum() -> None:
    _, params, metrics = sac.train(brax_envs.get_environment("inverted_pendulum"), **SETTINGS)
    assert isinstance(params, sac.SACParams)
    assert metrics["eval/episode_reward"] >= 900.0, metrics
