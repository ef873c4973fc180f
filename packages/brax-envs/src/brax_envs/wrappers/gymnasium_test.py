"""Tests of the Gymnasium adapters (gymnasium's own env checker, autoreset, truncation, spaces)."""

from __future__ import annotations

import subprocess
import sys
import warnings
from typing import Any

import brax_physics
import gymnasium
import jax
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode

import brax_envs
from brax_envs.base import PipelineEnv, State
from brax_envs.envs import Fast
from brax_envs.wrappers.gymnasium import GymWrapper, VectorGymWrapper, action_space, observation_space

# Warnings check_env raises about choices made on purpose: observations are unbounded, and an
# environment whose actions are its controls keeps their ctrlrange rather than a normalized range.
_EXPECTED_WARNINGS = ("space minimum value is -infinity", "space maximum value is infinity",
                      "we recommend using a symmetric and normalized space")


def _check_env_quietly(env: gymnasium.Env[Any, Any]) -> None:
    """`check_env` (no render check: render_mode is None), failing on any unexpected warning."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=True)
    unexpected = [str(w.message) for w in caught if not any(s in str(w.message) for s in _EXPECTED_WARNINGS)]
    assert not unexpected, unexpected


class _DictObs(Fast):
    """`fast` with a dict observation, to exercise `Dict` spaces."""

    def reset(self, rng: jax.Array) -> State:
        """`fast`'s reset with obs split by name."""
        s = super().reset(rng)
        return s.replace(obs={"pos": s.obs[:1], "vel": s.obs[1:]})

    def step(self, state: State, action: jax.Array) -> State:
        """`fast`'s step with obs split by name."""
        s = super().step(state, action)
        return s.replace(obs={"pos": s.pipeline_state[:1], "vel": s.pipeline_state[1:]})

    @property
    def observation_size(self) -> Any:
        """A shape per key."""
        return {"pos": (1,), "vel": (1,)}


_UNLIMITED_XML = """
<mujoco>
  <worldbody>
    <body><joint name="a" type="hinge" axis="0 1 0"/><geom type="capsule" size="0.05" fromto="0 0 0 0 0 -1"/>
      <body pos="0 0 -1"><joint name="b" type="hinge" axis="0 1 0"/>
        <geom type="capsule" size="0.05" fromto="0 0 0 0 0 -1"/></body></body>
  </worldbody>
  <actuator>
    <motor joint="a" ctrllimited="true" ctrlrange="-2 0.5"/>
    <motor joint="b" ctrllimited="false"/>
  </actuator>
</mujoco>
"""


class _Unlimited(PipelineEnv):
    """A two-actuator system, one limited and one not; only its spaces are used."""

    def __init__(self) -> None:
        """Load the model."""
        super().__init__(brax_physics.load_mjcf(_UNLIMITED_XML))

    def reset(self, rng: jax.Array) -> State:
        """Unused."""
        raise NotImplementedError

    def step(self, state: State, action: jax.Array) -> State:
        """Unused."""
        raise NotImplementedError

    @property
    def observation_size(self) -> int:
        """Unused by the space tests."""
        return 4


def test_import_does_not_load_gymnasium() -> None:
    # gymnasium is an optional extra: importing the wrappers package must not need it.
    code = ("import sys, brax_envs, brax_envs.wrappers; assert 'gymnasium' not in sys.modules; "
            "import brax_envs.wrappers.gymnasium as g, gymnasium; "
            "assert g.gymnasium is gymnasium and gymnasium.__name__ == 'gymnasium'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_spaces() -> None:
    ip = brax_envs.get_environment("inverted_pendulum")
    assert observation_space(ip) == gymnasium.spaces.Box(-np.inf, np.inf, (4,), np.float32)
    # [-1, 1], which its step maps onto the ctrlrange [-3, 3]
    assert action_space(ip) == gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)
    humanoid = brax_envs.get_environment("humanoid")
    assert action_space(humanoid) == gymnasium.spaces.Box(-1.0, 1.0, (17,), np.float32)
    assert action_space(Fast()) == gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)
    space = action_space(_Unlimited())
    np.testing.assert_array_equal(space.low, [-2.0, -np.inf])
    np.testing.assert_array_equal(space.high, [0.5, np.inf])
    assert space.dtype == np.float32
    dict_space = observation_space(_DictObs())
    assert isinstance(dict_space, gymnasium.spaces.Dict)
    assert dict_space["pos"] == gymnasium.spaces.Box(-np.inf, np.inf, (1,), np.float32)


def test_gymnasium_env_checker_fast() -> None:
    _check_env_quietly(GymWrapper(brax_envs.get_environment("fast"), episode_length=50))


def test_gymnasium_env_checker_inverted_pendulum() -> None:
    env = GymWrapper(brax_envs.get_environment("inverted_pendulum"), episode_length=50)
    _check_env_quietly(env)
    # Push until the pole falls: termination, not truncation.
    env.reset(seed=0)
    for _ in range(50):
        obs, reward, terminated, truncated, info = env.step(np.full((1,), 3.0, np.float32))
        if terminated or truncated:
            break
    assert terminated and not truncated
    assert abs(obs[1]) > 0.2
    assert isinstance(reward, float) and set(info) == {"reward_survive", "nan_steps"}


