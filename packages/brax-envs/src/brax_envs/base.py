"""The environment interface: `State`, `Env`, `PipelineEnv` and the `Wrapper` base class.

An environment is a pair of pure functions, `reset(rng) -> State` and `step(state, action) -> State`,
that can be jitted, vmapped and differentiated. `State` carries the physics state
(`pipeline_state`), the observation, the reward and done flag of the last transition, per-step
`metrics` (reward terms and diagnostics) and free-form `info` (step counters, truncation flags, keys).
"""

from __future__ import annotations

import abc
import copy
import dataclasses
import functools
import types
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeAlias

import brax_math
import brax_physics
import jax
import jax.numpy as jnp
from jax.experimental import checkify

Observation: TypeAlias = jax.Array | Mapping[str, jax.Array]
"""An observation: one array, or a mapping from names to arrays."""

ObservationSize: TypeAlias = int | tuple[int, ...] | Mapping[str, tuple[int, ...]]
"""`observation_size`: the length of a 1-D observation, the shape of an N-D one, or a shape per key."""

BACKENDS: tuple[str, ...] = ("generalized",)
"""Physics pipelines `PipelineEnv` accepts as `backend`."""


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class State:
    """Environment state after a reset or a step; a pytree, so it passes through jit, vmap and scan."""

    pipeline_state: Any
    """Physics state (`brax_physics.State` for `PipelineEnv`s), or any pytree for pipeline-free envs."""
    obs: Any
    """Observation: an array or a dict of arrays (`Observation`; typed `Any` so array code needs no casts)."""
    reward: jax.Array
    """() float32 reward of the transition that produced this state (0 after reset)."""
    done: jax.Array
    """() float32, 1.0 when the episode has ended (terminated or, under `EpisodeWrapper`, truncated)."""
    metrics: dict[str, jax.Array] = dataclasses.field(default_factory=dict)
    """Per-step scalars, e.g. reward terms; summed over episodes by `EpisodeWrapper`."""
    info: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Auxiliary data: step counters, `truncation`, keys, wrapper bookkeeping."""

    def replace(self, **changes: Any) -> State:
        """Copy with the given fields replaced."""
        return dataclasses.replace(self, **changes)


def observation_size_of(obs: Any) -> ObservationSize:
    """`observation_size` of an observation (array or dict of arrays; concrete or abstract)."""
    if isinstance(obs, Mapping):
        return {str(k): tuple(int(d) for d in v.shape) for k, v in obs.items()}
    shape = tuple(int(d) for d in obs.shape)
    return shape[0] if len(shape) == 1 else shape


def _step_finite(action: Any, nstate: State) -> jax.Array:
    """() bool: the action and the step's pipeline state, observation and reward are all finite."""
    finite = brax_math.all_finite
    return finite(action) & finite(nstate.pipeline_state) & finite(nstate.obs) & finite(nstate.reward)


class Env(abc.ABC):
    """Abstract environment: pure `reset`/`step` functions plus static sizes."""

    persistent_info: tuple[str, ...] = ()
    """`info` keys that outlive an episode (a curriculum level): `AutoResetWrapper`'s restarts keep
    them, where they bring back every other key the environment's `reset` writes."""

    @abc.abstractmethod
    def reset(self, rng: jax.Array) -> State:
        """Initial state of an episode drawn with key `rng`."""

    @abc.abstractmethod
    def step(self, state: State, action: jax.Array) -> State:
        """State after applying `action` (action_size,) in `state`."""

    @property
    def observation_size(self) -> ObservationSize:
        """Size of the observation; computed once from the abstract shape of `reset`, then cached."""
        cached: ObservationSize | None = self.__dict__.get("_observation_size_cache")
        if cached is None:
            key = jax.ShapeDtypeStruct((2,), jnp.uint32)  # type: ignore[no-untyped-call]
            cached = observation_size_of(jax.eval_shape(self.reset, key).obs)
            self.__dict__["_observation_size_cache"] = cached
        return cached

    @property
    @abc.abstractmethod
    def action_size(self) -> int:
        """Length of the action vector."""

    @property
    def backend(self) -> str:
        """Name of the physics pipeline ('none' for pipeline-free environments)."""
        return "none"

    @property
    def unwrapped(self) -> Env:
        """The innermost environment (itself, unless this is a `Wrapper`)."""
        return self

    @property
    def sys(self) -> brax_physics.System:
        """The simulated `brax_physics.System`; pipeline-free environments have none."""
        raise AttributeError(f"{type(self).__name__} simulates no brax_physics.System")

    @property
    def dt(self) -> jax.Array:
        """Seconds of simulated time per `step`."""
        raise AttributeError(f"{type(self).__name__} defines no dt")

    def with_sys(self, sys: brax_physics.System) -> Env:
        """A shallow copy of this environment that simulates `sys`; `self` is left unchanged.

        This is how per-environment systems (domain randomization) are applied: the copy may hold
        tracers while a vmapped function is traced, and is dropped afterwards.
        """
        new = copy.copy(self)
        try:
            new.sys = sys  # type: ignore[misc]
        except AttributeError as e:
            raise NotImplementedError(
                f"{type(self).__name__} cannot swap its System; give it a settable `sys` or override "
                "`with_sys`") from e
        return new


