"""Joystick locomotion for any legged MJCF: track a commanded forward, lateral and yaw velocity.

A `LeggedRobot` names what the task reads beyond the model (the floating torso, the feet, the
standing keyframe); the model brings its own position actuators (PD servos) and floor. The policy
acts on joint targets around the keyframe's pose, `ctrl = default + action_scale * action`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from collections.abc import Mapping
from typing import Any

import brax_math
import brax_physics
import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from brax_envs._model import index_of, load_model, weights_of
from brax_envs.base import PipelineEnv, State
from brax_envs.locomotion.terrain import Terrain, heights, next_level, surface

Range = tuple[float, float]

_TERRAIN_SALT = 0x7E4
"""`fold_in` data deriving a reset's terrain key from its reset key (the flat task's draws are unchanged)."""

_MOVING = 0.05
"""A command of larger norm asks the robot to move: air time pays, the curriculum may promote."""

_SPREAD = 0.5
"""A reset moves the keyframe's base up to this far (m) along x and along y."""


@dataclasses.dataclass(frozen=True)
class LeggedRobot:
    """What the joystick task needs of a legged MJCF besides the model itself."""

    torso: str
    """The floating base: the body whose free joint is the model's first joint."""
    feet: tuple[str, ...]
    """Foot geoms (their contacts with anything are foot contacts; their positions give foot slip)."""
    keyframe: str = "home"
    """The standing keyframe: the reset pose and the default joint targets (its `ctrl`)."""
    action_scale: float = 0.3
    """Joint-target offset (rad) of a unit action."""
    min_height: float = 0.15
    """The episode ends when the torso's height (m) falls below this."""
    min_upright: float = 0.3
    """The episode ends when the torso's up axis tilts below this z component."""

    def __post_init__(self) -> None:
        """Check the static fields."""
        if not self.feet:
            raise ValueError("LeggedRobot.feet: name at least one foot geom")
        if not self.action_scale > 0:
            raise ValueError(f"LeggedRobot.action_scale must be positive, got {self.action_scale!r}")


@dataclasses.dataclass(frozen=True)
class RewardWeights:
    """Each reward term's weight; the reward is `dt` times the weighted sum (each term is a metric)."""

    tracking_lin_vel: float = 1.0
    """exp(-|command_xy - v_xy|^2 / sigma), the torso's horizontal velocity in its heading frame."""
    tracking_ang_vel: float = 0.5
    """exp(-(command_yaw - w_z)^2 / sigma), the torso's yaw rate."""
    lin_vel_z: float = -2.0
    """Vertical velocity of the torso, squared."""
    ang_vel_xy: float = -0.05
    """Roll and pitch rates, squared."""
    orientation: float = -5.0
    """Tilt: the horizontal part of gravity in the torso frame, squared."""
    torques: float = -2e-4
    """Actuator forces, squared."""
    action_rate: float = -0.01
    """Change of action between steps, squared."""
    feet_air_time: float = 0.2
    """Swing time past `air_time_target` at each touchdown (only under a moving command)."""
    foot_slip: float = -0.1
    """Horizontal speed of feet in contact, squared."""
    pose: float = -0.1
    """Joint angles' distance from the keyframe pose, squared."""
    termination: float = -1.0
    """1 on the step the robot falls (before any time limit)."""


_TERMS = tuple(f.name for f in dataclasses.fields(RewardWeights))


def _check_terrain(m: mujoco.MjModel, terrain: Terrain) -> float:
    """`terrain.max_height` over the model's height-field elevation scale, after checking they fit."""
    if m.nhfield != 1:
        raise ValueError(f"Joystick.terrain: the model needs exactly one height field (the floor), it has "
                         f"{m.nhfield}")
    if int(m.hfield_nrow[0]) != terrain.size or int(m.hfield_ncol[0]) != terrain.size:
        raise ValueError(f"Terrain.size = {terrain.size} but the model's height field is "
                         f"{int(m.hfield_nrow[0])} x {int(m.hfield_ncol[0])} samples")
    sx, sy, sz, _ = (float(v) for v in m.hfield_size[0])
    if not (math.isclose(sx, terrain.half_extent, rel_tol=1e-6)
            and math.isclose(sy, terrain.half_extent, rel_tol=1e-6)):
        raise ValueError(f"Terrain.half_extent = {terrain.half_extent} but the model's height field spans "
                         f"+-{sx} x +-{sy} m")
    # MuJoCo's bounding box stops at the elevation scale: heights above it would not collide
    if terrain.max_height > sz * (1 + 1e-6):
        raise ValueError(f"Terrain.max_height = {terrain.max_height} exceeds the model's height-field "
                         f"elevation scale {sz} m")
    geoms = np.flatnonzero((m.geom_type == mujoco.mjtGeom.mjGEOM_HFIELD) & (m.geom_dataid == 0))
    for g in geoms:
        if (m.geom_bodyid[g] != 0 or np.any(m.geom_pos[g] != 0.0)
                or np.any(m.geom_quat[g] != np.asarray([1.0, 0.0, 0.0, 0.0]))):
            raise ValueError(f"Joystick.terrain: the height-field geom {m.geom(g).name!r} must sit at the "
                             "world origin, unrotated")
    return terrain.max_height / sz