def test_gym_wrapper_truncates_and_validates() -> None:
    env = GymWrapper(brax_envs.get_environment("fast"), seed=3, episode_length=3)
    with pytest.raises(gymnasium.error.ResetNeeded):
        env.step(np.zeros((1,), np.float32))
    obs, _ = env.reset()
    assert obs.shape == (2,) and obs.dtype == np.float32 and obs.flags.writeable
    flags = [env.step(np.zeros((1,), np.float32))[2:4] for _ in range(3)]
    assert flags == [(False, False), (False, False), (False, True)]
    with pytest.raises(ValueError, match=r"expected actions of shape \(1,\), got \(2,\)"):
        env.step(np.zeros((2,), np.float32))
    with pytest.raises(ValueError, match="reset options"):
        env.reset(options={"foo": 1})
    # The constructor seed makes unseeded resets reproducible.
    again = GymWrapper(brax_envs.get_environment("fast"), seed=3, episode_length=3)
    np.testing.assert_array_equal(again.reset()[0], obs)


def test_vector_shapes_truncation_and_next_step_autoreset() -> None:
    n = 3
    env = VectorGymWrapper(brax_envs.get_environment("fast"), n, seed=1, episode_length=3)
    assert env.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    assert env.single_observation_space == gymnasium.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    assert env.observation_space.shape == (n, 2) and env.action_space.shape == (n, 1)
    with pytest.raises(gymnasium.error.ResetNeeded):
        env.step(np.zeros((n, 1), np.float32))
    obs, info = env.reset(seed=5)
    assert obs.shape == (n, 2) and obs.dtype == np.float32 and obs in env.observation_space
    assert info["reward_distance"].shape == (n,) and info["_reward_distance"].all()

    push = np.ones((n, 1), np.float32)
    for t in range(3):
        obs, reward, terminated, truncated, info = env.step(push)
        assert obs.shape == (n, 2) and obs.dtype == np.float32
        assert reward.shape == (n,) and reward.dtype == np.float32
        assert terminated.dtype == bool and truncated.dtype == bool
        assert not terminated.any()
        assert truncated.all() == (t == 2) and truncated.any() == (t == 2)
    assert (obs[:, 1] > 0).all()  # moving after three pushes
    # Next-step autoreset: the action is ignored, obs is a reset obs (at rest), reward 0, no flags.
    obs, reward, terminated, truncated, _ = env.step(push)
    np.testing.assert_array_equal(obs[:, 1], 0.0)
    assert (np.abs(obs[:, 0]) <= 0.1).all()
    np.testing.assert_array_equal(reward, 0.0)
    assert not terminated.any() and not truncated.any()
    obs, reward, _, truncated, _ = env.step(push)
    assert (obs[:, 1] > 0).all() and (reward != 0).all() and not truncated.any()
    assert env._traces == {"reset": 1, "step": 1}  # jitted once, autoresets included

    with pytest.raises(ValueError, match=r"expected actions of shape \(3, 1\), got \(3,\)"):
        env.step(np.zeros((n,), np.float32))
    with pytest.raises(ValueError, match="num_envs"):
        VectorGymWrapper(brax_envs.get_environment("fast"), 0)


def test_vector_determinism() -> None:
    def rollout(env: VectorGymWrapper, seed: int | None) -> list[np.ndarray]:
        obs = [env.reset(seed=seed)[0]]
        actions = np.random.default_rng(0).uniform(-1, 1, (6, 2, 1)).astype(np.float32)
        obs += [env.step(a)[0] for a in actions]
        return obs

    a = VectorGymWrapper(brax_envs.get_environment("fast"), 2, seed=11, episode_length=2)
    b = VectorGymWrapper(brax_envs.get_environment("fast"), 2, seed=11, episode_length=2)
    for x, y in zip(rollout(a, None), rollout(b, None), strict=True):
        np.testing.assert_array_equal(x, y)
    first = rollout(a, 4)
    for x, y in zip(first, rollout(a, 4), strict=True):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(first[0], rollout(a, 5)[0])
    assert not np.array_equal(first[0][0], first[0][1])  # sub-environments get their own keys


def test_vector_dict_observations() -> None:
    env = VectorGymWrapper(_DictObs(), 2, episode_length=4)
    obs, _ = env.reset(seed=0)
    assert isinstance(obs, dict) and set(obs) == {"pos", "vel"}
    assert obs["pos"].shape == (2, 1) and obs["pos"].dtype == np.float32
    assert obs in env.observation_space
    obs, *_ = env.step(np.zeros((2, 1), np.float32))
    assert isinstance(obs, dict) and obs in env.observation_space


def test_vector_termination_then_next_step_reset() -> None:
    # Env 0 is pushed hard and falls over; env 1 is left alone and keeps balancing for a while.
    env = VectorGymWrapper(brax_envs.get_environment("inverted_pendulum"), 2, seed=0, episode_length=100)
    env.reset(seed=0)
    actions = np.array([[3.0], [0.0]], np.float32)
    for _ in range(30):
        obs, reward, terminated, truncated, _ = env.step(actions)
        if terminated[0]:
            break
    assert terminated[0] and not truncated[0] and not terminated[1]
    assert abs(obs[0, 1]) > 0.2 and reward[0] == 1.0
    previous = obs[1].copy()
    obs, reward, terminated, truncated, _ = env.step(actions)
    # Env 0 restarted upright (reset noise 0.01) with reward 0; env 1 simply stepped on.
    assert (np.abs(obs[0]) <= 0.01).all()
    assert reward[0] == 0.0 and reward[1] == 1.0
    assert not terminated.any() and not truncated.any()
    assert not np.array_equal(obs[1], previous) and abs(obs[1, 1] - previous[1]) < 0.05
