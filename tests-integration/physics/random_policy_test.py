"""Every registered environment runs a uniform random policy, batched, for 1000 steps without NaN.

The standard training stack (`wrap_for_training`: NaN guard, episodes, vmap, auto-reset) steps a
batch of two for 1000 env steps (`FEWER_STEPS` names the exceptions) in one jitted `lax.scan`; the
NaN guard's counter must stay zero and every observation and reward must be finite (the guard
would otherwise hide a bad step). The robot tasks (five physics steps per env step, contacts all
along) and the classic ones are two classes, so that the two test workers share them out.
"""

from __future__ import annotations

import brax_envs
import jax
import jax.numpy as jnp
import pytest
from brax_envs import wrappers

STEPS = 1000
BATCH = 2
# On the height field, feet collide through the general convex collider cell by cell: a thousand
# steps would take minutes on a CPU, so the rough-terrain tasks run the first few hundred.
FEWER_STEPS = {"locomotion/humanoid-joystick-rough": 100, "locomotion/quadruped-joystick-rough": 300}
# The suite compiles at LLVM's cheapest level (conftest.py), which runs these two tasks' contact-rich
# falls several times slower: their 1000 steps cost more than a compile at XLA's default level.
FULL_OPTIMIZATION = ("locomotion/humanoid-getup", "locomotion/quadruped-getup")

pytestmark = pytest.mark.slow


def _run(env: brax_envs.Env, seed: int, steps: int = STEPS) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(NaN-guard step count, all observations finite, all rewards finite) over the run."""
    wrapped = wrappers.wrap_for_training(env, episode_length=steps)
    key_reset, key_act = jax.random.split(jax.random.PRNGKey(seed))
    state = wrapped.reset(jax.random.split(key_reset, BATCH))

    def body(s: brax_envs.State, key: jax.Array) -> tuple[brax_envs.State, tuple[jax.Array, ...]]:
        action = jax.random.uniform(key, (BATCH, env.action_size), jnp.float32, -1.0, 1.0)
        s = wrapped.step(s, action)
        obs_ok = jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(s.obs)]))
        return s, (s.metrics["nan_steps"].sum(), obs_ok, jnp.all(jnp.isfinite(s.reward)))

    _, (nan, obs_ok, rew_ok) = jax.lax.scan(body, state, jax.random.split(key_act, steps))
    return nan.sum(), jnp.all(obs_ok), jnp.all(rew_ok)


# dm_control's 51 suite tasks are checked against dm_control itself (brax_envs/dm_control/*_test.py);
# 1000 random steps of each here would take most of CI's time.
_OURS = sorted(n for n in brax_envs.registered_environments() if not n.startswith("dm_control/"))
_ROBOTS = [n for n in _OURS if n.startswith(("locomotion/", "manipulation/"))]


def _check(name: str) -> None:
    env = brax_envs.get_environment(name)
    options = {"xla_backend_optimization_level": 3} if name in FULL_OPTIMIZATION else None
    run = jax.jit(lambda: _run(env, 0, FEWER_STEPS.get(name, STEPS)), compiler_options=options)
    nan, obs_ok, rew_ok = run()
    assert int(nan) == 0, f"{name}: {int(nan)} non-finite steps caught by the NaN guard"
    assert bool(obs_ok) and bool(rew_ok), f"{name}: non-finite observation or reward"


class TestRobotTasks:
    """Locomotion and manipulation: long contact-rich runs, the costly half."""

    @pytest.mark.parametrize("name", _ROBOTS)
    def test_random_policy_runs_1000_steps_without_nan(self, name: str) -> None:
        _check(name)


class TestClassicTasks:
    """Gymnasium's tasks and the small ones."""

    @pytest.mark.parametrize("name", [n for n in _OURS if n not in _ROBOTS])
    def test_random_policy_runs_1000_steps_without_nan(self, name: str) -> None:
        _check(name)
