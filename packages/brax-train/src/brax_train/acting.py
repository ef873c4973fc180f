"""Acting in batched environments: unrolls for training and first-episode evaluation."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import brax_envs
import jax
import jax.numpy as jnp
import numpy as np
from brax_envs import wrappers

from brax_train.types import Policy, PRNGKey, Transition


def actor_step(
    env: brax_envs.Env, state: brax_envs.State, policy: Policy, key: PRNGKey, extra_fields: Sequence[str] = ()
) -> tuple[brax_envs.State, Transition]:
    """One batched step with `policy`; the transition's `next_observation` is the pre-reset one."""
    action, policy_extras = policy(state.obs, key)
    nstate = env.step(state, action)
    next_obs = nstate.info.get("final_obs", nstate.obs)
    state_extras = {k: nstate.info[k] for k in extra_fields}
    return nstate, Transition(
        observation=state.obs,
        action=action,
        reward=nstate.reward,
        discount=1.0 - nstate.done,
        next_observation=next_obs,
        extras={"policy_extras": policy_extras, "state_extras": state_extras},
    )


def generate_unroll(
    env: brax_envs.Env,
    state: brax_envs.State,
    policy: Policy,
    key: PRNGKey,
    unroll_length: int,
    extra_fields: Sequence[str] = (),
) -> tuple[brax_envs.State, Transition]:
    """`unroll_length` steps; the transitions have a leading time axis."""

    def body(
        carry: tuple[brax_envs.State, PRNGKey], _: None
    ) -> tuple[tuple[brax_envs.State, PRNGKey], Transition]:
        st, k = carry
        k, k_step = jax.random.split(k)
        st, tr = actor_step(env, st, policy, k_step, extra_fields)
        return (st, k), tr

    (state, _), data = jax.lax.scan(body, (state, key), None, length=unroll_length)
    return state, data


def _block_length(steps: int, longest: int = 25) -> int:
    """The largest divisor of `steps` up to `longest`: evaluation checks for the end once per block."""
    return max(d for d in range(1, min(steps, longest) + 1) if steps % d == 0)


class Evaluator:
    """Runs `num_eval_envs` episodes in parallel and reports first-episode statistics.

    `eval_env` must be batched and auto-resetting (e.g. from `wrap_for_training`); it is wrapped
    in `EvalWrapper` here. Each evaluation steps `episode_length // action_repeat` times, or fewer
    when every environment's first episode has already ended (the metrics are the same).
    """

    def __init__(
        self,
        eval_env: brax_envs.Env,
        eval_policy_fn: Callable[[Any], Policy],
        num_eval_envs: int,
        episode_length: int,
        action_repeat: int,
        key: PRNGKey,
    ) -> None:
        """Compile-on-first-use evaluation of `eval_policy_fn(params)` on `eval_env`."""
        self._key = key
        self._num_eval_envs = num_eval_envs
        self._steps = episode_length // action_repeat
        self._action_repeat = action_repeat
        env = wrappers.EvalWrapper(eval_env)

        block = self._block = _block_length(self._steps)
        n_blocks = self._steps // block

        def unroll(params: Any, key: PRNGKey) -> tuple[wrappers.EvalMetrics, jax.Array]:
            key_reset, key_run = jax.random.split(key)
            state = env.reset(jax.random.split(key_reset, num_eval_envs))
            policy = eval_policy_fn(params)

            def active(st: brax_envs.State) -> jax.Array:
                em = st.info["eval_metrics"]
                assert isinstance(em, wrappers.EvalMetrics)
                return jnp.any(em.active_episodes > 0)

            # Blocks of steps until every first episode has ended: after that EvalWrapper's totals
            # no longer change, so stopping early gives the same metrics as stepping to the end
            # (early in training most episodes end long before the time limit).
            def cond(carry: tuple[jax.Array, brax_envs.State, PRNGKey]) -> jax.Array:
                i, st, _ = carry
                return (i < n_blocks) & active(st)

            def body(
                carry: tuple[jax.Array, brax_envs.State, PRNGKey],
            ) -> tuple[jax.Array, brax_envs.State, PRNGKey]:
                i, st, k = carry
                k, k_block = jax.random.split(k)
                st, _ = generate_unroll(env, st, policy, k_block, block)
                return i + 1, st, k

            carry = (jnp.zeros((), jnp.int32), state, key_run)
            blocks_run, state, _ = jax.lax.while_loop(cond, body, carry)
            em = state.info["eval_metrics"]
            assert isinstance(em, wrappers.EvalMetrics)
            return em, blocks_run

        self._unroll = jax.jit(unroll)
        self.walltime = 0.0

    def run_evaluation(
        self, params: Any, training_metrics: dict[str, float], key: PRNGKey | None = None
    ) -> dict[str, float]:
        """Evaluate `params`; returns `eval/*` metrics merged with `training_metrics`."""
        if key is None:
            self._key, key = jax.random.split(self._key)
        t0 = time.perf_counter()
        em, blocks_run = jax.device_get(self._unroll(params, key))
        env_steps = self._num_eval_envs * int(blocks_run) * self._block * self._action_repeat
        dt = time.perf_counter() - t0
        self.walltime += dt
        metrics: dict[str, float] = {}
        for name, value in em.episode_metrics.items():
            arr = np.asarray(value, np.float64)
            metrics[f"eval/episode_{name}"] = float(np.mean(arr))
            metrics[f"eval/episode_{name}_std"] = float(np.std(arr))
        lengths = np.asarray(em.episode_steps, np.float64)
        metrics["eval/avg_episode_length"] = float(np.mean(lengths))
        metrics["eval/std_episode_length"] = float(np.std(lengths))
        metrics["eval/epoch_eval_time"] = dt
        metrics["eval/steps"] = float(env_steps)  # stepped until every first episode ended
        metrics["eval/sps"] = env_steps / dt if dt > 0 else float("inf")
        metrics["eval/walltime"] = self.walltime
        return {**training_metrics, **metrics}


