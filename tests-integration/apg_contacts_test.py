"""APG through contact-rich physics: rollouts of `ant` and `humanoid` (feet on the floor from the first
step) differentiate without a non-finite gradient (the runner's NaN guard would stop training with
`NonFiniteError`). Batches stay under 64 environments, where the solver's work queue would compile.
"""

from __future__ import annotations

import brax_envs
import jax
import numpy as np
import pytest
from brax_train import apg

pytestmark = pytest.mark.slow


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
