"""dm_control's dog tasks against dm_control itself (lean: the dog's programs take long to compile)."""

from __future__ import annotations

import functools
from collections.abc import Mapping

import brax_physics
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from brax_envs import testing
from brax_envs.dm_control import _oracle
from brax_envs.dm_control._suite import SuiteEnv
from brax_envs.dm_control.dog import Dog

MOVING = ("stand", "walk", "trot", "run")  # one model (but for the floor's drawn size), one observation
# one float32 step of the dog's contact solve: velocities (to ~60 rad/s), the accelerometer (~60 m/s²),
# forces and touch (to ~400 N) move by a few 1e-6 of their scale, and by how much depends on the CPU
# (a Xeon's round-off moved a foot force by 2.3e-3 N): at least 1e-5 of each scale
OBS_TOL = {"joint_velocites": (6e-4, 1e-5), "inertial_sensors": (2e-3, 1e-5), "foot_forces": (4e-3, 1e-5),
           "touch_sensors": (4e-3, 1e-5)}


class _MovingTasks(Dog):
    """stand, walk, trot and run in one env, so one physics program: the reward of task `info["task"]`."""

    def __init__(self) -> None:
        super().__init__("walk")
        self._each = [Dog(t) for t in MOVING]

    def reward(self, ps: brax_physics.State, info: Mapping[str, jax.Array], action: jax.Array) -> jax.Array:
        rewards = jnp.stack([e.reward(ps, info, action) for e in self._each])
        return rewards[jnp.asarray(info["task"]).astype(jnp.int32)]


@functools.cache
def _env(task: str) -> SuiteEnv:
    return Dog(task)


def test_moving_tasks_match_dm_control() -> None:
    env = _MovingTasks()
    batch = []
    for i, task in enumerate(MOVING):
        batch += [s._replace(task_info={"task": np.asarray(i, np.float32)})
                  for s in _oracle.samples(env, "dog", task, steps=6, seed=1)]
    _oracle.check(env, batch, obs_tol=OBS_TOL)


def test_fetch_matches_dm_control() -> None:
    env = _env("fetch")
    _oracle.check(env, _oracle.samples(env, "dog", "fetch", steps=10, seed=1), obs_tol=OBS_TOL)


@pytest.mark.parametrize("task", ["stand", "fetch"])  # walk, trot and run draw as stand does
def test_initial_states_match_dm_control(task: str) -> None:
    env = _env(task)
    _oracle.check_initial_distribution(env, "dog", task)
    # the actuator states: uniform in the control ranges, as dm_control's
    dm = _oracle.dm_env("dog", task, 0)
    want = []
    for _ in range(64):
        dm.reset()
        want.append(dm.physics.data.act.copy())
    w = np.stack(want)
    got = np.asarray(_oracle.initial_draws(env, jax.random.split(jax.random.key(0), 256))[2]["initial_act"])
    lo, hi = dm.physics.model.actuator_ctrlrange.T
    assert np.all(w >= lo) and np.all(w <= hi) and np.all(got >= lo) and np.all(got <= hi)
    np.testing.assert_allclose(got.mean(0), w.mean(0), atol=5 * np.sqrt(1 / 3 / 64 + 1 / 3 / 256))
    np.testing.assert_allclose(got.std(0), w.std(0), rtol=0.35)


def test_check_env_and_episode_length() -> None:
    env = _env("stand")
    assert env.n_frames == 3 and env.episode_length == 1000
    check = testing.check_env(env, vmap="trace", num_steps=2)
    ps = check.states[0].pipeline_state
    np.testing.assert_array_equal(ps.act, check.states[0].info["task"]["initial_act"])
