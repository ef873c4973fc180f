"""Gymnasium (>= 1.0) adapters: `GymWrapper` (one `gymnasium.Env`) and `VectorGymWrapper` (a `VectorEnv`).

Needs the optional extra `brax-envs[gymnasium]`; `brax_envs.wrappers` does not import this module,
so gymnasium stays optional. Both adapters wrap an unbatched `brax_envs.Env` in `EpisodeWrapper`
(time limit, action repeat) and jit its `reset`/`step` once; observations, rewards and flags come
back as fresh, writable NumPy arrays.

- `terminated` is `done and not truncation`, `truncated` is `done and truncation`, where
  `truncation` is `EpisodeWrapper`'s `info['truncation']` (1 when `episode_length` was reached
  without the environment terminating).
- `VectorGymWrapper` autoresets in Gymnasium's `AutoresetMode.NEXT_STEP` mode
  (`metadata['autoreset_mode']`): the step after a sub-environment terminated or truncated ignores
  its action and returns a fresh reset observation with reward 0 and both flags False.
- Spaces: observations are `Box(-inf, inf, shape, float32)` (a `Dict` of such boxes for dict
  observations); actions are `Box(low, high, (action_size,), float32)` with `low`/`high` from the
  system's `actuator_ctrlrange` for limited actuators (unbounded for unlimited ones), or `[-1, 1]`
  for environments without a `brax_physics.System`, whose action is not the actuator controls, or
  that map actions in [-1, 1] onto the ctrlrange (`PipelineEnv.actions_scaled_to_ctrlrange`).
- `info` holds the environment's `metrics` (reward terms, diagnostics); the vector adapter adds
  Gymnasium's `_name` masks (always True).
"""

# Absolute imports (the Python 3 default) make `import gymnasium` below the top-level
# distribution, not this module, even though this module is also named `gymnasium`.
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, SupportsFloat, TypeAlias

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import numpy.typing as npt
from gymnasium import spaces
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from brax_envs.base import Env, State
from brax_envs.wrappers.training import EpisodeWrapper, VmapWrapper, _select

Obs: TypeAlias = Any
"""A float32 `np.ndarray`, or a dict of them for dict observations (batched in `VectorGymWrapper`).

Typed `Any`, as `brax_envs.State.obs` is, so code on array observations needs no narrowing.
"""

ActArray: TypeAlias = npt.NDArray[np.float32]
"""A float32 action array: (action_size,), or (num_envs, action_size) for `VectorGymWrapper`."""


def observation_space(env: Env) -> spaces.Space[Any]:
    """Single-environment observation space of `env`: unbounded float32 `Box`es (a `Dict` for dict obs)."""
    size = env.observation_size
    if isinstance(size, Mapping):
        return spaces.Dict({str(k): spaces.Box(-np.inf, np.inf, tuple(v), np.float32)
                            for k, v in size.items()})
    shape = (size,) if isinstance(size, int) else tuple(size)
    return spaces.Box(-np.inf, np.inf, shape, np.float32)


def action_space(env: Env) -> spaces.Box[np.float32]:
    """Single-environment action space of `env`: the actuator ctrlrange where known, else [-1, 1]."""
    n = env.action_size
    low = np.full((n,), -1.0, np.float32)
    high = np.full((n,), 1.0, np.float32)
    try:
        sys = env.sys
    except AttributeError:  # pipeline-free environments (e.g. `fast`) have no System
        sys = None
    # Only when actions are the actuator controls does the ctrlrange describe them.
    if sys is not None and sys.nu == n and not getattr(env, "actions_scaled_to_ctrlrange", False):
        ctrlrange = np.asarray(sys.actuator_ctrlrange, np.float32).reshape(n, 2)
        limited = np.asarray(sys.actuator_ctrllimited, bool).reshape(n)
        # Unlimited actuators accept any control; an unbounded side says so honestly.
        low = np.where(limited, ctrlrange[:, 0], -np.inf).astype(np.float32)
        high = np.where(limited, ctrlrange[:, 1], np.inf).astype(np.float32)
    return spaces.Box(low, high, (n,), np.float32)


def _key_from(rng: np.random.Generator) -> jax.Array:
    """A raw (2,) uint32 JAX key drawn from `rng`: 64 bits, so distinct Gymnasium seeds stay distinct."""
    return jnp.asarray(rng.integers(0, 2**32, size=2, dtype=np.uint32))


