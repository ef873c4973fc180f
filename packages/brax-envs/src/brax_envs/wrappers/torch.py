"""PyTorch bridge: a brax_envs environment as a batched torch environment, zero-copy through DLPack.

Needs the optional extra `brax-envs[torch]`; `brax_envs.wrappers` does not import this module, so
torch stays optional. The environment runs as `wrap_for_training` builds it (NaN guard, time limit,
action repeat, `vmap`, auto-reset) in one jitted `step`; its state never leaves the JAX device.
Observations, rewards and flags reach torch as `torch.utils.dlpack.from_dlpack` views of JAX's output buffers,
and actions reach JAX as `jnp.from_dlpack` views of the torch tensor: no host copy, on CPU too (a
torch tensor on another device than the environment's, or of another dtype, is converted by torch
first).

The tensors alias JAX's buffers: treat them as read-only (clone before writing in place). Each step
returns new buffers, so tensors from earlier steps stay valid.

- `TorchVecEnv`: Gymnasium's vector API in torch: `reset() -> (obs, info)`,
  `step(actions) -> (obs, reward, terminated, truncated, info)`; observations keep the environment's
  layout (a tensor, or a dict of tensors).
- `RslRlVecEnv`: the `VecEnv` that rsl_rl's (rsl-rl-lib 5) `OnPolicyRunner` trains: observations
  are a `TensorDict` of groups (a dict observation's keys; `state` and `privileged_state` are
  named `policy` and `critic`, so an asymmetric critic needs no configuration).
- `SkrlVecEnv`: skrl's (2.x) torch environment interface, to pass as `env` to its trainers
  (`state()` is the privileged observation).

Episodes that end on a step come back reset by that step (their `done` is set); the observation
they ended with is in `info['final_obs']` (`extras['final_obs']` for rsl_rl). `terminated` is
`done and not truncation`, `truncated` is `done and truncation` (`EpisodeWrapper`'s time limit).
On steps where episodes ended, `info['episode']` holds each finished episode's `sum_reward`,
`length` and summed metrics.
"""

# Absolute imports (the Python 3 default) make `import torch` below the top-level distribution, not
# this module, even though this module is also named `torch`.
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, TypeAlias

try:
    import torch
except ImportError as e:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError("brax_envs.wrappers.torch needs PyTorch: pip install 'brax-envs[torch]'") from e

import jax
import jax.numpy as jnp
from torch.utils.dlpack import from_dlpack

from brax_envs.base import Env, State
from brax_envs.wrappers.training import wrap_for_training

TorchObs: TypeAlias = Any
"""Batched observations as torch tensors: one tensor, or a dict of them for dict observations.

Typed `Any`, as `brax_envs.State.obs` is, so code on tensor observations needs no narrowing.
"""

DEFAULT_GROUP_NAMES: Mapping[str, str] = {"state": "policy", "privileged_state": "critic"}
"""rsl_rl group names of the conventional dict-observation keys (other keys keep their names)."""


class _Outputs(NamedTuple):
    """What a step gives torch besides the state's arrays, packed so that one DLPack export each suffices."""

    flags: jax.Array
    """(3, num_envs) bool: done, terminated, truncated."""
    episode: jax.Array
    """(len(episode_keys), num_envs) float32 totals of the current (or just finished) episodes."""


class _Flags(NamedTuple):
    """(num_envs,) bool torch views of a step's flags."""

    done: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor


def _tensor(array: jax.Array) -> torch.Tensor:
    """`array` as a torch tensor sharing its buffer (waits until JAX has computed it)."""
    return from_dlpack(array)


def _to_torch(tree: Any) -> Any:
    """A JAX array (or a dict of them) as torch tensors sharing its buffer."""
    if isinstance(tree, Mapping):
        return {str(k): _tensor(v) for k, v in tree.items()}
    return _tensor(tree)


def _torch_device(device: jax.Device) -> torch.device:
    """The torch device that addresses the memory of JAX device `device`."""
    if device.platform == "cpu":
        return torch.device("cpu")
    index = getattr(device, "local_hardware_id", None)
    return torch.device("cuda", device.id if index is None else index)