def _check_spawn(m: mujoco.MjModel, key: int, feet: np.ndarray, terrain: Terrain) -> None:
    """Check that the spawn patch holds every reset pose's feet and the critic's scan, at any heading."""
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, key)
    mujoco.mj_kinematics(m, d)
    base = d.qpos[0:2]
    reach = max(float(np.linalg.norm(d.geom_xpos[f, 0:2] - base) + m.geom_rbound[f]) for f in feet)
    scan = (terrain.scan_points - 1) / 2.0 * terrain.scan_spacing * math.sqrt(2.0)
    # a cell straddling the patch's edge is sloped, so the flat ground ends one cell inside it
    need = float(np.max(np.abs(base))) + _SPREAD + max(reach, scan) + terrain.spacing
    if terrain.spawn_radius < need:
        raise ValueError(f"Terrain.spawn_radius = {terrain.spawn_radius} is too small for this robot's "
                         f"resets: they need flat ground out to {need:.3f} m")


def legged_parts(m: mujoco.MjModel, robot: LeggedRobot, task: str) -> tuple[int, np.ndarray, int, np.ndarray]:
    """The torso body, (nfeet,) foot geoms, keyframe and (nu,) actuated joints of a legged model.

    ValueErrors name the `LeggedRobot` field or the model's fault (`task` names the caller): a
    missing name, a torso without the model's first joint as a free joint, actuators that are not
    position servos on hinge or slide joints.
    """
    part = functools.partial(index_of, "LeggedRobot")  # errors name LeggedRobot's fields
    torso = part("body", tuple(m.body(i).name for i in range(m.nbody)), robot.torso, "torso")
    geoms = tuple(m.geom(i).name for i in range(m.ngeom))
    feet = np.asarray([part("geom", geoms, f, "feet") for f in robot.feet], np.int32)
    key = part("keyframe", tuple(m.key(i).name for i in range(m.nkey)), robot.keyframe, "keyframe")
    if m.njnt == 0 or m.jnt_type[0] != mujoco.mjtJoint.mjJNT_FREE or m.jnt_bodyid[0] != torso:
        raise ValueError(f"LeggedRobot.torso: {robot.torso!r} must carry the model's first joint, a free "
                         "joint (the floating base)")
    if m.nu == 0:
        raise ValueError(f"{task}: the model has no actuators")
    joints = m.actuator_trnid[:, 0]
    if np.any(m.actuator_trntype != mujoco.mjtTrn.mjTRN_JOINT) or np.any(joints == 0):
        raise ValueError(f"{task}: every actuator must drive a hinge or slide joint (position servos)")
    return torso, feet, key, joints


def legged_readings(ps: brax_physics.State, qadr: np.ndarray, dadr: np.ndarray,
                    feet: np.ndarray) -> dict[str, jax.Array]:
    """A legged robot's state as its tasks read it: the torso's (3,) linear and angular velocity in
    its frame, (3,) gravity direction in its frame, up-axis z and height; the actuated joints' (nu,)
    angles and velocities (at `qadr`, `dadr`); (nfeet,) whether each foot geom in `feet` touches."""
    rot = brax_math.quat_to_mat(ps.q[3:7])  # columns: the torso's axes in the world
    contact = ps.contact
    f = jnp.asarray(feet)
    on_foot = (contact.geom1[None, :] == f[:, None]) | (contact.geom2[None, :] == f[:, None])
    return {
        "lin_vel": rot.T @ ps.qd[0:3],  # the free joint's linear velocity is in the world frame
        "ang_vel": ps.qd[3:6],  # local frame
        "gravity": rot.T @ jnp.asarray([0.0, 0.0, -1.0]),
        "up_z": rot[2, 2],
        "height": ps.q[2],
        "joint_pos": ps.q[jnp.asarray(qadr)],
        "joint_vel": ps.qd[jnp.asarray(dadr)],
        "foot_contact": jnp.any(on_foot & contact.active[None, :], axis=1),
    }


