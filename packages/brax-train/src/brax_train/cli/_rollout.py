"""Environments from a `RunSpec`, policies from a run's checkpoints, rollouts and evaluation."""

from __future__ import annotations

import functools
import pathlib
from typing import Any, NamedTuple

import brax_envs
import jax
import jax.numpy as jnp
import numpy as np
from brax_envs import wrappers

from brax_train import acting, checkpoint
from brax_train.cli._errors import CommandError, UsageError, one_line
from brax_train.cli._rundir import RunDir
from brax_train.cli._settings import RunSpec, check_env, import_module
from brax_train.types import Policy


def make_env(spec: RunSpec, where: str = "--set") -> brax_envs.Env:
    """Import the run's modules and build its environment; bad options are `UsageError`s."""
    for module in spec.imports:
        import_module(module, flag="import")
    check_env(spec.env, flag="--env" if where == "--set" else f"{where}: env")
    try:
        return brax_envs.get_environment(spec.env, **spec.env_kwargs)
    except TypeError as e:
        if spec.env_kwargs and "argument" in str(e):
            keys = ", ".join(f"env.{k}" for k in spec.env_kwargs)
            raise UsageError(
                f"{where} {keys}: environment {spec.env!r} rejects these options: {one_line(str(e))}"
            ) from None
        raise
    except ValueError as e:
        if "backend" in spec.env_kwargs and "backend" in str(e):
            raise UsageError(f"--backend: {one_line(str(e))}") from None
        if spec.env_kwargs:
            keys = ", ".join(f"env.{k}" for k in spec.env_kwargs)
            raise UsageError(f"{where} {keys}: {one_line(str(e))}") from None
        raise


def step_dir(run: RunDir, step: int | None) -> pathlib.Path:
    """The verified checkpoint step directory: the latest complete one, or `step`."""
    path = run.checkpoints if step is None else run.checkpoints / str(step)
    if step is not None and not path.is_dir():
        steps = sorted(int(p.name) for p in run.checkpoints.glob("*") if p.name.isdigit())
        raise UsageError(
            f"--step: no checkpoint step {step} in {str(run.checkpoints)!r}; accepted: "
            f"{', '.join(map(str, steps)) or 'none'}"
        )
    try:
        return checkpoint.resolve(path)
    except checkpoint.CheckpointError as e:
        raise CommandError(one_line(str(e))) from None


def load_policy(run: RunDir, step: int | None, deterministic: bool = True) -> tuple[Any, Any, pathlib.Path]:
    """(make_policy, params, step directory) of a run's checkpoint."""
    d = step_dir(run, step)
    try:
        loaded = checkpoint.load(d)
    except checkpoint.CheckpointError as e:
        raise CommandError(one_line(str(e))) from None
    return loaded.make_policy, loaded.params, d


class Rollout(NamedTuple):
    """One episode of a policy."""

    pipeline_states: Any
    """Physics states with a leading time axis (reset state first)."""
    length: int
    """Environment steps taken (frames minus one)."""
    reward: float
    """Sum of rewards."""
    dt: float | None
    """Seconds between frames (env.dt times the action repeat), None for envs without dt."""


def rollout(
    env: brax_envs.Env,
    policy: Policy,
    key: jax.Array,
    episode_length: int,
    action_repeat: int,
    max_steps: int,
) -> Rollout:
    """One episode (at most `max_steps` policy steps) as a single jitted `lax.scan`."""
    steps = max(min(max_steps, -(-episode_length // action_repeat)), 1)
    wrapped = wrappers.EpisodeWrapper(env, episode_length, action_repeat)

    @jax.jit
    def run(key: jax.Array) -> tuple[Any, Any, jax.Array, jax.Array]:
        key_reset, key_act = jax.random.split(key)
        s0 = wrapped.reset(key_reset)

        def body(
            carry: tuple[brax_envs.State, jax.Array], k: jax.Array
        ) -> tuple[tuple[brax_envs.State, jax.Array], tuple[Any, jax.Array, jax.Array]]:
            state, done = carry
            action, _ = policy(state.obs, k)
            nxt = wrapped.step(state, action)
            # After the episode ends the state is frozen, so the frames past the end are never shown.
            nxt = jax.tree.map(lambda a, b: jnp.where(done, a, b), state, nxt)
            reward = jnp.where(done, jnp.zeros_like(nxt.reward), nxt.reward)
            now_done = done | (nxt.done > 0)
            return (nxt, now_done), (nxt.pipeline_state, reward, now_done)

        _, (ps, rewards, dones) = jax.lax.scan(
            body, (s0, jnp.zeros((), bool)), jax.random.split(key_act, steps)
        )
        frames = jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), s0.pipeline_state, ps)
        return frames, rewards, dones, jnp.sum(rewards)

    frames, _rewards, dones, total = jax.device_get(run(key))
    done_at = np.flatnonzero(np.asarray(dones))
    length = int(done_at[0]) + 1 if done_at.size else steps
    frames = jax.tree.map(lambda a: a[: length + 1], frames)
    try:
        dt: float | None = float(np.asarray(env.dt)) * action_repeat
    except AttributeError:
        dt = None
    return Rollout(frames, length, float(total), dt)


def evaluate(
    env: brax_envs.Env,
    make_policy: Any,
    params: Any,
    episodes: int,
    episode_length: int,
    action_repeat: int,
    seed: int,
) -> dict[str, float]:
    """Mean and standard deviation of the deterministic policy's return over `episodes` episodes."""
    eval_env = wrappers.wrap_for_training(env, episode_length=episode_length, action_repeat=action_repeat)
    evaluator = acting.Evaluator(
        eval_env,
        functools.partial(make_policy, deterministic=True),
        num_eval_envs=episodes,
        episode_length=episode_length,
        action_repeat=action_repeat,
        key=jax.random.PRNGKey(seed),
    )
    return evaluator.run_evaluation(params, {})


__all__ = ["Rollout", "evaluate", "load_policy", "make_env", "rollout", "step_dir"]