class Episode(NamedTuple):
    """One episode: physics states over time (reset first), steps, summed reward, seconds per frame."""

    pipeline_states: Any
    """The environment's `pipeline_state` at reset and after each step, stacked (length + 1 frames)."""
    length: int
    """Policy steps until the episode ended (or `max_steps`)."""
    reward: float
    """Summed reward."""
    dt: float | None
    """Seconds between frames (None for environments without `dt`)."""


def episode(
    env: brax_envs.Env,
    policy: Policy,
    key: PRNGKey,
    episode_length: int,
    action_repeat: int = 1,
    max_steps: int = 1000,
) -> Episode:
    """One episode of an unwrapped `env` (at most `max_steps` policy steps) in one jitted `lax.scan`."""
    steps = max(min(max_steps, -(-episode_length // action_repeat)), 1)
    wrapped = wrappers.EpisodeWrapper(env, episode_length, action_repeat)

    def body(carry: tuple[brax_envs.State, jax.Array], k: jax.Array) -> tuple[Any, Any]:
        state, done = carry
        nxt = wrapped.step(state, policy(state.obs, k)[0])
        # After the episode ends the state is frozen, so the frames past the end are never shown.
        nxt = jax.tree.map(lambda a, b: jnp.where(done, a, b), state, nxt)
        reward = jnp.where(done, jnp.zeros_like(nxt.reward), nxt.reward)
        return (nxt, done | (nxt.done > 0)), (nxt.pipeline_state, reward, done | (nxt.done > 0))

    @jax.jit
    def run(key: jax.Array) -> tuple[Any, jax.Array, jax.Array]:
        key_reset, key_act = jax.random.split(key)
        s0 = wrapped.reset(key_reset)
        carry = (s0, jnp.zeros((), bool))
        _, (ps, rewards, dones) = jax.lax.scan(body, carry, jax.random.split(key_act, steps))
        frames = jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), s0.pipeline_state, ps)
        return frames, dones, rewards.sum()

    frames, dones, total = jax.device_get(run(key))
    done_at = np.flatnonzero(np.asarray(dones))
    length = int(done_at[0]) + 1 if done_at.size else steps
    dt = float(np.asarray(env.dt)) * action_repeat if hasattr(env, "dt") else None
    return Episode(jax.tree.map(lambda a: a[: length + 1], frames), length, float(total), dt)


__all__ = ["Episode", "Evaluator", "actor_step", "episode", "generate_unroll"]
