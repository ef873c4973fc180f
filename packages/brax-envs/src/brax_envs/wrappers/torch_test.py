"""Tests of the PyTorch bridge: shapes, dict observations, auto-reset, zero-copy, the missing extra."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from brax_envs.base import State
from brax_envs.envs import Fast
from brax_envs.wrappers.torch import RslRlVecEnv, SkrlVecEnv, TorchVecEnv

N = 4
EPISODE = 3


class _DictObs(Fast):
    """`fast` with a policy observation (position) and a privileged one (position and velocity)."""

    def reset(self, rng: jax.Array) -> State:
        """`fast`'s reset with obs split by name."""
        s = super().reset(rng)
        return s.replace(obs={"state": s.obs[:1], "privileged_state": s.obs})

    def step(self, state: State, action: jax.Array) -> State:
        """`fast`'s step with obs split by name."""
        s = super().step(state, action)
        return s.replace(obs={"state": s.pipeline_state[:1], "privileged_state": s.pipeline_state})

    @property
    def observation_size(self) -> Any:
        """A shape per key."""
        return {"state": (1,), "privileged_state": (2,)}


def _np(t: torch.Tensor) -> np.ndarray[Any, Any]:
    return t.detach().numpy().copy()


def test_shapes_and_dtypes() -> None:
    env = TorchVecEnv(Fast(), N, episode_length=EPISODE)
    obs, info = env.reset()
    assert isinstance(obs, torch.Tensor) and obs.shape == (N, 2) and obs.dtype == torch.float32
    assert info == {} and env.device == torch.device("cpu") and env.num_actions == 1
    obs, reward, terminated, truncated, info = env.step(torch.zeros(N, 1))
    assert isinstance(obs, torch.Tensor) and obs.shape == (N, 2)
    assert reward.shape == (N,) and reward.dtype == torch.float32
    assert terminated.shape == truncated.shape == (N,) and terminated.dtype == truncated.dtype == torch.bool
    assert "episode" not in info and info["final_obs"].shape == (N, 2)
    with pytest.raises(ValueError, match=r"shape \(4, 1\)"):
        env.step(torch.zeros(N, 2))


def test_actions_reach_the_environment() -> None:
    # fast from rest: velocity = dt * clip(action), position = dt * velocity after one step.
    env = TorchVecEnv(Fast(), N, episode_length=EPISODE)
    obs0, _ = env.reset()
    actions = torch.tensor([[-1.0], [-0.5], [0.25], [1.0]])
    obs, *_ = env.step(actions)
    np.testing.assert_allclose(_np(obs[:, 1]), 0.02 * _np(actions[:, 0]), rtol=1e-6)
    np.testing.assert_allclose(_np(obs[:, 0]), _np(obs0[:, 0]) + 0.02 * _np(obs[:, 1]), rtol=1e-6)


def test_auto_reset_keeps_final_observation_and_episode_totals() -> None:
    env = TorchVecEnv(Fast(), N, episode_length=EPISODE)
    first, _ = env.reset()
    first = first.clone()
    rewards = []
    for t in range(EPISODE):
        obs, reward, terminated, truncated, info = env.step(torch.ones(N, 1))
        rewards.append(reward.clone())
        if t < EPISODE - 1:
            assert not truncated.any() and "episode" not in info
            torch.testing.assert_close(info["final_obs"], obs)
    # The time limit: every env truncated (not terminated), restarted from its first state, and the
    # observation it ended with is the final one, not the reset one.
    assert truncated.all() and not terminated.any()
    torch.testing.assert_close(obs, first)
    assert not torch.allclose(info["final_obs"], first)
    assert (info["final_obs"][:, 1] > 0).all()  # pushed forward for three steps
    episode = info["episode"]
    torch.testing.assert_close(episode["length"], torch.full((N,), float(EPISODE)))
    torch.testing.assert_close(episode["sum_reward"], torch.stack(rewards).sum(0))
    # The next step starts a new episode.
    _, _, _, truncated, info = env.step(torch.ones(N, 1))
    assert not truncated.any() and "episode" not in info


def test_episode_length_buf_is_the_episode_step_counter() -> None:
    env = RslRlVecEnv(Fast(), N, episode_length=EPISODE)
    assert env.max_episode_length == EPISODE
    torch.testing.assert_close(env.episode_length_buf, torch.zeros(N, dtype=torch.int32))
    env.episode_length_buf = torch.tensor([0, 1, 2, 2], dtype=torch.int32)
    _, _, dones, extras = env.step(torch.zeros(N, 1))
    assert dones.tolist() == [False, False, True, True]
    assert extras["time_outs"].tolist() == [False, False, True, True]
    torch.testing.assert_close(env.episode_length_buf, torch.tensor([1, 2, 3, 3], dtype=torch.int32))
    torch.testing.assert_close(extras["episode"]["length"], torch.ones(2))  # counted since the reset