def _check_finite(state: Any, frame: jax.Array) -> None:
    """checkify checks naming the first non-finite floating field of `state`."""
    for path, leaf in jax.tree_util.tree_flatten_with_path(state)[0]:
        if jnp.issubdtype(leaf.dtype, jnp.inexact):
            name = jax.tree_util.keystr(path)
            checkify.check(jnp.all(jnp.isfinite(leaf)),
                           f"non-finite pipeline_state{name} after physics frame {{frame}}", frame=frame)


_NAN_METRIC = "nan_steps"
"""Metric that counts non-finite steps: 1.0 on such a step, else 0.0 (`NanGuardWrapper` writes it too)."""

_CHECKED = "_brax_envs_checked"
"""Marks a `reset`/`step` already wrapped by `PipelineEnv.__init_subclass__`."""


def _checked_action(env: Env, action: Any) -> jax.Array:
    """`action` as an array after trace-time checks of its shape and dtype; signed integers become float32.

    Shapes and dtypes are static under `jax.jit`, so the checks cost nothing at run time. Under
    `jax.vmap` the checked shape is one batch member's.
    """
    arr = jnp.asarray(action)
    where = f"{type(env).__name__}.step"
    expected = (env.action_size,)
    if arr.shape != expected:
        hint = ""
        if arr.ndim > 1 and arr.shape[-1:] == expected:
            hint = "; batch environments with jax.vmap or wrappers.VmapWrapper"
        raise ValueError(f"{where}: action has shape {arr.shape}, expected {expected} "
                         f"(env.action_size){hint}")
    if jnp.issubdtype(arr.dtype, jnp.signedinteger):
        # Controls are real numbers and integers are exactly representable: casting hides nothing.
        return arr.astype(jnp.float32)
    if not jnp.issubdtype(arr.dtype, jnp.floating):
        # bool (a mask or done flags), unsigned ints (a raw PRNG key) and complex would all cast
        # silently to plausible-looking controls.
        raise ValueError(f"{where}: action has dtype {arr.dtype}, expected a floating dtype "
                        "(signed integers are cast to float32)")
    return arr


def _checked_step(step: Callable[[Any, State, jax.Array], State]
                  ) -> Callable[[Any, State, jax.Array], State]:
    """`step` with the action checked and non-finite steps marked done, rewarded 0 and counted."""
    @functools.wraps(step)
    def checked(self: Env, state: State, action: jax.Array) -> State:
        action = _checked_action(self, action)
        nstate = step(self, state, action)
        # The same test as NanGuardWrapper's, so both count the same steps under one metric.
        bad = ~_step_finite(action, nstate)
        reward = jnp.where(bad, jnp.zeros_like(nstate.reward), nstate.reward)
        done = jnp.where(bad, jnp.ones_like(nstate.done), nstate.done)
        metrics = {**nstate.metrics, _NAN_METRIC: bad.astype(reward.dtype)}
        return nstate.replace(reward=reward, done=done, metrics=metrics)

    setattr(checked, _CHECKED, True)
    return checked


def _checked_reset(reset: Callable[[Any, jax.Array], State]) -> Callable[[Any, jax.Array], State]:
    """`reset` with the non-finite-step metric at zero, so reset and step states share one structure."""
    @functools.wraps(reset)
    def checked(self: Env, rng: jax.Array) -> State:
        state = reset(self, rng)
        return state.replace(metrics={**state.metrics, _NAN_METRIC: jnp.zeros_like(state.reward)})

    setattr(checked, _CHECKED, True)
    return checked


