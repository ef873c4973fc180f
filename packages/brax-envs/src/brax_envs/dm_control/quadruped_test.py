"""dm_control's quadruped tasks against dm_control itself."""

from __future__ import annotations

import functools
import importlib
from typing import Any, cast

import jax.numpy as jnp
import numpy as np
import pytest

from brax_envs import testing
from brax_envs.dm_control import _oracle, load
from brax_envs.dm_control._suite import SuiteEnv, suite_module
from brax_envs.dm_control.quadruped import Quadruped

# Contact-driven values (hinge velocities, accelerometer, toe forces) carry our float32 constraint
# solver's error against MuJoCo's float64 one: about 1e-4 relative after one physics step.
OBS_TOL = {"egocentric_state": (1e-4, 1e-4), "imu": (1e-4, 1e-4), "force_torque": (1e-3, 1e-3)}


@pytest.fixture(autouse=True)
def _no_rendering(monkeypatch: pytest.MonkeyPatch) -> None:
    # dm_control's escape re-uploads its new terrain to a rendering context where one can be made:
    # none is needed here (and without an OpenGL platform, making one fails)
    suite_module("quadruped")  # imports dm_control without binding an OpenGL platform
    engine = importlib.import_module("dm_control.mujoco.engine")
    monkeypatch.setattr(engine.Physics, "contexts", property(lambda self: None))


@functools.cache
def _env(task: str) -> Quadruped:
    return cast(Quadruped, load("quadruped", task))


@pytest.mark.parametrize("task", ["walk", "run", "fetch"])
def test_matches_dm_control(task: str) -> None:
    env = _env(task)
    _oracle.check(env, _oracle.samples(env, "quadruped", task, steps=10, seed=1), obs_tol=OBS_TOL)


def test_escape_matches_dm_control() -> None:
    env = _env("escape")
    batch = _oracle.samples(env, "quadruped", "escape", steps=10, seed=1)
    # the oracle steps `env.sys`: give it the episode's terrain, as our own step does
    on_terrain = env.with_sys(env.sys.replace(hfield_data=jnp.asarray(batch[0].task_info["hfield"])))
    _oracle.check(cast(SuiteEnv, on_terrain), batch, obs_tol=OBS_TOL)


class _Bumps(np.random.RandomState):
    """dm_control's random stream with its terrain bumps replaced by given ones."""

    def __init__(self, bumps: np.ndarray) -> None:
        super().__init__(0)
        self.bumps = bumps

    def uniform(self, low: Any = 0.0, high: Any = 1.0, size: Any = None) -> Any:
        return self.bumps if np.shape(self.bumps) == size else super().uniform(low, high, size)


def test_escape_terrain_is_dm_controls() -> None:
    suite = importlib.import_module("dm_control.suite")
    env = _env("escape")
    bumps = np.random.default_rng(0).uniform(0.15, 1.0, (30, 30))
    dm = suite.load("quadruped", "escape", task_kwargs={"random": _Bumps(bumps)})
    dm.reset()
    want = np.asarray(dm.physics.model.hfield_data)
    np.testing.assert_allclose(env.terrain(jnp.asarray(bumps, jnp.float32)), want, atol=2e-6)


@pytest.mark.parametrize("task", ["walk", "escape", "fetch"])
def test_initial_states_match_dm_control(task: str) -> None:
    # run draws its initial states as walk does
    _oracle.check_initial_distribution(_env(task), "quadruped", task, n=64)


def test_check_env_and_episode_length() -> None:
    env = _env("escape")
    assert env.n_frames == 4 and env.episode_length == 1000
    testing.check_env(env, vmap="trace")
