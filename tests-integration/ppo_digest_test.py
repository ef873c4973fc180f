"""Refactor invariant: `ppo.train` with a fixed seed reproduces recorded parameters and metrics bit for bit.

`ppo_digest.json` holds SHA-256 digests of the final parameters (every leaf's bytes, in tree order)
and of the reported metrics (timings excluded) for two small runs on CPU: the constant learning rate
path and the adaptive-KL path with gradient clipping, timeout bootstrapping and resets.
Update the recorded digests only together with a brax-train CHANGELOG entry that says why the
numbers changed (`python tests-integration/ppo_digest_test.py --record` rewrites the file).
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import sys
from typing import Any

import brax_envs
import jax
import numpy as np
import pytest
from brax_train import ppo

pytestmark = pytest.mark.slow

RECORD = pathlib.Path(__file__).with_name("ppo_digest.json")
_TIMINGS = ("training/sps", "training/walltime", "eval/sps", "eval/walltime", "eval/epoch_eval_time")
_COMMON: dict[str, Any] = {
    "num_timesteps": 2400,
    "episode_length": 40,
    "num_envs": 8,
    "batch_size": 8,
    "num_minibatches": 4,
    "unroll_length": 5,
    "num_updates_per_batch": 2,
    "num_evals": 3,
    "num_eval_envs": 4,
    "log_training_metrics": True,
    "normalize_observations": True,
    "learning_rate": 3e-3,
    "entropy_cost": 1e-2,
    "seed": 7,
    # One device: the digest must not depend on how many devices the test process forces.
    "max_devices_per_host": 1,
    "network_factory": {"policy_hidden_layer_sizes": (16,), "value_hidden_layer_sizes": (16,)},
}
CASES: dict[str, dict[str, Any]] = {
    "constant_lr": {},
    "adaptive_kl": {
        "learning_rate_schedule": "ADAPTIVE_KL",
        "desired_kl": 1e-3,
        "max_grad_norm": 0.5,
        "bootstrap_on_timeout": True,
        "num_resets_per_eval": 1,
    },
}


def digest(case: str) -> dict[str, str]:
    """Train `case` on CPU and return hex digests of its final parameters and its reported metrics."""
    reports: list[tuple[int, dict[str, float]]] = []
    env = brax_envs.get_environment("inverted_pendulum")
    _, params, _ = ppo.train(
        env,
        **_COMMON,
        **CASES[case],
        progress_fn=lambda step, m: reports.append(
            (step, {k: float(v) for k, v in m.items() if k not in _TIMINGS})
        ),
    )
    h_params = hashlib.sha256()
    for leaf in jax.tree.leaves(params):
        h_params.update(np.asarray(leaf).tobytes())
    text = json.dumps(reports, sort_keys=True).encode()
    return {"params": h_params.hexdigest(), "metrics": hashlib.sha256(text).hexdigest()}


@pytest.mark.parametrize("case", sorted(CASES))
def test_ppo_matches_recorded_digest(case: str) -> None:
    """Parameters and metrics of a seeded run equal the recorded digests bit for bit."""
    recorded = json.loads(RECORD.read_text())[case]
    assert digest(case) == recorded


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        raise SystemExit("usage: python tests-integration/ppo_digest_test.py --record")
    jax.config.update("jax_platforms", "cpu")
    RECORD.write_text(json.dumps({c: digest(c) for c in sorted(CASES)}, indent=2) + "\n")
    print(RECORD.read_text())
