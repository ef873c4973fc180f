"""BC from a PPO teacher and its learning bar.

A PPO teacher trained on `inverted_pendulum` teaches a BC student (DAgger relabelling) that reaches
at least 90% of the teacher's return; both are scored by one jitted rollout from the same resets, so
they share one compilation of the physics. Every batch has fewer than 64 environments: from 64 on,
the constraint solver compiles its batched work queue, which costs more compile time than these
small runs spend stepping.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import brax_envs
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from brax_envs import wrappers
from brax_train import bc, ppo
from brax_train.types import Policy

pytestmark = pytest.mark.slow

EPISODE = 200


def episode_returns(env_name: str, policies: list[Policy], num_envs: int, seed: int) -> list[float]:
    """Mean first-episode return of each policy over the same `num_envs` resets (one compilation)."""
    env = wrappers.VmapWrapper(wrappers.EpisodeWrapper(brax_envs.get_environment(env_name), EPISODE))
    n = len(policies)

    @jax.jit
    def run(key: jax.Array) -> jax.Array:
        keys = jnp.tile(jax.random.split(key, num_envs), (n, 1))
        state = env.reset(keys)

        def body(carry: tuple[brax_envs.State, jax.Array, jax.Array], _: None) -> tuple[Any, None]:
            st, alive, total = carry
            obs = jnp.reshape(st.obs, (n, num_envs, -1))
            actions = [p(obs[i], key)[0] for i, p in enumerate(policies)]
            st = env.step(st, jnp.concatenate(actions))
            total = total + alive * st.reward
            return (st, alive * (1.0 - st.done), total), None

        zeros = jnp.zeros((n * num_envs,), jnp.float32)
        (_, _, total), _ = jax.lax.scan(body, (state, zeros + 1.0, zeros), None, length=EPISODE)
        return jnp.mean(jnp.reshape(total, (n, num_envs)), axis=1)

    return [float(r) for r in np.asarray(run(jax.random.PRNGKey(seed)))]


# ---- BC ---------------------------------------------------------------------------------------------------

PPO_TEACHER: dict[str, Any] = dict(
    num_timesteps=100_000,
    episode_length=EPISODE,
    num_envs=32,
    batch_size=32,
    num_minibatches=4,
    unroll_length=16,
    num_updates_per_batch=4,
    learning_rate=3e-3,
    entropy_cost=1e-3,
    discounting=0.99,
    normalize_observations=True,
    num_evals=1,
    run_evals=False,
    seed=1,
    network_factory={"policy_hidden_layer_sizes": (32, 32), "value_hidden_layer_sizes": (64, 64)},
)
BC_STUDENT: dict[str, Any] = dict(
    episode_length=EPISODE,
    num_envs=32,
    demo_length=100,
    dagger_steps=3,
    batch_size=128,
    epochs=10,
    learning_rate=3e-3,
    run_evals=False,
    seed=2,
    network_factory={"policy_hidden_layer_sizes": (32, 32)},
)


def test_bc_student_reaches_90_percent_of_its_ppo_teacher(tmp_path: Any) -> None:
    env = brax_envs.get_environment("inverted_pendulum")
    make_teacher, teacher_params, _ = ppo.train(env, **PPO_TEACHER, save_checkpoint_path=tmp_path)
    make_student, student_params, _ = bc.train(env, **BC_STUDENT, teacher_checkpoint_path=tmp_path)
    policies: list[Callable[..., Any]] = [
        make_teacher(teacher_params, deterministic=True),
        make_student(student_params),
    ]
    teacher, student = episode_returns("inverted_pendulum", policies, num_envs=24, seed=3)
    assert teacher > 0.5 * EPISODE, teacher  # the teacher balances
    assert student >= 0.9 * teacher, (teacher, student)