class TorchVecEnv:
    """`num_envs` copies of a brax_envs environment, stepped in one jitted call, in torch tensors.

    `backend` is the JAX platform to run on ('cpu', 'gpu', 'tpu'; None for the default device), not
    the physics pipeline (choose that when building `env`). `episode_length`, `action_repeat` and
    `fresh_reset` are `wrap_for_training`'s. `seed` draws the reset keys. The environment is reset
    once on construction.
    """

    def __init__(self, env: Env, num_envs: int, *, episode_length: int = 1000, action_repeat: int = 1,
                 seed: int = 0, backend: str | None = None, fresh_reset: bool | None = None) -> None:
        """Batch unbatched `env` `num_envs` times behind `wrap_for_training`."""
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive int, got {num_envs!r}")
        self.env = env
        self.num_envs = num_envs
        self.num_actions = env.action_size
        self.max_episode_length = episode_length
        self.action_repeat = action_repeat
        self.jax_device = jax.devices(backend)[0] if backend is not None else jax.devices()[0]
        self.device = _torch_device(self.jax_device)
        self.cfg: dict[str, Any] = {"env": type(env.unwrapped).__name__, "num_envs": num_envs,
                                    "episode_length": episode_length, "action_repeat": action_repeat,
                                    "seed": seed}
        self._training_env = wrap_for_training(env, episode_length, action_repeat, fresh_reset=fresh_reset)
        self._reset_fn = jax.jit(self._reset_impl)
        self._step_fn = jax.jit(self._step_impl)
        self._key = jax.device_put(jax.random.PRNGKey(seed), self.jax_device)
        self._episode_keys: tuple[str, ...] = ()
        self._state, self._out = self._reset_jax()

    @property
    def jax_state(self) -> State:
        """The current batched `brax_envs.State` (on the JAX device; its arrays back the tensors)."""
        return self._state

    @property
    def observation_size(self) -> Any:
        """The wrapped environment's (unbatched) `observation_size`."""
        return self.env.observation_size

    @property
    def action_size(self) -> int:
        """The wrapped environment's action size."""
        return self.env.action_size

    @property
    def episode_length_buf(self) -> torch.Tensor:
        """(num_envs,) int32 steps taken in each environment's current episode (settable)."""
        return _tensor(self._state.info["steps"])

    @episode_length_buf.setter
    def episode_length_buf(self, steps: torch.Tensor) -> None:
        # rsl_rl staggers episodes this way (`init_at_random_ep_len`): EpisodeWrapper's counter moves.
        new = self._from_torch(steps, torch.int32, (self.num_envs,))
        self._state = self._state.replace(info={**self._state.info, "steps": new})

    def _outputs(self, state: State) -> _Outputs:
        """Flags and episode totals of a batched training state (traced inside the jitted functions)."""
        done = state.done > 0
        trunc = done & (state.info["truncation"] > 0)
        em = state.info["episode_metrics"]
        # Metrics are per-env scalars (the `Env` contract); set at trace time, the same for reset and step.
        self._episode_keys = tuple(k for k, v in em.items() if v.shape == state.reward.shape)
        episode = jnp.stack([em[k].astype(jnp.float32) for k in self._episode_keys])
        return _Outputs(flags=jnp.stack([done, done & ~trunc, trunc]), episode=episode)

    def _reset_impl(self, key: jax.Array) -> tuple[State, _Outputs, jax.Array]:
        """Batched reset with keys split from `key`; returns the state, its outputs and the next key."""
        key, sub = jax.random.split(key)
        state = self._training_env.reset(jax.random.split(sub, self.num_envs))
        return state, self._outputs(state), key

    def _step_impl(self, state: State, action: jax.Array) -> tuple[State, _Outputs]:
        """One batched, auto-resetting step and its outputs."""
        state = self._training_env.step(state, action)
        return state, self._outputs(state)

    def _reset_jax(self) -> tuple[State, _Outputs]:
        """Reset every environment on the JAX side."""
        state, out, self._key = self._reset_fn(self._key)
        return state, out

    def _from_torch(self, tensor: torch.Tensor, dtype: torch.dtype, shape: tuple[int, ...]) -> jax.Array:
        """`tensor` as a JAX array sharing its memory (after a device or dtype conversion, if needed)."""
        if tuple(tensor.shape) != shape:
            raise ValueError(f"expected a tensor of shape {shape}, got {tuple(tensor.shape)}")
        tensor = tensor.detach().to(device=self.device, dtype=dtype).contiguous()
        return jnp.from_dlpack(tensor)

    def _advance(self, actions: torch.Tensor) -> _Flags:
        """Step every environment with `actions` (num_envs, num_actions); returns the step's flags."""
        act = self._from_torch(actions, torch.float32, (self.num_envs, self.num_actions))
        self._state, self._out = self._step_fn(self._state, act)
        flags = _tensor(self._out.flags)
        return _Flags(done=flags[0], terminated=flags[1], truncated=flags[2])

    def _observations(self) -> TorchObs:
        """The current observations as torch tensors."""
        obs: TorchObs = _to_torch(self._state.obs)
        return obs

    def _step_info(self, done: torch.Tensor) -> dict[str, Any]:
        """`final_obs`, and `episode` (finished episodes' per-env scalar totals) when any episode ended."""
        info: dict[str, Any] = {"final_obs": _to_torch(self._state.info["final_obs"])}
        if bool(done.any()):
            totals = _tensor(self._out.episode)
            info["episode"] = {k: totals[i][done] for i, k in enumerate(self._episode_keys)}
        return info

    def reset(self) -> tuple[TorchObs, dict[str, Any]]:
        """Reset every environment (new keys); returns (observations, info)."""
        self._state, self._out = self._reset_jax()
        return self._observations(), {}

    def step(self, actions: torch.Tensor) -> tuple[TorchObs, torch.Tensor, torch.Tensor, torch.Tensor,
                                                    dict[str, Any]]:
        """Apply `actions` (num_envs, num_actions); returns (obs, reward, terminated, truncated, info)."""
        flags = self._advance(actions)
        return (self._observations(), _tensor(self._state.reward), flags.terminated, flags.truncated,
                self._step_info(flags.done))

    def render(self, *args: Any, **kwargs: Any) -> None:
        """No on-screen rendering (use `brax_io.html` on `jax_state.pipeline_state`)."""

    def close(self) -> None:
        """Nothing to release: JAX frees the state with this object."""


