"""Recurrent PPO on the shared runner: PPO's update with a GRU policy and truncated BPTT over unrolls.

The environment carries the policy's hidden state (`MemoryWrapper`), so PPO's collection, SGD
passes and optimizer run unchanged: minibatches are whole unrolls (split over environments, never
over time), and the loss sees each unroll's hidden states recomputed from the one stored at its
first step with the current parameters (`sequence_loss`), reset to zero after episode ends.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import brax_envs
import jax
import jax.numpy as jnp

from brax_train import networks, runner
from brax_train.ppo import losses
from brax_train.ppo import networks as ppo_networks
from brax_train.ppo.train import _PPO, TrainingState, _agent
from brax_train.ppo.train import env_steps_per_update as _ppo_env_steps_per_update
from brax_train.rppo import networks as rppo_networks
from brax_train.rppo.config import RPPOConfig, merge, validate
from brax_train.rppo.memory import MemoryWrapper
from brax_train.runner import TrainResult
from brax_train.types import PRNGKey, Transition

LossFn = Callable[..., tuple[jax.Array, dict[str, jax.Array]]]
"""`loss(params, normalizer, data, key) -> (loss, metrics)`."""


def env_steps_per_update(c: RPPOConfig) -> int:
    """Environment steps one RPPO training step consumes (action repeats included)."""
    return _ppo_env_steps_per_update(c)


def replay_hidden(
    net: rppo_networks.RPPONetworks, params: losses.NetworkParams, normalizer: Any, data: Transition
) -> Transition:
    """`data` (batch, time, ...) with the observed hidden states recomputed by `net.replay` from each
    unroll's first one with `params` (differentiable)."""
    obs = data.observation
    hidden = net.replay(normalizer, params.policy, obs, data.discount)
    obs = jnp.concatenate([obs[..., : net.observation_size], hidden.astype(obs.dtype)], axis=-1)
    return dataclasses.replace(data, observation=obs)


def sequence_loss(loss: LossFn, net: rppo_networks.RPPONetworks) -> LossFn:
    """`loss` over unrolls whose hidden states are replayed with the parameters being optimized."""

    def fn(params: losses.NetworkParams, normalizer: Any, data: Transition, key: PRNGKey) -> Any:
        return loss(params, normalizer, replay_hidden(net, params, normalizer, data), key)

    return fn


@dataclasses.dataclass(frozen=True)
class _RPPO(_PPO):
    """PPO's update with the sequence loss."""

    def loss(self) -> LossFn:
        """PPO's loss with replayed hidden states."""
        assert isinstance(self.net, rppo_networks.RPPONetworks)
        return sequence_loss(super().loss(), self.net)


def _make_networks(c: RPPOConfig, setup: runner.Setup) -> rppo_networks.RPPONetworks:
    obs_size = setup.observation_size
    assert isinstance(obs_size, int)  # MemoryWrapper checked it
    factory = networks.factory(c.network_factory, rppo_networks.make_rppo_networks)
    net = factory(
        obs_size - c.hidden_size,
        setup.env.action_size - c.hidden_size,
        preprocess_observations_fn=networks.preprocessor(c.normalize_observations),
        hidden_size=c.hidden_size,
    )
    if not isinstance(net, rppo_networks.RPPONetworks) or net.hidden_size != c.hidden_size:
        raise TypeError(f"rppo's network_factory must return RPPONetworks of hidden_size {c.hidden_size}")
    return net


def _make_agent(c: RPPOConfig, setup: runner.Setup) -> runner.Agent[TrainingState, ppo_networks.PPOParams]:
    """RPPO's `(init, update)` pair for the runner's wrapped (memory-carrying) training environment."""
    core = _RPPO.of(c, setup, _make_networks(c, setup))
    return _agent(c, core, setup.observation_size, "rppo", hidden_size=c.hidden_size)


def train(environment: brax_envs.Env, config: RPPOConfig | None = None, **kwargs: Any) -> TrainResult:
    """Train a recurrent PPO agent on `environment` (flat array observations).

    Settings as for `ppo.train` (see `RPPOConfig`) plus `hidden_size`. The policy acts on
    `MemoryWrapper(environment, hidden_size)`: `make_policy(params)(obs, key)` takes `[obs, hidden]`
    and returns `[action, next_hidden]`, zero hidden at every episode start. Returns
    `TrainResult(make_policy, params, metrics)`.
    """
    c = merge(config, kwargs)
    validate(c, len(runner.mesh_devices(c)))
    if not isinstance(environment, brax_envs.Env):
        raise TypeError(f"environment must be a brax_envs.Env, got {type(environment).__name__}")
    env = MemoryWrapper(environment, c.hidden_size)
    if c.eval_env is not None:
        c = c.replace(eval_env=MemoryWrapper(c.eval_env, c.hidden_size))
    return runner.train(env, c, validate, _make_agent, "rppo")


__all__ = ["LossFn", "env_steps_per_update", "replay_hidden", "sequence_loss", "train"]
