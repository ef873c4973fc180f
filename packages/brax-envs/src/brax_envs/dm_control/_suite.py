"""The base of dm_control's suite tasks: models from the installed package, control steps, episodes."""

from __future__ import annotations

import abc
import collections
import contextlib
import importlib
import math
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

import brax_math
import brax_physics
import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from brax_envs.base import PipelineEnv, State

EXTRA = "brax-envs[dm-control]"
"""The extra that installs dm_control, whose suite's models (and task code, as a test oracle) we load."""

SOLVERS = ("default", "fast")
"""`solver` choices of every task: dm_control's own settings, or the domain's fast budget."""


@contextlib.contextmanager
def _without_dm_control_renderer() -> Iterator[None]:
    """dm_control picks an OpenGL backend when first imported, which binds PyOpenGL's platform for the
    process; we need its models only, so it picks none and brax_io stays free to choose."""
    if "MUJOCO_GL" in os.environ or "dm_control" in sys.modules:
        yield
        return
    os.environ["MUJOCO_GL"] = "disable"
    try:
        yield
    finally:
        os.environ.pop("MUJOCO_GL", None)


def suite_module(domain: str) -> Any:
    """dm_control's module of suite domain `domain` (for its model; `""`: the suite itself), or an error
    naming the extra."""
    try:
        with _without_dm_control_renderer():
            return importlib.import_module(f"dm_control.suite.{domain}" if domain else "dm_control.suite")
    except ModuleNotFoundError as e:
        if e.name is not None and e.name.split(".")[0] in ("dm_control", "lxml"):
            raise ModuleNotFoundError(
                f"brax_envs.dm_control needs dm_control's suite models: pip install '{EXTRA}'") from e
        raise


def suite_model(domain: str, *args: Any) -> mujoco.MjModel:
    """The MjModel of domain `domain` as dm_control builds it (`get_model_and_assets(*args)`)."""
    xml, assets = suite_module(domain).get_model_and_assets(*args)
    if isinstance(xml, bytes):
        xml = xml.decode()
    return mujoco.MjModel.from_xml_string(xml, assets)


def _ids(names: Sequence[str], all_names: Sequence[str], what: str) -> np.ndarray:
    missing = [n for n in names if n not in all_names]
    if missing:
        raise KeyError(f"no {what} named {missing}; {what}s: {[n for n in all_names if n]}")
    return np.asarray([list(all_names).index(n) for n in names], np.int32)