class RslRlVecEnv(TorchVecEnv):
    """rsl_rl's (rsl-rl-lib 5) `VecEnv`: pass it to `rsl_rl.runners.OnPolicyRunner`.

    Observations are a `TensorDict` of groups. An array observation is the group `policy`; a dict
    observation gives one group per key, named by `obs_groups` (group -> key) when given, else by
    `DEFAULT_GROUP_NAMES` (`state` -> `policy`, `privileged_state` -> `critic`) and the key itself.
    `step` returns (observations, rewards, dones, extras) with `extras['time_outs']` (truncations,
    which rsl_rl bootstraps), `extras['final_obs']` and, when episodes ended, `extras['episode']`.
    Needs `tensordict` (installed with rsl-rl-lib).
    """

    def __init__(self, env: Env, num_envs: int, *, obs_groups: Mapping[str, str] | None = None,
                 **kwargs: Any) -> None:
        """`TorchVecEnv(env, num_envs, **kwargs)` with observations grouped by `obs_groups`."""
        super().__init__(env, num_envs, **kwargs)
        size = env.observation_size
        if isinstance(size, Mapping):
            keys = [str(k) for k in size]
            if obs_groups is None:
                obs_groups = {DEFAULT_GROUP_NAMES.get(k, k): k for k in keys}
            unknown = sorted(set(obs_groups.values()) - set(keys))
            if unknown:
                raise ValueError(f"obs_groups names observation keys {unknown}; the observation has {keys}")
            self.obs_groups: dict[str, str] | None = dict(obs_groups)
        else:
            if obs_groups is not None:
                raise ValueError("obs_groups maps the keys of a dict observation; this one is an array")
            self.obs_groups = None

    def _grouped(self, obs: Any) -> Any:
        """`obs` (JAX) as rsl_rl's `TensorDict` of groups."""
        from tensordict import TensorDict

        tensors = _to_torch(obs)
        if self.obs_groups is None:
            groups = {"policy": tensors}
        else:
            groups = {group: tensors[key] for group, key in self.obs_groups.items()}
        return TensorDict(groups, batch_size=[self.num_envs], device=self.device)

    def get_observations(self) -> Any:
        """The current observations as a `TensorDict` of groups."""
        return self._grouped(self._state.obs)

    def step(self, actions: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor, dict[str, Any]]:  # type: ignore[override]
        """Apply `actions`; returns (observations, rewards, dones, extras) as rsl_rl's runner expects."""
        flags = self._advance(actions)
        extras = self._step_info(flags.done)
        extras["final_obs"] = self._grouped(self._state.info["final_obs"])
        extras["time_outs"] = flags.truncated
        return self.get_observations(), _tensor(self._state.reward), flags.done, extras


