"""Acting in batched environments: unrolls for training and first-episode evaluation."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import brax_envs
import jax
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


class Evaluator:
    """Runs `num_eval_envs` episodes in parallel and reports first-episode statistics.

    `eval_env` must be batched and auto-resetting (e.g. from `wrap_for_training`); it is wrapped
    in `EvalWrapper` here. Each evaluation steps `episode_length // action_repeat` times.
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
        self._env_steps = num_eval_envs * episode_length
        env = wrappers.EvalWrapper(eval_env)

        def unroll(params: Any, key: PRNGKey) -> wrappers.EvalMetrics:
            key_reset, key_run = jax.random.split(key)
            state = env.reset(jax.random.split(key_reset, num_eval_envs))
            state, _ = generate_unroll(env, state, eval_policy_fn(params), key_run, self._steps)
            em = state.info["eval_metrics"]
            assert isinstance(em, wrappers.EvalMetrics)
            return em

        self._unroll = jax.jit(unroll)
        self.walltime = 0.0

    def run_evaluation(
        self, params: Any, training_metrics: dict[str, float], key: PRNGKey | None = None
    ) -> dict[str, float]:
        """Evaluate `params`; returns `eval/*` metrics merged with `training_metrics`."""
        if key is None:
            self._key, key = jax.random.split(self._key)
        t0 = time.perf_counter()
        em = jax.device_get(self._unroll(params, key))
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
        metrics["eval/sps"] = self._env_steps / dt if dt > 0 else float("inf")
        metrics["eval/walltime"] = self.walltime
        return {**training_metrics, **metrics}


__all__ = ["Evaluator", "actor_step", "generate_unroll"]
