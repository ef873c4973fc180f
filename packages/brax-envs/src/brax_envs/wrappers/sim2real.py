"""Sim-to-real tools for any environment: per-episode physical randomization, observation noise,
action latency, random pushes and privileged critic observations.

Apply the wrappers to the unbatched environment, then batch it with `wrap_for_training`; pass a
`Randomization` as its `randomization_fn` (with `randomize_per_episode=True` for a new draw every
episode). From the inside out the usual order is::

    env = PrivilegedObservationWrapper(env)            # {'state': obs, 'privileged_state': obs + truth}
    env = ObservationNoiseWrapper(env, 0.05)           # noise on 'state' only: the critic sees the truth
    env = ActionDelayWrapper(env, max_delay=2)         # the policy's action reaches the motors late
    env = PushWrapper(env, magnitude=(0.1, 1.0))       # kicks to the free-floating base
    env = wrap_for_training(env, 1000, randomization_fn=LEGGED, randomize_per_episode=True)

Every draw takes its key from the episode's reset key, so a fresh auto-reset (`fresh_reset=True`,
which per-episode randomization implies) starts each episode with a new delay, new noise and a new
push schedule; under the cached reset an environment keeps its first episode's delay for the run.
Steps are the wrapped environment's own steps (each action repeat counts).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any, Literal

import brax_physics
import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from brax_envs.base import Env, ObservationSize, State, Wrapper, observation_size_of

Range = tuple[float, float]
"""A closed interval (low, high) of a uniform draw."""

_NOISE_KEY = "obs_noise_rng"
_DELAY_KEY = "action_delay"
_BUFFER_KEY = "action_buffer"
_PUSH_RNG_KEY = "push_rng"
_PUSH_COUNTDOWN_KEY = "push_countdown"
_PUSH_KEY = "push"
# fold_in data deriving each wrapper's key stream from the reset key (distinct from the env's own use)
_NOISE_SALT, _DELAY_SALT, _PUSH_SALT = 0x0B5, 0xDE1, 0x9C5


def _check_range(owner: str, name: str, value: Range | None, *, positive: bool = True) -> None:
    """Raise a ValueError naming `owner.name` unless `value` is None or a (low, high) with low <= high."""
    if value is None:
        return
    if not (isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, int | float) for v in value)):
        raise ValueError(f"{owner}.{name} must be a (low, high) pair of numbers or None, got {value!r}")
    low, high = value
    if not low <= high:
        raise ValueError(f"{owner}.{name} = {value!r}: low must not exceed high")
    if positive and low < 0:
        raise ValueError(f"{owner}.{name} = {value!r}: a scale must not be negative")


def _scale(key: jax.Array, rng_range: Range, shape: tuple[int, ...]) -> jax.Array:
    """(n, *shape) uniform draws in `rng_range`, one row per key of `key` (n, 2)."""
    low, high = rng_range
    return jax.vmap(lambda k: jax.random.uniform(k, shape, jnp.float32, low, high))(key)


@dataclasses.dataclass(frozen=True)
class Randomization:
    """Ranges of the physical parameters drawn per member (and per episode): a `RandomizationFn`.

    Each field is a uniform range (None leaves that parameter alone); every element (geom, body,
    dof, actuator) draws its own value. Scales multiply the model's own values, so a preset fits any
    robot. `mass` scales each body's mass and inertia together (its density); `com` moves each
    body's centre of mass by up to that many metres per axis; `strength` scales each actuator's
    whole force (gain and bias: motor strength), `kp` and `kd` the position and velocity feedback of
    position-servo actuators (affine bias: `gainprm[0]` with `biasprm[1]`, and `biasprm[2]`).
    Constants MuJoCo derives from masses at compile time (`body_invweight0`, `dof_invweight0`,
    which only set the default constraint regularization) keep the nominal model's values.
    """

    friction: Range | None = (0.6, 1.4)
    """Scale of each geom's sliding friction (`geom_friction[:, 0]`)."""
    mass: Range | None = (0.9, 1.1)
    """Scale of each body's mass and rotational inertia."""
    com: float | None = 0.01
    """Largest offset (m) of each body's centre of mass along each axis of its frame."""
    strength: Range | None = (0.9, 1.1)
    """Scale of each actuator's force (`gainprm[0]` and `biasprm[0:3]`)."""
    kp: Range | None = None
    """Scale of each position servo's stiffness (`gainprm[0]` and `biasprm[1]`)."""
    kd: Range | None = None
    """Scale of each position servo's damping (`biasprm[2]`)."""
    damping: Range | None = (0.8, 1.2)
    """Scale of each dof's joint damping."""
    armature: Range | None = (1.0, 1.05)
    """Scale of each dof's armature (reflected rotor inertia)."""
    frictionloss: Range | None = None
    """Scale of each dof's dry friction loss."""

    def __post_init__(self) -> None:
        """Check every range."""
        for f in dataclasses.fields(self):
            if f.name != "com":
                _check_range("Randomization", f.name, getattr(self, f.name))
        if self.com is not None and not (isinstance(self.com, int | float) and self.com >= 0):
            raise ValueError("Randomization.com must be a non-negative number of metres or None, "
                             f"got {self.com!r}")

    def __call__(self, sys: brax_physics.System, rng: jax.Array) -> tuple[brax_physics.System, Any]:
        """`(batched_sys, in_axes)` with one member per key of `rng` (n, 2): `RandomizationFn`'s contract."""
        rng = jnp.asarray(rng)
        if rng.ndim != 2:
            raise ValueError(f"Randomization: rng must be a batch of keys (n, 2), got shape "
                             f"{tuple(rng.shape)}")
        n = rng.shape[0]
        streams = jax.vmap(lambda k: jax.random.split(k, 9))(rng).transpose(1, 0, 2)

        def tile(x: jax.Array) -> jax.Array:
            return jnp.broadcast_to(x, (n, *x.shape))

        changes: dict[str, jax.Array] = {}
        if self.friction is not None:
            s = _scale(streams[0], self.friction, (sys.ngeom,))
            changes["geom_friction"] = tile(sys.geom_friction).at[..., 0].multiply(s)
        if self.mass is not None:
            s = _scale(streams[1], self.mass, (sys.nbody,))
            changes["body_mass"] = sys.body_mass[None] * s
            changes["body_inertia"] = sys.body_inertia[None] * s[..., None]
        if self.com is not None:
            off = _scale(streams[2], (-self.com, self.com), (sys.nbody, 3))
            changes["body_ipos"] = sys.body_ipos[None] + off.at[:, 0].set(0.0)  # the world body has no mass
        gain = tile(sys.actuator_gainprm)
        bias = tile(sys.actuator_biasprm)
        servo = jnp.asarray([t == mujoco.mjtBias.mjBIAS_AFFINE for t in sys.actuator_biastype], bool)
        if self.strength is not None:
            s = _scale(streams[3], self.strength, (sys.nu,))
            gain = gain.at[..., 0].multiply(s)
            bias = bias.at[..., 0:3].multiply(s[..., None])
        if self.kp is not None:
            s = jnp.where(servo, _scale(streams[4], self.kp, (sys.nu,)), 1.0)
            gain = gain.at[..., 0].multiply(s)
            bias = bias.at[..., 1].multiply(s)
        if self.kd is not None:
            s = jnp.where(servo, _scale(streams[5], self.kd, (sys.nu,)), 1.0)
            bias = bias.at[..., 2].multiply(s)
        if self.strength is not None or self.kp is not None or self.kd is not None:
            changes["actuator_gainprm"] = gain
            changes["actuator_biasprm"] = bias
        for i, (name, value) in enumerate((("dof_damping", self.damping), ("dof_armature", self.armature),
                                           ("dof_frictionloss", self.frictionloss))):
            if value is not None:
                changes[name] = getattr(sys, name)[None] * _scale(streams[6 + i], value, (sys.nv,))
        if not changes:
            raise ValueError("Randomization: every range is None; nothing to draw")
        in_axes = jax.tree.map(lambda _: None, sys).replace(**{k: 0 for k in changes})
        return sys.replace(**changes), in_axes