class PipelineEnv(Env):
    """An `Env` simulated by brax-physics: `n_frames` physics steps per environment step.

    Subclasses implement `reset`/`step` with `pipeline_init(q, qd)` and
    `pipeline_step(pipeline_state, action)`. `debug=True` adds `jax.experimental.checkify` checks
    after every physics frame that name the first non-finite field (run the step under
    `checkify.checkify` to read them).

    Every subclass's own `step` and `reset` are wrapped when the class is defined, so each
    environment keeps this contract without code of its own:

    - `step` checks at trace time that `action` has shape `(action_size,)` (per member under
      `jax.vmap`; `ValueError` otherwise) and a floating dtype (signed integers are cast to
      float32; bool, unsigned and complex actions raise `ValueError`).
    - A step whose action, physics state, observation or reward is not finite returns reward 0 and
      `done = 1` and sets `metrics['nan_steps']` to 1.0 (else 0.0; `reset` sets it to 0.0). The
      state and observation stay as computed: physics never hides a NaN, `NanGuardWrapper` rolls
      such steps back. A subclass `step` that calls `super().step` is checked again, which changes
      nothing.
    """

    actions_scaled_to_ctrlrange: ClassVar[bool] = False
    """True when `step` maps actions in [-1, 1] onto the actuators' ctrlrange (`action_space` is then
    [-1, 1]); False when the actions are the actuator controls themselves."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Wraps the subclass's own `step` and `reset` with the checks described above."""
        super().__init_subclass__(**kwargs)
        hooks: tuple[tuple[str, Callable[[Any], Any]], ...] = (
            ("step", _checked_step), ("reset", _checked_reset))
        for name, wrap in hooks:
            fn = cls.__dict__.get(name)
            if (isinstance(fn, types.FunctionType) and not getattr(fn, _CHECKED, False)
                    and not getattr(fn, "__isabstractmethod__", False)):
                setattr(cls, name, wrap(fn))

    def __init__(self, sys: brax_physics.System, backend: str = "generalized", n_frames: int = 1,
                 debug: bool = False) -> None:
        """Simulate `sys` with pipeline `backend`, `n_frames` physics steps per env step."""
        if backend not in BACKENDS:
            accepted = ", ".join(map(repr, BACKENDS))
            raise ValueError(f"unknown backend {backend!r}; accepted values: {accepted}")
        if isinstance(n_frames, bool) or not isinstance(n_frames, int) or n_frames < 1:
            raise ValueError(f"n_frames must be a positive int, got {n_frames!r}")
        self._sys = sys
        self._backend = backend
        self._n_frames = n_frames
        self._debug = debug

    @property
    def sys(self) -> brax_physics.System:
        """The simulated system."""
        return self._sys

    @sys.setter
    def sys(self, sys: brax_physics.System) -> None:
        self._sys = sys

    @property
    def backend(self) -> str:
        """The physics pipeline name."""
        return self._backend

    @property
    def n_frames(self) -> int:
        """Physics steps per environment step."""
        return self._n_frames

    @property
    def dt(self) -> jax.Array:
        """() seconds per environment step: `sys.opt.timestep * n_frames`."""
        return self.sys.opt.timestep * self._n_frames

    @property
    def action_size(self) -> int:
        """Number of actuators `sys.nu`."""
        return self.sys.nu

    def pipeline_init(self, q: jax.Array, qd: jax.Array) -> brax_physics.State:
        """Physics state at positions `q` (nq,) and velocities `qd` (nv,)."""
        return brax_physics.init(self.sys, q, qd)

    def pipeline_step(self, pipeline_state: brax_physics.State, action: jax.Array) -> brax_physics.State:
        """`n_frames` physics steps under control `action` (nu,)."""
        sys = self.sys

        def frame(state: brax_physics.State, i: jax.Array) -> tuple[brax_physics.State, None]:
            state = brax_physics.step(sys, state, action)
            if self._debug:
                _check_finite(state, i)
            return state, None

        if self._n_frames == 1:
            return frame(pipeline_state, jnp.zeros((), jnp.int32))[0]
        out, _ = jax.lax.scan(frame, pipeline_state, jnp.arange(self._n_frames, dtype=jnp.int32))
        return out


class Wrapper(Env):
    """Base class of environment wrappers: delegates everything it does not override to `env`."""

    def __init__(self, env: Env) -> None:
        """Wrap `env`."""
        self.env = env

    def reset(self, rng: jax.Array) -> State:
        """Delegates to the wrapped environment."""
        return self.env.reset(rng)

    def step(self, state: State, action: jax.Array) -> State:
        """Delegates to the wrapped environment."""
        return self.env.step(state, action)

    @property
    def observation_size(self) -> ObservationSize:
        """The wrapped environment's observation size (per environment, never batched)."""
        return self.env.observation_size

    @property
    def action_size(self) -> int:
        """The wrapped environment's action size."""
        return self.env.action_size

    @property
    def backend(self) -> str:
        """The wrapped environment's backend."""
        return self.env.backend

    @property
    def unwrapped(self) -> Env:
        """The innermost environment."""
        return self.env.unwrapped

    @property
    def sys(self) -> brax_physics.System:
        """The wrapped environment's system."""
        return self.env.sys

    @property
    def dt(self) -> jax.Array:
        """The wrapped environment's dt."""
        return self.env.dt

    def with_sys(self, sys: brax_physics.System) -> Env:
        """A copy of this wrapper chain whose innermost environment simulates `sys`."""
        new = copy.copy(self)
        new.env = self.env.with_sys(sys)
        return new

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes not found normally; never recurse on dunders or `env` itself
        # (copy.copy probes `__setstate__` etc. on an instance whose `__dict__` is still empty).
        if name.startswith("__") or name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)
