"""`MemoryWrapper`: an environment whose state carries the recurrent policy's hidden state.

The policy reads its hidden state from the observation's tail and writes the next one as the
action's tail, so every stateless consumer of `policy(obs, key)` (unrolls, the runner's evaluation,
checkpoints of the environment state, export) carries it without knowing about recurrence. The
wrapper goes inside the training wrappers: a reset, auto-resets included, starts from a zero state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import brax_envs
import jax
import jax.numpy as jnp


class MemoryWrapper(brax_envs.Wrapper):
    """Observations `[obs, hidden]`, actions `[action, next_hidden]`; resets zero the hidden state."""

    def __init__(self, env: brax_envs.Env, hidden_size: int) -> None:
        """Carry `hidden_size` floats of memory through `env` (flat array observations only)."""
        super().__init__(env)
        if isinstance(hidden_size, bool) or not isinstance(hidden_size, int) or hidden_size < 1:
            raise ValueError(f"hidden_size must be a positive int, got {hidden_size!r}")
        size = env.observation_size
        if not isinstance(size, int):
            raise ValueError(
                f"recurrent policies take flat array observations, got observation_size {size!r}"
            )
        self.hidden_size = hidden_size
        self._obs_size = size
        self._action_size = env.action_size

    @property
    def observation_size(self) -> int:
        """The environment's observation size plus `hidden_size`."""
        return self._obs_size + self.hidden_size

    @property
    def action_size(self) -> int:
        """The environment's action size plus `hidden_size`."""
        return self._action_size + self.hidden_size

    def reset(self, rng: jax.Array) -> brax_envs.State:
        """Reset the environment; the hidden state starts at zero."""
        state = self.env.reset(rng)
        zeros = jnp.zeros((*state.obs.shape[:-1], self.hidden_size), state.obs.dtype)
        return state.replace(obs=jnp.concatenate([state.obs, zeros], axis=-1))

    def step(self, state: brax_envs.State, action: jax.Array) -> brax_envs.State:
        """Step with the action's head; its tail becomes the observed hidden state."""
        inner = state.replace(obs=state.obs[..., : self._obs_size])
        nstate = self.env.step(inner, action[..., : self._action_size])
        hidden = action[..., self._action_size :].astype(nstate.obs.dtype)
        return nstate.replace(obs=jnp.concatenate([nstate.obs, hidden], axis=-1))


def policy_env(env: brax_envs.Env, settings: Mapping[str, Any]) -> brax_envs.Env:
    """The environment an RPPO run's policies act on: `env` carrying `settings["hidden_size"]` of memory."""
    return MemoryWrapper(env, int(settings["hidden_size"]))


__all__ = ["MemoryWrapper", "policy_env"]
