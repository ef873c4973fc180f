"""ES and ARS learn to balance `inverted_pendulum` (seeded, small, CPU).

Each run evaluates the initial policy (step 0) and the trained one after 40 generations on 32
episodes of at most 200 steps (reward 1 per step while the pole stays up). Both start near 25 (the
pole falls within about a second) and must end above 100, four times that.
"""

from __future__ import annotations

from typing import Any

import brax_envs
import pytest
from brax_train import ars, es

pytestmark = pytest.mark.slow

EPISODE = 200
COMMON: dict[str, Any] = dict(
    episode_length=EPISODE,
    num_evals=2,
    num_eval_envs=32,
    normalize_observations=True,
    seed=0,
)


def _train(train: Any, **kw: Any) -> tuple[float, float]:
    """(initial, final) mean evaluation return."""
    progress: list[tuple[int, float]] = []
    train(
        brax_envs.get_environment("inverted_pendulum"),
        **COMMON,
        **kw,
        progress_fn=lambda s, m: progress.append((s, m["eval/episode_reward"])),
    )
    # a generation counts the steps of running episodes only (as Google Brax), so the run ends within
    # one generation after num_timesteps
    assert len(progress) == 2 and progress[0][0] == 0 and progress[-1][0] >= kw["num_timesteps"]
    return progress[0][1], progress[-1][1]


def test_es_balances_inverted_pendulum() -> None:
    generations = 40
    first, last = _train(
        es.train,
        num_timesteps=generations * 2 * 16 * EPISODE,
        population_size=16,
        learning_rate=0.03,
        perturbation_std=0.05,
        fitness_shaping=es.FitnessShaping.CENTERED_RANK,
        network_factory={"hidden_layer_sizes": (16,)},
    )
    assert first < 50.0
    assert last > 100.0, (first, last)


def test_ars_balances_inverted_pendulum() -> None:
    generations = 40
    first, last = _train(
        ars.train,
        num_timesteps=generations * 2 * 16 * EPISODE,
        number_of_directions=16,
        top_directions=8,
        step_size=0.1,
        exploration_noise_std=0.2,
    )
    assert first < 50.0
    assert last > 100.0, (first, last)
