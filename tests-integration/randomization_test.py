"""`ppo.train` on `ant` with domain randomization over friction and mass, once per run and per episode.

Both modes train end to end on the 2 CPU devices that the repository's conftest.py forces, with short
episodes, so training environments auto-reset many times. The randomization function counts its
runtime draws with `jax.debug.callback`: once per run it runs once, eagerly; per episode it runs
inside the jitted reset and training step, once for every episode that ends. Metrics come from
training episodes (`num_evals=0`): an evaluator would double the compile time, and the unit tests of
`ppo.train` already check that evaluation stays once per run.
"""

from __future__ import annotations

from typing import Any

import brax_envs
import brax_physics
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from brax_train import ppo

pytestmark = pytest.mark.slow

EPISODE_LENGTH = 20
NUM_ENVS = 8
STEP = 8 * 5 * 2  # env steps per training step: batch_size * unroll_length * num_minibatches
NUM_TIMESTEPS = 20 * STEP
METRICS_STEPS = 10 * STEP


def _randomizer(draws: list[int]) -> Any:
    """A randomization function over friction and mass that appends its key count to `draws`."""

    def randomize(sys: brax_physics.System, rng: jax.Array) -> tuple[brax_physics.System, Any]:
        # Runs whenever a draw executes: eagerly, or inside a jitted (auto-)reset.
        jax.debug.callback(lambda k: draws.append(int(k.shape[0])), rng)

        @jax.vmap
        def one(key: jax.Array) -> tuple[jax.Array, jax.Array]:
            k_f, k_m = jax.random.split(key)
            scale = jax.random.uniform(k_f, (), jnp.float32, 0.6, 1.4)
            friction = sys.geom_friction.at[:, 0].multiply(scale)
            mass = sys.body_mass * jax.random.uniform(k_m, (sys.nbody,), jnp.float32, 0.8, 1.2)
            return friction, mass

        friction, mass = one(rng)
        in_axes = jax.tree.map(lambda _: None, sys).replace(geom_friction=0, body_mass=0)
        return sys.replace(geom_friction=friction, body_mass=mass), in_axes

    return randomize


def _train(per_episode: bool) -> dict[str, Any]:
    draws: list[int] = []
    progress: list[tuple[int, dict[str, Any]]] = []
    _, params, metrics = ppo.train(
        brax_envs.get_environment("ant"), num_timesteps=NUM_TIMESTEPS, episode_length=EPISODE_LENGTH,
        num_envs=NUM_ENVS, batch_size=8, num_minibatches=2, unroll_length=5, num_updates_per_batch=1,
        num_evals=0, log_training_metrics=True, training_metrics_steps=METRICS_STEPS,
        normalize_observations=True, randomization_fn=_randomizer(draws),
        randomize_per_episode=per_episode, progress_fn=lambda s, m: progress.append((s, dict(m))),
        network_factory={"policy_hidden_layer_sizes": (8,), "value_hidden_layer_sizes": (8,)})
    jax.effects_barrier()  # every debug callback has run
    finite = all(bool(np.all(np.isfinite(np.asarray(x)))) for x in jax.tree.leaves(params))
    return {"steps": [s for s, _ in progress], "metrics": metrics, "params_finite": finite,
            "episodes": sum(m["episode/count"] for _, m in progress), "draws": list(draws)}


@pytest.fixture(scope="module")
def result() -> dict[str, dict[str, Any]]:
    # The device count is fixed when jax starts; conftest.py sets it unless XLA_FLAGS already does.
    assert jax.local_device_count() == 2, (
        f"this test shards over 2 devices but jax has {jax.local_device_count()}: run it without a "
        "--xla_force_host_platform_device_count of your own in XLA_FLAGS, and without JAX_PLATFORMS"
    )
    return {"run": _train(per_episode=False), "episode": _train(per_episode=True)}


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
    # Per episode: an eager check with 2 keys, the first reset's draw (one key per env, on each of
    # the 2 devices for its half: the runner steps environments per device), then one single-key draw
    # per finished episode (restarts are computed in slices of ceil(4 / 16) = 1 env).
    draws = r["draws"]
    assert draws[:3] == [2, NUM_ENVS // 2, NUM_ENVS // 2] and set(draws[3:]) == {1}
    assert len(draws) - 3 == r["episodes"]