class SuiteEnv(PipelineEnv):
    """A task of dm_control's suite on brax-physics, with dm_control's semantics.

    The model is dm_control's (from the installed package); one `step` is one control step of
    `n_frames` physics steps (dm_control's `control_timestep` / the model's timestep); the
    observation is a dict of named arrays as the task's `get_observation` returns (flatten it with
    `brax_envs.wrappers.training.FlattenObservationWrapper`), the reward is its `get_reward` on the
    state after the step; `done` is its termination (most tasks never terminate: episodes end by
    the time limit, `episode_length` control steps, under `EpisodeWrapper`). Actions are the
    actuators' controls, as dm_control's (MuJoCo clamps them to `ctrlrange`).

    Subclasses implement `initial_state` (dm_control's `initialize_episode`), `observation` and
    `reward`. A task's per-episode state (targets, goals) lives in `state.info["task"]`, a dict of
    arrays that `initial_state` draws and, for the oracle tests, `task_info_from_physics` reads from
    a dm_control physics.
    """

    domain: ClassVar[str] = ""
    """dm_control's domain name."""
    control_timestep: ClassVar[float | None] = None
    """dm_control's control timestep in seconds (None: one physics step per control step)."""
    time_limit: ClassVar[float] = 1e3
    """dm_control's default time limit in seconds (inf: no limit)."""
    fast_solver: ClassVar[Mapping[str, int]] = {"iterations": 4, "ls_iterations": 8}
    """The `solver="fast"` option's MjOption fields for this domain."""

    def __init__(self, task: str, model: mujoco.MjModel, *, solver: str = "default",
                 debug: bool = False) -> None:
        """Simulate `model` (dm_control's, for task `task`) with its solver settings or the fast ones."""
        if solver not in SOLVERS:
            raise ValueError(f"{type(self).__name__}: solver {solver!r} not in {SOLVERS}")
        if solver == "fast":
            for k, v in self.fast_solver.items():
                setattr(model.opt, k, v)
        dt = float(model.opt.timestep)
        n = 1 if self.control_timestep is None else _n_sub_steps(self.control_timestep, dt)
        super().__init__(brax_physics.from_mjmodel(model), n_frames=n, debug=debug)
        self.task = task
        self.solver = solver
        self.model = model
        """The MjModel the System was loaded from (host-side; names and static data)."""

    @property
    def episode_length(self) -> int | None:
        """Control steps per episode (dm_control's time limit / control timestep; None: unlimited)."""
        if math.isinf(self.time_limit):
            return None
        return math.ceil(self.time_limit / (float(self.model.opt.timestep) * self.n_frames) - 1e-9)

    # ---- the task ----

    @abc.abstractmethod
    def initial_state(self, rng: jax.Array) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        """(q (nq,), qd (nv,), info) of a new episode: dm_control's `initialize_episode`."""

    @abc.abstractmethod
    def observation(self, ps: brax_physics.State, info: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        """The task's observation at physics state `ps`: dm_control's `get_observation`."""

    @abc.abstractmethod
    def reward(self, ps: brax_physics.State, info: Mapping[str, jax.Array], action: jax.Array) -> jax.Array:
        """() reward at `ps` after control `action`: dm_control's `get_reward`."""

    def termination(self, ps: brax_physics.State, info: Mapping[str, jax.Array]) -> jax.Array:
        """() 1.0 where the episode ends at `ps` (dm_control's `get_termination`; none by default)."""
        del ps, info
        return jnp.zeros((), jnp.float32)

    def task_info_from_physics(self, physics: Any) -> dict[str, jax.Array]:
        """The task's per-episode `info` read from a dm_control `physics` (for the oracle tests)."""
        del physics
        return {}

    def pipeline_state_init(self, q: jax.Array, qd: jax.Array,
                            info: Mapping[str, jax.Array]) -> brax_physics.State:
        """The physics state at `q`, `qd` for an episode with `info` (override to place mocap bodies)."""
        del info
        return self.pipeline_init(q, qd)

    # ---- the environment ----

    def reset(self, rng: jax.Array) -> State:
        """A new episode from dm_control's initial-state distribution."""
        q, qd, info = self.initial_state(rng)
        ps = self.pipeline_state_init(jnp.asarray(q, jnp.float32), jnp.asarray(qd, jnp.float32), info)
        zero = jnp.zeros((), jnp.float32)
        return State(pipeline_state=ps, obs=self._observe(ps, info), reward=zero, done=zero,
                     metrics={}, info={"truncation": zero, "task": dict(info)})

    def step(self, state: State, action: jax.Array) -> State:
        """One control step: `n_frames` physics steps under `action`."""
        action = jnp.asarray(action, jnp.float32)
        info = state.info["task"]
        ps = self.pipeline_step(state.pipeline_state, action)
        reward = jnp.asarray(self.reward(ps, info, action), jnp.float32)
        done = jnp.asarray(self.termination(ps, info), jnp.float32)
        return state.replace(pipeline_state=ps, obs=self._observe(ps, info), reward=reward, done=done)

    def _observe(self, ps: brax_physics.State, info: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        # an OrderedDict keeps dm_control's key order through jit (a plain dict's keys come back sorted)
        return collections.OrderedDict(self.observation(ps, info))

    # ---- helpers for tasks ----

    def body_ids(self, *names: str) -> np.ndarray:
        """Indices of bodies by name."""
        return _ids(names, self.sys.body_names, "body")

    def geom_ids(self, *names: str) -> np.ndarray:
        """Indices of geoms by name."""
        return _ids(names, self.sys.geom_names, "geom")

    def site_ids(self, *names: str) -> np.ndarray:
        """Indices of sites by name."""
        return _ids(names, self.sys.site_names, "site")

    def joint_qpos(self, name: str) -> slice:
        """The qpos slice of joint `name`."""
        j = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_JOINT, name)
        if j < 0:
            raise KeyError(f"no joint named {name!r} in dm_control's {self.domain} model")
        adr = int(self.model.jnt_qposadr[j])
        size = {0: 7, 1: 4, 2: 1, 3: 1}[int(self.model.jnt_type[j])]
        return slice(adr, adr + size)

    def joint_qvel(self, name: str) -> slice:
        """The qvel slice of joint `name`."""
        j = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_JOINT, name)
        if j < 0:
            raise KeyError(f"no joint named {name!r} in dm_control's {self.domain} model")
        adr = int(self.model.jnt_dofadr[j])
        size = {0: 6, 1: 3, 2: 1, 3: 1}[int(self.model.jnt_type[j])]
        return slice(adr, adr + size)

    def sites(self, ps: brax_physics.State, *names: str) -> tuple[jax.Array, jax.Array]:
        """(n, 3) world positions and (n, 3, 3) orientations of sites by name (site_xpos, site_xmat)."""
        return brax_physics.sites(self.sys, ps, names)

    def body_xmat(self, ps: brax_physics.State, *names: str) -> jax.Array:
        """(n, 3, 3) world orientations of bodies by name (MuJoCo xmat)."""
        return brax_math.quat_to_mat(ps.x.rot[self.body_ids(*names)])

    def subtree_linvel(self, ps: brax_physics.State, body: str) -> jax.Array:
        """(3,) velocity of the centre of mass of `body`'s subtree at `ps` (MuJoCo's subtreelinvel
        sensor, from the state's body velocities: dm_control reads it at the state after the step)."""
        mask = jnp.asarray(self._subtree_mask(body), self.sys.body_mass.dtype)
        com_vel = ps.xd.vel + brax_math.cross(ps.xd.ang, ps.xipos - ps.x.pos)
        m = self.sys.body_mass * mask
        return m @ com_vel / jnp.sum(m)

    def _subtree_mask(self, body: str) -> np.ndarray:
        return subtree_mask(self.model, int(self.body_ids(body)[0]))

    def sensor(self, ps: brax_physics.State, name: str) -> jax.Array:
        """The values of the sensor called `name` (MuJoCo sensordata; acceleration-stage sensors are
        those of the last physics step's start, as dm_control's after its step)."""
        return brax_physics.sensor(self.sys, ps, name)