def _check_options(options: dict[str, Any] | None) -> None:
    """Rejects reset options: there are none to honour, and silently ignoring one would mislead."""
    if options:
        raise ValueError(f"reset options are not supported, got keys {sorted(options)}")


def _obs_to_numpy(obs: Any) -> Obs:
    """Host observation(s) as fresh float32 arrays (a copy, so callers may modify them)."""
    if isinstance(obs, Mapping):
        return {str(k): np.array(v, dtype=np.float32) for k, v in obs.items()}
    return np.array(obs, dtype=np.float32)


def _check_action_shape(action: Any, expected: tuple[int, ...]) -> jax.Array | npt.NDArray[np.float32]:
    """`action` as float32 after checking its shape, which would otherwise fail deep inside the jit."""
    got = tuple(np.shape(action))
    if got != expected:
        raise ValueError(f"expected actions of shape {expected}, got {got}")
    # Host actions stay on the host until `device_put` moves them once, to the chosen device.
    if isinstance(action, jax.Array):
        return action.astype(jnp.float32)
    return np.asarray(action, dtype=np.float32)


def _device(backend: str | None) -> jax.Device:
    """The first device of JAX platform `backend` ('cpu', 'gpu', 'tpu'), or the default device."""
    return jax.devices(backend)[0] if backend is not None else jax.devices()[0]


class GymWrapper(gymnasium.Env[Obs, ActArray]):
    """One brax_envs environment as a `gymnasium.Env` (no autoreset: call `reset` after an episode ends).

    `backend` is the JAX platform to run on ('cpu', 'gpu', 'tpu'; None for the default), not the
    physics pipeline (choose that when building `env`). `seed` seeds `np_random`, from which every
    `reset` draws its JAX key, so unseeded resets are reproducible too.
    """

    def __init__(self, env: Env, seed: int | None = 0, episode_length: int = 1000, action_repeat: int = 1,
                 backend: str | None = None) -> None:
        """Wrap unbatched `env` with a time limit of `episode_length` steps and `action_repeat`."""
        self.env = env
        self._episode_env = EpisodeWrapper(env, episode_length, action_repeat)
        self.metadata = {"render_modes": []}
        self.render_mode = None
        self.observation_space = observation_space(env)
        self.action_space = action_space(env)
        self.action_space.seed(seed)
        self._action_shape = (env.action_size,)
        self._np_random, self._np_random_seed = seeding.np_random(seed)
        self._device = _device(backend)
        self._reset_fn = jax.jit(self._episode_env.reset)
        self._step_fn = jax.jit(self._episode_env.step)
        self._state: State | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[Obs, dict[str, Any]]:
        """Start an episode; `seed` reseeds `np_random` (Gymnasium semantics), `options` must be empty."""
        super().reset(seed=seed)
        _check_options(options)
        self._state = self._reset_fn(jax.device_put(_key_from(self.np_random), self._device))
        obs, metrics = jax.device_get((self._state.obs, self._state.metrics))
        return _obs_to_numpy(obs), _scalar_info(metrics)

    def step(self, action: ActArray) -> tuple[Obs, SupportsFloat, bool, bool, dict[str, Any]]:
        """Apply `action` (action_size,); returns (obs, reward, terminated, truncated, info)."""
        if self._state is None:
            raise gymnasium.error.ResetNeeded("call reset() before step()")
        act = _check_action_shape(action, self._action_shape)
        self._state = self._step_fn(self._state, jax.device_put(act, self._device))
        st = self._state
        obs, reward, done, trunc, metrics = jax.device_get(
            (st.obs, st.reward, st.done, st.info["truncation"], st.metrics))
        ended = bool(done > 0)
        truncated = ended and bool(trunc > 0)
        return _obs_to_numpy(obs), float(reward), ended and not truncated, truncated, _scalar_info(metrics)


