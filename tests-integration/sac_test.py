"""SAC learns to balance `inverted_pendulum`: 1 per step up to 1000; a random policy drops the pole
within a few dozen steps.

One seeded run on CPU: 64 environments, 64 gradient steps of 256 transitions per environment step,
evaluated once at the end with the deterministic policy (one compilation of the training step and
one of the evaluation, which dominate the run time on CPU).
"""

from __future__ import annotations

import brax_envs
import pytest
from brax_train import presets, sac

pytestmark = pytest.mark.slow

# The CLI's SAC preset for the task (so the preset is what this test shows learns), run half as long
# and evaluated once.
CONFIG = presets.preset("inverted_pendulum", "sac").replace(num_timesteps=64 * 250, num_evals=1, seed=0)


def test_sac_balances_inverted_pendulum() -> None:
    _, params, metrics = sac.train(brax_envs.get_environment("inverted_pendulum"), config=CONFIG)
    assert isinstance(params, sac.SACParams)
    assert metrics["eval/episode_reward"] >= 900.0, metrics