def test_rsl_rl_groups_of_a_dict_observation() -> None:
    env = RslRlVecEnv(_DictObs(), N, episode_length=EPISODE)
    obs = env.get_observations()
    assert sorted(obs.keys()) == ["critic", "policy"] and obs.batch_size == torch.Size([N])
    assert obs["policy"].shape == (N, 1) and obs["critic"].shape == (N, 2)
    torch.testing.assert_close(obs["policy"][:, 0], obs["critic"][:, 0])
    obs, rewards, dones, extras = env.step(torch.ones(N, 1))
    assert rewards.shape == dones.shape == (N,) and sorted(extras["final_obs"].keys()) == ["critic", "policy"]
    renamed = RslRlVecEnv(_DictObs(), N, obs_groups={"actor_obs": "state"})
    assert list(renamed.get_observations().keys()) == ["actor_obs"]
    with pytest.raises(ValueError, match="velocity"):
        RslRlVecEnv(_DictObs(), N, obs_groups={"policy": "velocity"})
    assert list(RslRlVecEnv(Fast(), N).get_observations().keys()) == ["policy"]


def test_skrl_observations_and_states() -> None:
    env = SkrlVecEnv(_DictObs(), N, episode_length=EPISODE)
    assert env.num_envs == N and env.num_agents == 1
    assert env.observation_space.shape == (1,) and env.state_space.shape == (2,)
    assert env.action_space.shape == (1,)
    obs, _ = env.reset()
    state = env.state()
    assert obs.shape == (N, 1) and state is not None and state.shape == (N, 2)
    for _ in range(EPISODE):
        obs, reward, terminated, truncated, info = env.step(torch.ones(N, 1))
    assert reward.shape == terminated.shape == truncated.shape == (N, 1) and truncated.all()
    # skrl's trainer logs `info['episode']` entries holding one number.
    assert info["episode"]["length"].numel() == 1 and float(info["episode"]["length"]) == EPISODE
    plain = SkrlVecEnv(Fast(), N)
    assert plain.state() is None and plain.state_space is None and plain.observation_space.shape == (2,)


def test_outputs_alias_jax_buffers() -> None:
    env = RslRlVecEnv(_DictObs(), N, episode_length=EPISODE)
    actions = torch.ones(N, 1)
    with jax.transfer_guard("disallow"):
        obs, rewards, dones, extras = env.step(actions)
    state = env.jax_state
    # Flags are rows of one (3, num_envs) bool buffer: done, terminated, truncated.
    flags = env._out.flags.unsafe_buffer_pointer()
    assert dones.data_ptr() == flags and extras["time_outs"].data_ptr() == flags + 2 * N
    assert obs["policy"].data_ptr() == state.obs["state"].unsafe_buffer_pointer()
    assert obs["critic"].data_ptr() == state.obs["privileged_state"].unsafe_buffer_pointer()
    assert rewards.data_ptr() == state.reward.unsafe_buffer_pointer()
    assert extras["final_obs"]["critic"].data_ptr() == (
        state.info["final_obs"]["privileged_state"].unsafe_buffer_pointer())
    assert env.episode_length_buf.data_ptr() == state.info["steps"].unsafe_buffer_pointer()


def test_actions_reach_jax_without_a_copy() -> None:
    env = TorchVecEnv(Fast(), N)
    actions = torch.randn(N, 1)
    act = env._from_torch(actions, torch.float32, (N, 1))
    assert act.unsafe_buffer_pointer() == actions.data_ptr()
    np.testing.assert_array_equal(np.asarray(act), _np(actions))
    # A float64 tensor is converted by torch (on its device), then shared.
    as_f32 = env._from_torch(actions.double(), torch.float32, (N, 1))
    assert as_f32.dtype == jnp.float32
    with jax.transfer_guard("disallow"):
        env.step(actions)


def test_import_without_torch_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # what `import torch` sees when it is not installed
    monkeypatch.delitem(sys.modules, "brax_envs.wrappers.torch")
    with pytest.raises(ImportError, match=r"pip install 'brax-envs\[torch\]'"):
        importlib.import_module("brax_envs.wrappers.torch")