def _scalar_info(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """Unbatched `metrics` as Python floats (scalars) or fresh arrays."""
    return {k: float(v) if np.ndim(v) == 0 else np.array(v) for k, v in metrics.items()}


class VectorGymWrapper(gymnasium.vector.VectorEnv[Obs, ActArray, npt.NDArray[Any]]):
    """`num_envs` copies of a brax_envs environment as a Gymnasium `VectorEnv`, stepped in one jitted call.

    Autoreset mode `AutoresetMode.NEXT_STEP`: when `step` reports a sub-environment terminated or
    truncated, the next `step` ignores that sub-environment's action and returns a new reset
    observation for it (drawn with a fresh key), reward 0, terminated and truncated False.
    `backend` is the JAX platform ('cpu', 'gpu', 'tpu'; None for the default), not the physics
    pipeline. `seed` seeds `np_random`, from which every `reset` draws its JAX key.
    """

    def __init__(self, env: Env, num_envs: int, seed: int | None = 0, episode_length: int = 1000,
                 action_repeat: int = 1, backend: str | None = None) -> None:
        """Batch unbatched `env` `num_envs` times with a time limit and action repeat."""
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive int, got {num_envs!r}")
        self.env = env
        self._batched_env = VmapWrapper(EpisodeWrapper(env, episode_length, action_repeat))
        self.num_envs = num_envs
        self.metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}
        self.render_mode = None
        self.single_observation_space = observation_space(env)
        self.single_action_space = action_space(env)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.single_action_space.seed(seed)
        self.action_space.seed(seed)
        self._action_shape = (num_envs, env.action_size)
        self._np_random, self._np_random_seed = seeding.np_random(seed)
        self._device = _device(backend)
        self._reset_fn = jax.jit(self._reset_impl)
        self._step_fn = jax.jit(self._step_impl)
        # (batched state, key for autoresets, per-env "reset on the next step" mask)
        self._carry: tuple[State, jax.Array, jax.Array] | None = None
        self._traces = {"reset": 0, "step": 0}  # incremented while tracing: tests assert one trace each

    def _reset_impl(self, key: jax.Array) -> tuple[State, jax.Array, jax.Array]:
        """Batched reset; returns the state, the key for later autoresets and an all-False mask."""
        self._traces["reset"] += 1
        key, sub = jax.random.split(key)
        state = self._batched_env.reset(jax.random.split(sub, self.num_envs))
        return state, key, jnp.zeros((self.num_envs,), bool)

    def _step_impl(self, state: State, key: jax.Array, needs_reset: jax.Array, action: jax.Array
                   ) -> tuple[State, jax.Array, jax.Array, tuple[Any, ...]]:
        """Step every sub-environment, then replace those flagged `needs_reset` by fresh resets."""
        self._traces["step"] += 1
        stepped = self._batched_env.step(state, action)
        key, sub = jax.random.split(key)

        def fresh() -> State:
            return self._batched_env.reset(jax.random.split(sub, self.num_envs))

        # Resetting costs a batched reset; skip it on the (usual) steps where no episode just ended.
        restarted = jax.lax.cond(jnp.any(needs_reset), fresh, lambda: stepped)
        new = _select(needs_reset, restarted, stepped)
        done = new.done > 0
        truncated = done & (new.info["truncation"] > 0)
        terminated = done & ~truncated
        out = (new.obs, new.reward, terminated, truncated, new.metrics)
        return new, key, done, out

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[Obs, dict[str, Any]]:
        """Reset every sub-environment; `seed` reseeds `np_random`, `options` must be empty."""
        super().reset(seed=seed)
        _check_options(options)
        self._carry = self._reset_fn(jax.device_put(_key_from(self.np_random), self._device))
        state = self._carry[0]
        obs, metrics = jax.device_get((state.obs, state.metrics))
        return _obs_to_numpy(obs), self._batch_info(metrics)

    def step(self, actions: ActArray) -> tuple[Obs, npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[Any],
                                               dict[str, Any]]:
        """Apply `actions` (num_envs, action_size); returns (obs, reward, terminated, truncated, info)."""
        if self._carry is None:
            raise gymnasium.error.ResetNeeded("call reset() before step()")
        act = _check_action_shape(actions, self._action_shape)
        state, key, needs_reset = self._carry
        state, key, needs_reset, out = self._step_fn(state, key, needs_reset,
                                                     jax.device_put(act, self._device))
        self._carry = (state, key, needs_reset)
        obs, reward, terminated, truncated, metrics = jax.device_get(out)
        return (_obs_to_numpy(obs), np.array(reward, dtype=np.float32), np.array(terminated, dtype=bool),
                np.array(truncated, dtype=bool), self._batch_info(metrics))

    def _batch_info(self, metrics: Mapping[str, Any]) -> dict[str, Any]:
        """Batched `metrics` in Gymnasium's vector info layout: each key plus an all-True `_key` mask."""
        info: dict[str, Any] = {}
        for k, v in metrics.items():
            info[k] = np.array(v)
            info[f"_{k}"] = np.ones((self.num_envs,), bool)
        return info


__all__ = ["ActArray", "GymWrapper", "Obs", "VectorGymWrapper", "action_space", "observation_space"]
