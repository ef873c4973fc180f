"""The runner hosts any `(init, update)` pair: schedule, reports, NaN guard, exact resume (a toy agent)."""

from __future__ import annotations

import functools
import pathlib
import threading
from typing import Any

import brax_envs
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from brax_train import acting, runner
from brax_train.config import RunConfig
from brax_train.types import PRNGKey

UNROLL = 5
NUM_ENVS = 4
PER_UPDATE = UNROLL * NUM_ENVS


def _toy_agent(setup: runner.Setup, bad_step: int | None = None) -> runner.Agent[Any, Any]:
    """A random-search agent: perturb a linear policy, keep the sign of the reward change."""
    obs, act = setup.observation_size, setup.env.action_size
    assert isinstance(obs, int)

    def make_policy(params: Any, deterministic: bool = False) -> Any:
        del deterministic
        return lambda o, key: (jnp.tanh(o @ params["w"]), {})

    def init(key: PRNGKey) -> dict[str, jax.Array]:
        return {"w": 0.1 * jax.random.normal(key, (obs, act)), "updates": jnp.zeros((), jnp.int32)}

    def update(s: Any, env_state: brax_envs.State, key: PRNGKey) -> tuple[Any, brax_envs.State, Any]:
        k_noise, k_unroll = jax.random.split(key)
        env_state, data = acting.generate_unroll(setup.env, env_state, make_policy(s), k_unroll, UNROLL)
        w = s["w"] + 0.01 * jnp.mean(data.reward) * jax.random.normal(k_noise, s["w"].shape)
        code = jnp.where(s["updates"] + 1 == bad_step, 3, 0) if bad_step else jnp.zeros((), jnp.int32)
        metrics = {"reward": jnp.mean(data.reward), runner.NONFINITE: code}
        return {"w": w, "updates": s["updates"] + 1}, env_state, metrics

    return runner.Agent(
        init=init,
        update=update,
        policy_params=lambda s: {"w": s["w"]},
        make_policy=make_policy,
        env_steps_per_update=PER_UPDATE,
        warm_start=lambda s, p: {**s, "w": p["w"]},
    )


def _run(bad_step: int | None = None, **kw: Any) -> runner.TrainResult:
    c = RunConfig(num_envs=NUM_ENVS, episode_length=20, num_eval_envs=2, seed=3, **kw)
    return runner.run(brax_envs.get_environment("fast"), c, functools.partial(_toy_agent, bad_step=bad_step))


def test_schedule_and_reports() -> None:
    """Evaluations at step 0 and at each interval; training metrics at their own interval."""
    reports: list[tuple[int, dict[str, float]]] = []
    _run(
        num_timesteps=8 * PER_UPDATE,
        num_evals=3,
        log_training_metrics=True,
        training_metrics_steps=2 * PER_UPDATE,
        progress_fn=lambda s, m: reports.append((s, dict(m))),
    )
    steps = [s for s, _ in reports]
    assert steps == [PER_UPDATE * k for k in (0, 2, 4, 4, 6, 8, 8)]
    evals = [m for _, m in reports if "eval/episode_reward" in m]
    assert len(evals) == 3
    assert all("training/reward" in m and np.isfinite(m["training/reward"]) for _, m in reports[1:])


def test_first_chunk_compiles_on_a_worker(tmp_path: pathlib.Path) -> None:
    """The training chunk compiles once, on the compile-ahead thread (from shapes while a fresh run
    sets up, during the initial evaluation of a resumed one); its calls find it in jit's cache."""
    compiles: list[tuple[str, str]] = []

    def listen(event: str, duration_secs: float, **kw: str | int) -> None:
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append((str(kw.get("fun_name")), threading.current_thread().name))

    def chunk_compiles(**kw: Any) -> list[str]:
        compiles.clear()
        jax.monitoring.register_event_duration_secs_listener(listen)
        try:
            _run(**kw)
        finally:
            jax.monitoring.unregister_event_duration_listener(listen)
        return [thread for name, thread in compiles if name == "jit(chunk)"]

    fresh = chunk_compiles(num_timesteps=4 * PER_UPDATE, num_evals=3, save_checkpoint_path=tmp_path)
    assert fresh == ["brax_train_compile"], compiles
    resumed = chunk_compiles(num_timesteps=8 * PER_UPDATE, num_evals=3, restore_checkpoint_path=tmp_path)
    assert resumed == ["brax_train_compile"], compiles
    # without an initial evaluation, a fresh run's chunk still compiles on the worker, beside the reset
    assert chunk_compiles(num_timesteps=2 * PER_UPDATE, num_evals=0) == ["brax_train_compile"], compiles


class _CountingResets(brax_envs.Wrapper):
    """Counts how often the environment's reset runs as Python (each time, a trace of it)."""

    calls = 0

    def reset(self, rng: jax.Array) -> brax_envs.State:
        """The wrapped reset, counted."""
        _CountingResets.calls += 1
        state: brax_envs.State = self.env.reset(rng)
        return state


def test_reset_traced_once_on_one_device() -> None:
    """The reset's shapes (for the chunk compiled ahead) and its first call share one trace of the
    reset: with a real model its body is the physics init, a second trace of which costs about a
    second of a fresh run's start."""
    _CountingResets.calls = 0
    c = RunConfig(num_envs=NUM_ENVS, episode_length=20, seed=3, num_timesteps=PER_UPDATE, num_evals=0,
                  max_devices_per_host=1)
    runner.run(_CountingResets(brax_envs.get_environment("fast")), c, _toy_agent)
    assert _CountingResets.calls == 1


def test_nonfinite_code_stops_training_naming_step_and_quantity() -> None:
    """An update reporting a non-finite code raises `NonFiniteError` at that update's end step."""
    with pytest.raises(runner.NonFiniteError, match=rf"non-finite parameters .* env step {3 * PER_UPDATE}"):
        _run(bad_step=3, num_timesteps=6 * PER_UPDATE, num_evals=0)


def test_resume_of_a_generic_agent_is_bit_exact(tmp_path: pathlib.Path) -> None:
    """Stop half way with a checkpoint, resume: the final parameters equal an uninterrupted run's."""
    full = _run(num_timesteps=8 * PER_UPDATE, num_evals=3)
    _run(num_timesteps=4 * PER_UPDATE, num_evals=3, save_checkpoint_path=tmp_path)
    resumed = _run(num_timesteps=8 * PER_UPDATE, num_evals=3, restore_checkpoint_path=tmp_path)
    assert np.array_equal(resumed.params["w"], full.params["w"])
    assert not np.array_equal(full.params["w"], _run(num_timesteps=0).params["w"])