def reward_terms(r: Mapping[str, jax.Array], info: Mapping[str, Any], action: jax.Array,
                 actuator_force: jax.Array, *, dt: float | jax.Array, default: jax.Array | np.ndarray,
                 sigma: float, air_time_target: float) -> tuple[dict[str, jax.Array], jax.Array, jax.Array]:
    """Every term but `termination` from a step's readings `r` and the previous step's `info`.

    Returns the terms, the feet's new air times before touchdown resets them, and the (nfeet,)
    contacts with one step of hysteresis (a foot chattering on the ground counts as down).
    """
    contact = r["foot_contact"] | info["last_contact"]
    air_time = info["feet_air_time"] + dt
    touchdown = (info["feet_air_time"] > 0.0) & contact
    cmd = info["command"]
    moving = jnp.linalg.norm(cmd) > _MOVING
    foot_vel = (r["foot_pos"] - info["foot_pos"]) / dt
    terms = {
        "tracking_lin_vel": jnp.exp(-jnp.sum((cmd[:2] - r["lin_vel"][:2]) ** 2) / sigma),
        "tracking_ang_vel": jnp.exp(-((cmd[2] - r["ang_vel"][2]) ** 2) / sigma),
        "lin_vel_z": r["lin_vel"][2] ** 2,
        "ang_vel_xy": jnp.sum(r["ang_vel"][:2] ** 2),
        "orientation": jnp.sum(r["gravity"][:2] ** 2),
        "torques": jnp.sum(actuator_force ** 2),
        "action_rate": jnp.sum((action - info["last_action"]) ** 2),
        "feet_air_time": jnp.where(moving, jnp.sum(jnp.where(touchdown, air_time - air_time_target, 0.0)),
                                   0.0),
        "foot_slip": jnp.sum(jnp.where(r["foot_contact"], jnp.sum(foot_vel[:, :2] ** 2, axis=1), 0.0)),
        "pose": jnp.sum((r["joint_pos"] - jnp.asarray(default)) ** 2),
    }
    return terms, air_time, contact


