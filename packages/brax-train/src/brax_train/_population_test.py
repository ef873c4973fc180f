"""The antithetic population shared by ES and ARS: perturbations, masked rollouts, observation moments."""

from __future__ import annotations

from typing import Any

import brax_envs
import jax
import jax.numpy as jnp
import numpy as np
from brax_envs import wrappers
from jax.sharding import Mesh, NamedSharding

from brax_train import _population, running_statistics
from brax_train.runner import AXIS, P


class Countdown(brax_envs.Env):
    """Observation [t, 2t]; reward 1 per step; done once t reaches the action (rounded up)."""

    def reset(self, rng: jax.Array) -> brax_envs.State:
        zero = jnp.zeros((), jnp.float32)
        return brax_envs.State(
            pipeline_state=zero,
            obs=jnp.stack([zero, zero]),
            reward=zero,
            done=zero,
            metrics={"bonus": zero},
            info={"truncation": zero},
        )

    def step(self, state: brax_envs.State, action: jax.Array) -> brax_envs.State:
        t = state.pipeline_state + 1.0
        done = (t >= action[0]).astype(jnp.float32)
        return state.replace(
            pipeline_state=t,
            obs=jnp.stack([t, 2.0 * t]),
            reward=jnp.ones((), jnp.float32),
            done=done,
            metrics={"bonus": 2.0 * jnp.ones((), jnp.float32)},
        )

    @property
    def action_size(self) -> int:
        return 1


def test_perturb_is_antithetic() -> None:
    params = {"w": jnp.asarray([[1.0, 2.0]]), "b": jnp.asarray(3.0)}
    members, noise = jax.jit(lambda p: _population.perturb(p, jax.random.PRNGKey(0), 5, 0.1))(params)
    assert members["w"].shape == (10, 1, 2) and noise["w"].shape == (5, 1, 2) and members["b"].shape == (10,)
    for name in params:
        plus, minus = np.asarray(members[name][:5]), np.asarray(members[name][5:])
        np.testing.assert_allclose((plus + minus) / 2, np.broadcast_to(params[name], plus.shape), rtol=1e-6)
        np.testing.assert_allclose((plus - minus) / 0.2, np.asarray(noise[name]), rtol=1e-4, atol=1e-5)
    assert not np.allclose(np.asarray(noise["w"][0]), np.asarray(noise["w"][1]))


def _evaluate(ends: list[float], length: int) -> _population.Rollouts:
    env = wrappers.wrap_for_training(Countdown(), episode_length=length)
    mesh = Mesh(np.array(jax.devices()), (AXIS,))  # two forced CPU devices under the test conftest
    shapes = jax.eval_shape(env.reset, jax.random.split(jax.random.PRNGKey(0), len(ends)))
    shardings = jax.tree.map(lambda x: NamedSharding(mesh, P(AXIS) if x.ndim else P()), shapes)

    def act(members: jax.Array, obs: Any) -> jax.Array:
        del obs
        return members[:, None]

    fn = jax.jit(
        lambda m, k: _population.evaluate(
            env,
            act,
            m,
            k,
            num_rollouts=len(ends),
            length=length,
            mesh=mesh,
            env_shardings=shardings,
            reward_shift=0.25,
            track_moments=True,
        )
    )
    out: _population.Rollouts = fn(jnp.asarray(ends, jnp.float32), jax.random.PRNGKey(1))
    return out


def test_rollouts_count_steps_until_the_first_done() -> None:
    ends = [3.0, 1.0, 20.0, 5.0]  # the third rollout runs into the time limit of 8 steps
    r = _evaluate(ends, length=8)
    steps = np.minimum(np.asarray(ends), 8.0)
    # rewards after each first done (auto-reset episodes) are masked; reward_shift is per counted step
    np.testing.assert_allclose(np.asarray(r.returns), steps * (1.0 - 0.25))
    assert float(r.active_steps) == steps.sum()
    assert float(r.metrics["episode_count"]) == 4.0  # every first episode ends within the rollout
    assert float(r.metrics["episode_sum/sum_reward"]) == steps.sum()
    assert float(r.metrics["episode_sum/length"]) == steps.sum()
    assert float(r.metrics["episode_sum/bonus"]) == 2.0 * steps.sum()
    # observations before each first done: t = 0 .. steps - 1, and [t, 2t]
    seen = np.concatenate([np.arange(int(s), dtype=np.float64) for s in steps])
    x = np.stack([seen, 2 * seen], axis=1)
    assert r.moments is not None
    assert float(r.moments.n) == len(seen)
    np.testing.assert_allclose(np.asarray(r.moments.mean), x.mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(r.moments.m2), ((x - x.mean(axis=0)) ** 2).sum(axis=0), rtol=1e-5)


def test_update_statistics_matches_pooled_moments() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.normal(3.0, 2.0, size=(7, 3)), rng.normal(-1.0, 0.5, size=(11, 3))
    stats = running_statistics.init_state((3,))
    for batch in (a, b):
        per_rollout = _population.Moments(
            jnp.ones(len(batch), jnp.float32),
            jnp.asarray(batch, jnp.float32),
            jnp.zeros(batch.shape, jnp.float32),
        )
        stats = _population.update_statistics(stats, _population.reduce_moments(per_rollout))
    pooled = np.concatenate([a, b])
    assert stats.count.to_int() == 18
    np.testing.assert_allclose(np.asarray(stats.mean), pooled.mean(axis=0), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(stats.std), pooled.std(axis=0), rtol=1e-5)
    # the library's own Welford update on the same samples agrees
    ref = running_statistics.update(running_statistics.init_state((3,)), jnp.asarray(pooled, jnp.float32))
    np.testing.assert_allclose(np.asarray(stats.summed_variance), np.asarray(ref.summed_variance), rtol=1e-5)


def test_nonfinite_code_names_the_first_bad_quantity() -> None:
    ok, bad = jnp.ones(2), jnp.asarray([1.0, jnp.nan])
    codes = [
        _population.nonfinite_code(ok, ok, ok, ok),
        _population.nonfinite_code(bad, bad, ok, ok),
        _population.nonfinite_code(ok, bad, bad, ok),
        _population.nonfinite_code(ok, ok, bad, bad),
        _population.nonfinite_code(ok, ok, ok, bad),
    ]
    assert [int(c) for c in codes] == [0, 1, 2, 3, 4]
