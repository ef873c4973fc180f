"""APG through contact-rich physics, and its learning bar on `reacher`.

- APG differentiates rollouts of `ant` and `humanoid` (feet on the floor from the first step)
  without a non-finite gradient (the runner's NaN guard would stop training with `NonFiniteError`).
- APG improves `reacher`'s deterministic return several-fold from its initial policy.

Every batch has fewer than 64 environments: from 64 on, the constraint solver compiles its batched
work queue, which costs more compile time than these small runs spend stepping. (BC's learning bar
is in bc_test.py.)
"""

from __future__ import annotations

from typing import Any

import brax_envs
import jax
import numpy as np
import pytest
from brax_train import apg

pytestmark = pytest.mark.slow

EPISODE = 200

APG_REACHER: dict[str, Any] = dict(
    policy_updates=400,
    episode_length=EPISODE,
    num_envs=32,
    horizon_length=16,
    learning_rate=1e-2,
    normalize_observations=True,
    num_evals=2,
    num_eval_envs=32,
    deterministic_eval=True,
    seed=0,
    network_factory={"hidden_layer_sizes": (32, 32)},
)


@pytest.mark.parametrize("env_name", ["ant", "humanoid"])
def test_apg_gradients_stay_finite_through_contacts(env_name: str) -> None:
    reports: list[dict[str, float]] = []
    _, params, _ = apg.train(
        brax_envs.get_environment(env_name),
        policy_updates=1,
        episode_length=1000,
        num_envs=4,
        horizon_length=20,
        num_evals=0,
        log_training_metrics=True,
        progress_fn=lambda _, m: reports.append(dict(m)),
    )  # a non-finite gradient would raise NonFiniteError here
    assert len(reports) == 1 and np.isfinite(reports[0]["training/grad_norm"])
    assert reports[0]["training/grad_norm"] > 0
    assert all(bool(np.all(np.isfinite(np.asarray(x)))) for x in jax.tree.leaves(params))


def test_apg_improves_reacher_several_fold() -> None:
    progress: list[dict[str, float]] = []
    apg.train(
        brax_envs.get_environment("reacher"), **APG_REACHER, progress_fn=lambda _, m: progress.append(dict(m))
    )
    first, last = progress[0]["eval/episode_reward"], progress[-1]["eval/episode_reward"]
    assert first < -30.0 and last > first / 3.0, (first, last)