class SkrlVecEnv(TorchVecEnv):
    """skrl's (2.x) torch environment interface: pass it as `env` to skrl's trainers and agents.

    It implements what skrl's `envs.wrappers.torch.Wrapper` gives a wrapped environment (`reset`,
    `step` with (num_envs, 1) rewards and flags, `state`, `render`, `close`, the spaces, `num_envs`,
    `num_agents`, `device`), so no `wrap_env` is needed. For a dict observation, `obs_key` names
    the policy's observation and `state_key` the privileged state `state()` returns (None when the
    observation has no such key); `info['episode']` holds the mean of each finished-episode total,
    which skrl's trainer logs. The spaces need gymnasium (installed with skrl).
    """

    num_agents = 1

    def __init__(self, env: Env, num_envs: int, *, obs_key: str = "state",
                 state_key: str | None = "privileged_state", **kwargs: Any) -> None:
        """`TorchVecEnv(env, num_envs, **kwargs)` split into observations and states by key."""
        super().__init__(env, num_envs, **kwargs)
        size = env.observation_size
        if isinstance(size, Mapping):
            if obs_key not in size:
                raise ValueError(f"obs_key {obs_key!r} is not a key of the observation {sorted(size)}")
            self._obs_key: str | None = obs_key
            self._state_key = state_key if state_key is not None and state_key in size else None
        else:
            self._obs_key = self._state_key = None

    def _split(self, obs: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(observations, states) tensors of a JAX observation."""
        if self._obs_key is None:
            return _tensor(obs), None
        state = _tensor(obs[self._state_key]) if self._state_key is not None else None
        return _tensor(obs[self._obs_key]), state

    def _box(self, key: str | None) -> Any:
        """Unbounded float32 Box of one observation (key None: the array observation)."""
        from brax_envs.wrappers.gymnasium import observation_space

        space: Any = observation_space(self.env)
        return space if key is None else space[key]

    @property
    def observation_space(self) -> Any:
        """Single-environment observation space (a gymnasium `Box`)."""
        return self._box(self._obs_key)

    @property
    def state_space(self) -> Any:
        """Single-environment privileged-state space, or None without one."""
        return self._box(self._state_key) if self._state_key is not None else None

    @property
    def action_space(self) -> Any:
        """Single-environment action space (the actuator ctrlrange where known, else [-1, 1])."""
        from brax_envs.wrappers.gymnasium import action_space

        return action_space(self.env)

    def state(self) -> torch.Tensor | None:
        """The current privileged states (num_envs, ...), or None without them."""
        return self._split(self._state.obs)[1]

    def reset(self) -> tuple[torch.Tensor, dict[str, Any]]:
        """Reset every environment; returns (observations, info)."""
        self._state, self._out = self._reset_jax()
        return self._split(self._state.obs)[0], {}

    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                                                    dict[str, Any]]:
        """Apply `actions`; returns (obs, reward, terminated, truncated, info), each flag (num_envs, 1)."""
        flags = self._advance(actions)
        info = self._step_info(flags.done)
        if "episode" in info:
            info["episode"] = {k: v.mean() for k, v in info["episode"].items()}
        return (self._split(self._state.obs)[0], _tensor(self._state.reward).view(-1, 1),
                flags.terminated.view(-1, 1), flags.truncated.view(-1, 1), info)


__all__ = ["DEFAULT_GROUP_NAMES", "RslRlVecEnv", "SkrlVecEnv", "TorchObs", "TorchVecEnv"]