PENETRATION_SLACK = 1e-6
"""Contacts shallower than this (m) are float32 round-off of exact touching (where dm_control's float64
test goes either way), not penetration, for the contact-free tests of resets."""


def penetrating(contact: brax_physics.Contact) -> jax.Array:
    """() bool: whether any contact penetrates deeper than `PENETRATION_SLACK` (MuJoCo's ncon > 0)."""
    return jnp.any(contact.active & (contact.dist < -PENETRATION_SLACK))


def subtree_mask(model: mujoco.MjModel, root: int) -> np.ndarray:
    """(nbody,) bool: the bodies of `root`'s subtree (MuJoCo's body_parentid tree)."""
    inside = np.zeros(model.nbody, bool)
    inside[root] = True
    for b in range(root + 1, model.nbody):  # parents precede children in MuJoCo's body order
        inside[b] = inside[int(model.body_parentid[b])]
    return inside


def _n_sub_steps(control_timestep: float, physics_timestep: float) -> int:
    """dm_control's `compute_n_steps`: the control timestep must be a multiple of the physics one."""
    n = control_timestep / physics_timestep
    rounded = round(n)
    if abs(n - rounded) > 1e-6:
        raise ValueError(f"control timestep {control_timestep} is not a multiple of the physics timestep "
                         f"{physics_timestep}")
    return rounded


def randomize_limited_and_rotational_joints(model: mujoco.MjModel, rng: jax.Array, q: jax.Array) -> jax.Array:
    """`q` with every joint drawn as dm_control's `randomizers.randomize_limited_and_rotational_joints`:
    limited hinges and slides uniform in their range, unlimited hinges uniform in [-pi, pi], unlimited
    ball joints uniform on the unit quaternions, free joints' orientation from a normalized uniform
    [0, 1)^4 (dm_control's choice), limited ball joints uniform within their angle."""
    keys = jax.random.split(rng, max(model.njnt, 1))
    for j in range(model.njnt):
        t, adr = int(model.jnt_type[j]), int(model.jnt_qposadr[j])
        limited = bool(model.jnt_limited[j])
        lo, hi = (float(v) for v in model.jnt_range[j])
        k = keys[j]
        if t in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE):
            if limited:
                q = q.at[adr].set(jax.random.uniform(k, (), jnp.float32, lo, hi))
            elif t == mujoco.mjtJoint.mjJNT_HINGE:
                q = q.at[adr].set(jax.random.uniform(k, (), jnp.float32, -jnp.pi, jnp.pi))
        elif t == mujoco.mjtJoint.mjJNT_BALL:
            if limited:
                ka, kb = jax.random.split(k)
                axis = jax.random.normal(ka, (3,), jnp.float32)
                axis = axis / jnp.linalg.norm(axis)
                angle = jax.random.uniform(kb, (), jnp.float32, 0.0, hi)
                quat = jnp.concatenate([jnp.cos(angle / 2)[None], jnp.sin(angle / 2) * axis])
            else:
                quat = jax.random.normal(k, (4,), jnp.float32)
                quat = quat / jnp.linalg.norm(quat)
            q = q.at[adr:adr + 4].set(quat)
        elif t == mujoco.mjtJoint.mjJNT_FREE:
            quat = jax.random.uniform(k, (4,), jnp.float32)
            q = q.at[adr + 3:adr + 7].set(quat / jnp.linalg.norm(quat))
    return q