LEGGED = Randomization(friction=(0.4, 1.25), mass=(0.9, 1.1), com=0.02, strength=(0.9, 1.1), kp=(0.9, 1.1),
                       kd=(0.9, 1.1), damping=(0.8, 1.2), armature=(1.0, 1.05), frictionloss=(0.8, 1.2))
"""Per-episode ranges for legged robots under PD position control (feet friction, payload, motors)."""

MANIPULATION = Randomization(friction=(0.7, 1.3), mass=(0.8, 1.2), com=0.005, strength=(0.9, 1.1),
                             kp=(0.9, 1.1), kd=(0.9, 1.1), damping=(0.9, 1.1), armature=(1.0, 1.05))
"""Per-episode ranges for arms and grippers (object mass and grip friction, servo gains)."""


def _broadcasts(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether an array of `shape` broadcasts to `target`."""
    try:
        return np.broadcast_shapes(shape, target) == target
    except ValueError:
        return False


def _fold(rng: jax.Array, salt: int) -> jax.Array:
    """An independent key derived from an env's reset key."""
    return jax.random.fold_in(rng, salt)


class ObservationNoiseWrapper(Wrapper):
    """Adds noise to the observation (the policy's view of its sensors), new every step.

    `scale` is a number, an array broadcast against the observation (one scale per entry: joint
    angles and gyro rates rarely share one), or, for a dict observation, a mapping of key to either.
    A dict observation's keys absent from a mapping are left clean; a plain number applies to
    `'state'` only (so the critic's `'privileged_state'` stays the truth). `distribution` is
    `'uniform'` (in [-scale, scale]) or `'gaussian'` (standard deviation `scale`).
    """

    def __init__(self, env: Env, scale: float | jax.Array | Mapping[str, float | jax.Array], *,
                 distribution: Literal["uniform", "gaussian"] = "uniform") -> None:
        """Noise `env`'s observation with `scale`."""
        super().__init__(env)
        if distribution not in ("uniform", "gaussian"):
            raise ValueError(f"ObservationNoiseWrapper: distribution must be 'uniform' or 'gaussian', "
                             f"got {distribution!r}")
        size = env.observation_size
        shapes: dict[str | None, tuple[int, ...]]
        scales: dict[str | None, float | jax.Array]
        if isinstance(size, Mapping):
            shapes = {k: tuple(v) for k, v in size.items()}
            if isinstance(scale, Mapping):
                scales = {k: v for k, v in scale.items()}
            elif "state" in shapes:
                scales = {"state": scale}
            else:
                raise ValueError(f"ObservationNoiseWrapper: the observation's keys are {sorted(size)}; "
                                 "give a mapping of key to scale (a plain scale applies to 'state')")
        else:
            if isinstance(scale, Mapping):
                raise ValueError("ObservationNoiseWrapper: the observation is an array, not a dict; "
                                 "give one scale (a number or an array)")
            shapes = {None: (size,) if isinstance(size, int) else tuple(size)}
            scales = {None: scale}
        self._scales: dict[str | None, jax.Array] = {}
        for key, value in scales.items():
            if key not in shapes:
                known = sorted(str(k) for k in shapes)
                raise ValueError(f"ObservationNoiseWrapper: no observation key {key!r} (keys: {known})")
            arr = jnp.asarray(value, jnp.float32)
            what = "the scale" if key is None else f"the scale of {key!r}"
            if not _broadcasts(arr.shape, shapes[key]):
                raise ValueError(f"ObservationNoiseWrapper: {what} has shape {arr.shape}, which does not "
                                 f"broadcast to the observation's {shapes[key]}")
            if bool(jnp.any(arr < 0)):
                raise ValueError(f"ObservationNoiseWrapper: {what} is negative")
            self._scales[key] = arr
        self.distribution = distribution

    def _noisy(self, obs: Any, key: jax.Array) -> Any:
        """`obs` with fresh noise on the scaled entries."""
        def noise(k: jax.Array, x: jax.Array, s: jax.Array) -> jax.Array:
            if self.distribution == "uniform":
                u = jax.random.uniform(k, x.shape, x.dtype, -1.0, 1.0)
            else:
                u = jax.random.normal(k, x.shape, x.dtype)
            return x + (s * u).astype(x.dtype)

        keys = jax.random.split(key, len(self._scales))
        if None in self._scales:
            return noise(keys[0], obs, self._scales[None])
        out = dict(obs)
        for k, (name, s) in zip(keys, self._scales.items(), strict=True):
            out[name] = noise(k, obs[name], s)
        return out

    def reset(self, rng: jax.Array) -> State:
        """The wrapped reset, observed with noise."""
        state = self.env.reset(rng)
        key, sub = jax.random.split(_fold(rng, _NOISE_SALT))
        return state.replace(obs=self._noisy(state.obs, sub), info={**state.info, _NOISE_KEY: key})

    def step(self, state: State, action: jax.Array) -> State:
        """The wrapped step, observed with new noise."""
        key, sub = jax.random.split(state.info[_NOISE_KEY])
        nstate = self.env.step(state, action)
        return nstate.replace(obs=self._noisy(nstate.obs, sub), info={**nstate.info, _NOISE_KEY: key})


class ActionDelayWrapper(Wrapper):
    """Delays actions by a whole number of steps drawn per episode in [`min_delay`, `max_delay`].

    The action the policy gives at step t reaches the wrapped environment at step t + d; until then
    (the first d steps of an episode) the wrapped environment receives zeros, the neutral action of
    a normalized controller. The last `max_delay` actions travel in `info['action_buffer']` and the
    episode's delay in `info['action_delay']`.
    """

    def __init__(self, env: Env, max_delay: int, min_delay: int = 0) -> None:
        """Delay `env`'s actions by `min_delay` to `max_delay` steps (drawn per episode)."""
        super().__init__(env)
        for name, val in (("max_delay", max_delay), ("min_delay", min_delay)):
            if isinstance(val, bool) or not isinstance(val, int) or val < 0:
                raise ValueError(f"ActionDelayWrapper: {name} must be a non-negative int, got {val!r}")
        if min_delay > max_delay:
            raise ValueError(f"ActionDelayWrapper: min_delay {min_delay} exceeds max_delay {max_delay}")
        self.max_delay = max_delay
        self.min_delay = min_delay

    def reset(self, rng: jax.Array) -> State:
        """The wrapped reset, with this episode's delay and an empty action history."""
        state = self.env.reset(rng)
        delay = jax.random.randint(_fold(rng, _DELAY_SALT), (), self.min_delay, self.max_delay + 1)
        buffer = jnp.zeros((self.max_delay, self.env.action_size), jnp.float32)
        return state.replace(info={**state.info, _DELAY_KEY: delay, _BUFFER_KEY: buffer})

    def step(self, state: State, action: jax.Array) -> State:
        """Push `action` into the history and step the wrapped env with the one issued `delay` steps ago."""
        history = jnp.concatenate([action[None].astype(jnp.float32), state.info[_BUFFER_KEY]])
        applied = history[state.info[_DELAY_KEY]].astype(action.dtype)
        nstate = self.env.step(state, applied)
        return nstate.replace(info={**nstate.info, _BUFFER_KEY: history[: self.max_delay]})


def _free_dof(sys: brax_physics.System, who: str) -> int:
    """The first dof of the model's first free joint (its world-frame linear velocity)."""
    for jtype, dofadr in zip(sys.jnt_type, sys.jnt_dofadr, strict=True):
        if jtype == mujoco.mjtJoint.mjJNT_FREE:
            return int(dofadr)
    raise ValueError(f"PushWrapper: {who}'s model has no free joint to push (pushes kick a floating base)")


class PushWrapper(Wrapper):
    """Kicks the floating base: at intervals drawn in `interval` seconds, adds a horizontal velocity.

    Each push adds to the first free joint's linear velocity a vector of norm drawn in `magnitude`
    (m/s) in a uniformly drawn horizontal direction, before the step. `info['push']` holds the last
    step's (2,) kick (zeros on steps without one), for metrics and tests.
    """

    def __init__(self, env: Env, magnitude: Range = (0.1, 1.0), interval: Range = (5.0, 10.0)) -> None:
        """Push `env`'s base by `magnitude` m/s every `interval` seconds (both drawn per push)."""
        super().__init__(env)
        _check_range("PushWrapper", "magnitude", magnitude)
        _check_range("PushWrapper", "interval", interval)
        dt = float(env.dt)
        if interval[0] < dt:
            raise ValueError(f"PushWrapper.interval {interval!r} is shorter than one step ({dt} s)")
        self._steps = (max(1, round(interval[0] / dt)), max(1, round(interval[1] / dt)))
        self._dof = _free_dof(env.sys, type(env.unwrapped).__name__)
        self.magnitude = magnitude
        self.interval = interval

    def _countdown(self, key: jax.Array) -> jax.Array:
        """Steps until the next push."""
        return jax.random.randint(key, (), self._steps[0], self._steps[1] + 1)

    def reset(self, rng: jax.Array) -> State:
        """The wrapped reset, with the first push scheduled."""
        state = self.env.reset(rng)
        key, sub = jax.random.split(_fold(rng, _PUSH_SALT))
        info = {**state.info, _PUSH_RNG_KEY: key, _PUSH_COUNTDOWN_KEY: self._countdown(sub),
                _PUSH_KEY: jnp.zeros(2, jnp.float32)}
        return state.replace(info=info)

    def step(self, state: State, action: jax.Array) -> State:
        """Push when the countdown runs out, then step."""
        key, k_angle, k_norm, k_next = jax.random.split(state.info[_PUSH_RNG_KEY], 4)
        countdown = state.info[_PUSH_COUNTDOWN_KEY] - 1
        now = countdown <= 0
        angle = jax.random.uniform(k_angle, (), jnp.float32, 0.0, 2.0 * math.pi)
        norm = jax.random.uniform(k_norm, (), jnp.float32, *self.magnitude)
        kick = jnp.where(now, norm * jnp.stack([jnp.cos(angle), jnp.sin(angle)]), 0.0)
        ps = state.pipeline_state
        qd = ps.qd.at[self._dof:self._dof + 2].add(kick.astype(ps.qd.dtype))
        nstate = self.env.step(state.replace(pipeline_state=ps.replace(qd=qd)), action)
        info = {**nstate.info, _PUSH_RNG_KEY: key, _PUSH_KEY: kick,
                _PUSH_COUNTDOWN_KEY: jnp.where(now, self._countdown(k_next), countdown)}
        return nstate.replace(info=info)


PrivilegedFn = Callable[[brax_physics.System, State], jax.Array]
"""`fn(sys, state) -> (k,)`: what the critic sees beyond the policy's observation."""


class PrivilegedObservationWrapper(Wrapper):
    """Gives the critic the truth: observation `{'state': obs, 'privileged_state': [obs, extras]}`.

    `extras(sys, state)` (default: the physics state's `q` and `qd`) is computed from the
    unnoised state under the member's own `System`, so a critic may also read the episode's drawn
    parameters (e.g. `sys.geom_friction[:, 0]`); brax-train's PPO reads the two keys for policy and
    value (`policy_obs_key`, `value_obs_key`). The wrapped observation must be an array.
    """

    def __init__(self, env: Env, extras: PrivilegedFn | None = None) -> None:
        """Split `env`'s observation into a policy and a privileged critic view."""
        super().__init__(env)
        if isinstance(env.observation_size, dict):
            raise ValueError("PrivilegedObservationWrapper: the observation is already a dict (keys "
                             f"{sorted(env.observation_size)}); give it 'privileged_state' yourself")
        self._extras: PrivilegedFn = extras if extras is not None else _q_qd

    def _views(self, state: State) -> dict[str, jax.Array]:
        """The two views of `state`."""
        obs = state.obs
        extra = jnp.asarray(self._extras(self.env.sys, state), obs.dtype).reshape(-1)
        return {"state": obs, "privileged_state": jnp.concatenate([obs.reshape(-1), extra])}

    def reset(self, rng: jax.Array) -> State:
        """The wrapped reset with both views."""
        state = self.env.reset(rng)
        return state.replace(obs=self._views(state))

    def step(self, state: State, action: jax.Array) -> State:
        """The wrapped step with both views (the wrapped env gets its own observation back)."""
        nstate = self.env.step(state.replace(obs=state.obs["state"]), action)
        return nstate.replace(obs=self._views(nstate))

    @property
    def observation_size(self) -> ObservationSize:
        """`{'state': ..., 'privileged_state': ...}` shapes."""
        key = jax.ShapeDtypeStruct((2,), jnp.uint32)  # type: ignore[no-untyped-call]
        return observation_size_of(jax.eval_shape(self.reset, key).obs)


def _q_qd(sys: brax_physics.System, state: State) -> jax.Array:
    """Generalized positions and velocities of the physics state."""
    del sys
    ps = state.pipeline_state
    return jnp.concatenate([ps.q, ps.qd])


__all__ = [
    "LEGGED",
    "MANIPULATION",
    "ActionDelayWrapper",
    "ObservationNoiseWrapper",
    "PrivilegedFn",
    "PrivilegedObservationWrapper",
    "PushWrapper",
    "Randomization",
    "Range",
]
