"""`ppo.train` on `ant` with domain randomization over friction and mass, once per run and per episode.

Both modes train end to end on 2 forced CPU devices (a child process: the device count is fixed when
jax starts) with short episodes, so training environments auto-reset many times. The randomization
function counts its runtime draws with `jax.debug.callback`: once per run it runs once, eagerly; per
episode it runs inside the jitted reset and training step, once for every episode that ends. Metrics
come from training episodes (`num_evals=0`): an evaluator would double the compile time, and the
unit tests of `ppo.train` already check that evaluation stays once per run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.slow

EPISODE_LENGTH = 20
NUM_ENVS = 8
STEP = 8 * 5 * 2  # env steps per training step: batch_size * unroll_length * num_minibatches
NUM_TIMESTEPS = 20 * STEP
METRICS_STEPS = 10 * STEP

SCRIPT = textwrap.dedent(f"""
    import json
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_numpy_dtype_promotion", "strict")
    jax.config.update("jax_numpy_rank_promotion", "raise")
    jax.config.update("jax_default_matmul_precision", "highest")
    import numpy as np
    import brax_envs
    from brax_train import ppo
    assert jax.local_device_count() == 2

    draws = []

    def randomize(sys, rng):
        # Runs whenever a draw executes: eagerly, or inside a jitted (auto-)reset.
        jax.debug.callback(lambda k: draws.append(int(k.shape[0])), rng)

        @jax.vmap
        def one(key):
            k_f, k_m = jax.random.split(key)
            scale = jax.random.uniform(k_f, (), jnp.float32, 0.6, 1.4)
            friction = sys.geom_friction.at[:, 0].multiply(scale)
            mass = sys.body_mass * jax.random.uniform(k_m, (sys.nbody,), jnp.float32, 0.8, 1.2)
            return friction, mass

        friction, mass = one(rng)
        in_axes = jax.tree.map(lambda _: None, sys).replace(geom_friction=0, body_mass=0)
        return sys.replace(geom_friction=friction, body_mass=mass), in_axes

    out = {{}}
    for per_episode in (False, True):
        draws.clear()
        progress = []
        _, params, metrics = ppo.train(
            brax_envs.get_environment("ant"), num_timesteps={NUM_TIMESTEPS}, episode_length={EPISODE_LENGTH},
            num_envs={NUM_ENVS}, batch_size=8, num_minibatches=2, unroll_length=5, num_updates_per_batch=1,
            num_evals=0, log_training_metrics=True, training_metrics_steps={METRICS_STEPS},
            normalize_observations=True, randomization_fn=randomize,
            randomize_per_episode=per_episode, progress_fn=lambda s, m: progress.append((s, dict(m))),
            network_factory={{"policy_hidden_layer_sizes": (8,), "value_hidden_layer_sizes": (8,)}})
        jax.effects_barrier()
        finite = all(bool(np.all(np.isfinite(np.asarray(x)))) for x in jax.tree.leaves(params))
        out["episode" if per_episode else "run"] = {{
            "steps": [s for s, _ in progress], "metrics": metrics, "params_finite": finite,
            "episodes": sum(m["episode/count"] for _, m in progress), "draws": list(draws)}}
    print("RESULT" + json.dumps(out))
""")


@pytest.fixture(scope="module")
def result() -> dict[str, dict[str, Any]]:
    env = dict(os.environ)
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = next(line for line in proc.stdout.splitlines() if line.startswith("RESULT"))
    out: dict[str, dict[str, Any]] = json.loads(line.removeprefix("RESULT"))
    return out


@pytest.mark.parametrize("mode", ["run", "episode"])
def test_ant_trains_with_randomized_friction_and_mass(result: dict[str, dict[str, Any]], mode: str) -> None:
    r = result[mode]
    assert r["steps"] == [METRICS_STEPS, NUM_TIMESTEPS]  # training completed, reporting as scheduled
    metrics = r["metrics"]
    assert "episode/sum_reward" in metrics and "training/total_loss" in metrics
    assert all(np.isfinite(v) for v in metrics.values()), metrics
    assert r["params_finite"] is True
    # Every episode lasts at most EPISODE_LENGTH steps: the envs restarted at least this often.
    assert r["episodes"] >= NUM_TIMESTEPS // EPISODE_LENGTH


def test_once_per_run_draws_once_and_per_episode_redraws_at_resets(result: dict[str, dict[str, Any]]) -> None:
    assert result["run"]["draws"] == [NUM_ENVS]  # one eager draw, one System per env for the whole run
    r = result["episode"]
    # Per episode: an eager check with 2 keys, the first reset's draw (one key per env), then one
    # single-key draw per finished episode (restarts are computed in slices of ceil(8 / 16) = 1 env).
    draws = r["draws"]
    assert draws[:2] == [2, NUM_ENVS] and set(draws[2:]) == {1}
    assert len(draws) - 2 == r["episodes"]