class Joystick(PipelineEnv):
    """Follow a velocity command (forward, lateral, yaw rate) with a legged robot.

    - Observation `{'state': ..., 'privileged_state': ...}`: the policy's `state` is the torso's
      angular velocity and gravity direction in its frame, the command, joint angles less the
      keyframe's, joint velocities and the last action; the critic's `privileged_state` adds the
      torso's linear velocity in its frame, its height, foot contacts and feet air times.
    - Action (nu,) in [-1, 1]: joint targets `default + action_scale * action`, clipped to the
      actuators' ctrlrange.
    - Reward: `dt * sum(weight * term)` over `RewardWeights` (clipped at 0 with `only_positive`);
      every term is in `metrics`.
    - Ends when the torso's up axis tilts below `min_upright` or its height falls below
      `min_height`; commands are drawn from `command_range` at reset and every `command_interval`
      seconds (zero with probability `zero_command_prob`).

    With a `terrain` (the model's floor must then be its one height field, sized as the `Terrain`
    says, at the world origin, unrotated), every reset draws a new field, `info['terrain']`
    (size * size,) normalized elevations (`terrain.heights` with a key folded from the reset key),
    spawned on its flat patch; the field stands `level * max_height` high:

    - `info['terrain_level']` () is the curriculum level in [0, 1]: `terrain.next_level` lowers it on
      a fall and raises it after a well-tracked command interval. It is listed in `persistent_info`,
      so `AutoResetWrapper` carries it into the next episode; a plain `reset` (evaluation, the first
      episode of training) starts at `reset_level`.
    - The episode runs at `info['terrain_episode_level']`, the level read on its first step (the step
      from a physics state at time 0), so a level that changes mid-episode never moves the ground
      under the robot; `metrics['terrain_level']` reports it.
    - `height` (termination, critic) is measured from the ground under the torso; the critic also sees
      the torso's height over a `scan_points` x `scan_points` grid turning with its heading, and each
      foot's height over the ground under it.
    - Coming within `border` of the field's edge ends the episode as a truncation
      (`info['truncation']` 1, `done` 1, no termination penalty).

    Under `AutoResetWrapper(fresh_reset=True)` every episode draws a new field; under cached restarts
    (`fresh_reset=False`) each environment keeps its first field for the whole run while its level
    still moves. The reset state does not depend on the level (the robot and the critic's scan stand
    on the flat patch), so restarting at a carried-over level needs nothing more.
    """

    # actions are normalized offsets in [-1, 1] (not the servo targets): adapters give [-1, 1] spaces
    actions_scaled_to_ctrlrange = True

    def __init__(self, model: str | os.PathLike[str] | mujoco.MjModel, robot: LeggedRobot, *,
                 n_frames: int = 5, weights: RewardWeights | Mapping[str, float] | None = None,
                 command_range: tuple[Range, Range, Range] = ((-1.0, 1.0), (-0.5, 0.5), (-1.0, 1.0)),
                 command_interval: float = 5.0, zero_command_prob: float = 0.1, tracking_sigma: float = 0.25,
                 air_time_target: float = 0.1, only_positive: bool = True, reset_noise: float = 0.05,
                 backend: str = "generalized", terrain: Terrain | None = None,
                 reset_level: float = 0.0) -> None:
        """Build the task on `model` (an MJCF path, XML string or `MjModel`) described by `robot`."""
        m = load_model(model)
        super().__init__(brax_physics.from_mjmodel(m), backend=backend, n_frames=n_frames)
        self._torso, self._feet, key, joints = legged_parts(m, robot, "Joystick")
        self._qadr = np.asarray(m.jnt_qposadr[joints], np.int32)
        self._dadr = np.asarray(m.jnt_dofadr[joints], np.int32)
        self._key_qpos = np.asarray(m.key_qpos[key], np.float32)
        self._default = self._key_qpos[self._qadr]
        lo, hi = m.actuator_ctrlrange[:, 0], m.actuator_ctrlrange[:, 1]
        limited = m.actuator_ctrllimited.astype(bool)
        self._ctrl_lo = np.where(limited, lo, -np.inf).astype(np.float32)
        self._ctrl_hi = np.where(limited, hi, np.inf).astype(np.float32)
        for i, (lo_i, hi_i) in enumerate(command_range):
            if not lo_i <= hi_i:
                raise ValueError(f"Joystick.command_range[{i}] = {(lo_i, hi_i)!r}: low must not exceed high")
        if not 0.0 <= zero_command_prob <= 1.0:
            raise ValueError(f"Joystick.zero_command_prob must be in [0, 1], got {zero_command_prob!r}")
        self.robot = robot
        self.weights = weights_of(RewardWeights, weights, "Joystick")
        self._command_lo = np.asarray([r[0] for r in command_range], np.float32)
        self._command_hi = np.asarray([r[1] for r in command_range], np.float32)
        self._command_steps = max(1, round(command_interval / float(self.dt)))
        self._zero_command_prob = zero_command_prob
        self._sigma = tracking_sigma
        self._air_time_target = air_time_target
        self._only_positive = only_positive
        self._reset_noise = reset_noise
        self.terrain = terrain
        self._reset_level = float(reset_level)
        self._hfield_scale = 1.0
        if terrain is None and reset_level != 0.0:
            raise ValueError(f"Joystick.reset_level = {reset_level!r} needs a terrain (flat ground has no "
                             "levels)")
        if terrain is not None:
            self._hfield_scale = _check_terrain(m, terrain)
            _check_spawn(m, key, self._feet, terrain)
            if not 0.0 <= reset_level <= 1.0:
                raise ValueError(f"Joystick.reset_level must be in [0, 1], got {reset_level!r}")
            self.persistent_info = ("terrain_level",)

    # -- readings ------------------------------------------------------------------------------

    def _torso_frame(self, ps: brax_physics.State) -> jax.Array:
        """(3, 3) the torso's rotation (columns: its axes in the world)."""
        return brax_math.quat_to_mat(ps.q[3:7])

    def _readings(self, ps: brax_physics.State) -> dict[str, jax.Array]:
        """What rewards and observations read from a physics state."""
        return {**legged_readings(ps, self._qadr, self._dadr, self._feet),
                "foot_pos": ps.geom_xpos[jnp.asarray(self._feet)]}

    def _terrain_readings(self, r: dict[str, jax.Array], ps: brax_physics.State, terrain: Terrain,
                          elevation: jax.Array) -> dict[str, jax.Array]:
        """`r` with `height` over the ground, the critic's height scan and the feet's clearances.

        `elevation` is the (size, size) ground height (m) of the episode's field.
        """
        rot = self._torso_frame(ps)
        torso = ps.q[0:3]
        n, spacing = terrain.scan_points, terrain.scan_spacing
        offsets = (jnp.arange(n, dtype=jnp.float32) - (n - 1) / 2.0) * spacing
        gx, gy = jnp.meshgrid(offsets, offsets)
        heading = jnp.arctan2(rot[1, 0], rot[0, 0])
        cos, sin = jnp.cos(heading), jnp.sin(heading)
        points = torso[None, 0:2] + jnp.stack([cos * gx.ravel() - sin * gy.ravel(),
                                               sin * gx.ravel() + cos * gy.ravel()], axis=-1)
        feet = r["foot_pos"]
        return {
            **r,
            "height": torso[2] - surface(terrain, elevation, torso[0:2]),
            "scan": torso[2] - surface(terrain, elevation, points),
            "foot_clearance": feet[:, 2] - surface(terrain, elevation, feet[:, 0:2]),
        }

    def _on_terrain(self, field: jax.Array, level: jax.Array) -> tuple[Joystick, jax.Array]:
        """A copy simulating the normalized `field` (size * size,) at `level`, and its elevation (m)."""
        terrain = self.terrain
        assert terrain is not None
        sys = self.sys
        data = (field * (level * self._hfield_scale)).astype(sys.hfield_data.dtype)
        env = self.with_sys(sys.replace(hfield_data=data))
        assert isinstance(env, Joystick)
        elevation = jnp.reshape(field * (level * terrain.max_height), (terrain.size, terrain.size))
        return env, elevation

    def _command(self, key: jax.Array) -> jax.Array:
        """A new (3,) command: uniform in `command_range`, zero with probability `zero_command_prob`."""
        k_cmd, k_zero = jax.random.split(key)
        cmd = jax.random.uniform(k_cmd, (3,), jnp.float32, jnp.asarray(self._command_lo),
                                 jnp.asarray(self._command_hi))
        return jnp.where(jax.random.uniform(k_zero) < self._zero_command_prob, jnp.zeros(3), cmd)

    def _obs(self, r: dict[str, jax.Array], info: dict[str, Any]) -> dict[str, jax.Array]:
        """Policy and critic observations."""
        joint_pos = r["joint_pos"] - jnp.asarray(self._default)
        state = jnp.concatenate([r["ang_vel"], r["gravity"], info["command"], joint_pos, r["joint_vel"],
                                 info["last_action"]])
        privileged = jnp.concatenate([state, r["lin_vel"], r["height"][None],
                                      r["foot_contact"].astype(jnp.float32), info["feet_air_time"]])
        if "scan" in r:
            privileged = jnp.concatenate([privileged, r["scan"], r["foot_clearance"]])
        return {"state": state, "privileged_state": privileged}

    # -- env -----------------------------------------------------------------------------------

    def reset(self, rng: jax.Array) -> State:
        """The keyframe pose at a random heading and place, joints and base velocity slightly perturbed."""
        k_xy, k_yaw, k_q, k_qd, k_cmd, k_next = jax.random.split(rng, 6)
        q = jnp.asarray(self._key_qpos)
        q = q.at[0:2].add(jax.random.uniform(k_xy, (2,), jnp.float32, -_SPREAD, _SPREAD))
        yaw = jax.random.uniform(k_yaw, (), jnp.float32, -math.pi, math.pi)
        q = q.at[3:7].set(brax_math.quat_mul(jnp.asarray([jnp.cos(yaw / 2), 0.0, 0.0, jnp.sin(yaw / 2)]),
                                             q[3:7]))
        noise = self._reset_noise
        joint_noise = jax.random.uniform(k_q, (self.sys.nu,), jnp.float32, -noise, noise)
        q = q.at[jnp.asarray(self._qadr)].add(joint_noise)
        qd = jnp.zeros(self.sys.nv, jnp.float32).at[0:6].set(
            jax.random.uniform(k_qd, (6,), jnp.float32, -noise, noise))
        terrain = self.terrain
        if terrain is None:
            ps = self.pipeline_init(q, qd)
            r = self._readings(ps)
        else:
            # the spawn patch is at height 0 whatever the level, so the keyframe stands on it
            field = jnp.ravel(heights(terrain, jax.random.fold_in(rng, _TERRAIN_SALT)))
            level = jnp.asarray(self._reset_level, jnp.float32)
            env, elevation = self._on_terrain(field, level)
            ps = env.pipeline_init(q, qd)
            r = self._terrain_readings(self._readings(ps), ps, terrain, elevation)
        nfeet = len(self._feet)
        info: dict[str, Any] = {
            "command": self._command(k_cmd),
            "command_rng": k_next,
            "command_countdown": jnp.asarray(self._command_steps, jnp.int32),
            "last_action": jnp.zeros(self.sys.nu, jnp.float32),
            "feet_air_time": jnp.zeros(nfeet, jnp.float32),
            "last_contact": r["foot_contact"],
            "foot_pos": r["foot_pos"],
        }
        zero = jnp.zeros((), jnp.float32)
        metrics = {f"reward/{t}": zero for t in _TERMS}
        if terrain is not None:
            info.update({"terrain": field, "terrain_level": level, "terrain_episode_level": level,
                         "terrain_tracking": zero, "truncation": zero})
            metrics["terrain_level"] = level
        return State(pipeline_state=ps, obs=self._obs(r, info), reward=zero, done=zero, metrics=metrics,
                     info=info)

    def step(self, state: State, action: jax.Array) -> State:
        """Drive the joints toward `default + action_scale * action` for `n_frames` physics steps."""
        action = jnp.clip(jnp.asarray(action, jnp.float32), -1.0, 1.0)
        target = jnp.asarray(self._default) + self.robot.action_scale * action
        ctrl = jnp.clip(target, jnp.asarray(self._ctrl_lo), jnp.asarray(self._ctrl_hi))
        info = state.info
        terrain = self.terrain
        if terrain is None:
            ps = self.pipeline_step(state.pipeline_state, ctrl)
            r = self._readings(ps)
        else:
            # an episode's first step starts from a reset physics state (time 0): it fixes the level
            first = state.pipeline_state.time == 0
            episode_level = jnp.where(first, info["terrain_level"], info["terrain_episode_level"])
            env, elevation = self._on_terrain(info["terrain"], episode_level)
            ps = env.pipeline_step(state.pipeline_state, ctrl)
            r = self._terrain_readings(self._readings(ps), ps, terrain, elevation)
        dt = self.dt

        terms, air_time, contact = reward_terms(r, info, action, ps.actuator_force, dt=dt,
                                                default=self._default, sigma=self._sigma,
                                                air_time_target=self._air_time_target)
        cmd = info["command"]
        fallen = (r["up_z"] < self.robot.min_upright) | (r["height"] < self.robot.min_height)
        done = fallen.astype(jnp.float32)
        terms["termination"] = done
        if terrain is not None:
            off_field = jnp.max(jnp.abs(ps.q[0:2])) > terrain.half_extent - terrain.border
            done = (fallen | off_field).astype(jnp.float32)
        total = sum(getattr(self.weights, k) * terms[k] for k in _TERMS)
        reward = total * dt
        if self._only_positive:
            reward = jnp.maximum(reward, 0.0)

        countdown = info["command_countdown"] - 1
        k_cmd, k_next = jax.random.split(info["command_rng"])
        new_cmd = countdown <= 0
        new_info = {
            **info,
            "command": jnp.where(new_cmd, self._command(k_cmd), cmd),
            "command_rng": k_next,
            "command_countdown": jnp.where(new_cmd, self._command_steps, countdown).astype(jnp.int32),
            "last_action": action,
            "feet_air_time": jnp.where(contact, 0.0, air_time),
            "last_contact": r["foot_contact"],
            "foot_pos": r["foot_pos"],
        }
        metrics = {f"reward/{k}": jnp.asarray(v, jnp.float32) for k, v in terms.items()}
        if terrain is not None:
            # the sum restarts with each episode, also when a cached restart carries `info` over
            tracking = jnp.where(first, 0.0, info["terrain_tracking"]) + terms["tracking_lin_vel"]
            level = next_level(terrain, info["terrain_level"], fallen=fallen, interval_end=new_cmd,
                               tracking=tracking / self._command_steps, moving=jnp.linalg.norm(cmd) > _MOVING)
            new_info.update({
                "terrain_level": level,
                "terrain_episode_level": episode_level,
                "terrain_tracking": jnp.where(new_cmd, 0.0, tracking),
                "truncation": (off_field & ~fallen).astype(jnp.float32),
            })
            metrics["terrain_level"] = episode_level
        return state.replace(pipeline_state=ps, obs=self._obs(r, new_info),
                             reward=jnp.asarray(reward, jnp.float32), done=done, metrics=metrics,
                             info=new_info)
