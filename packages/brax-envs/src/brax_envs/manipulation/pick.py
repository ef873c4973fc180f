"""Pick a cube off a table with an arm and a parallel gripper, and hold it at a target in the air.

A `PickScene` names what the task reads beyond the model (the gripper's site and pads, the cube,
the target's mocap body, the start keyframe); the model brings its own position actuators (PD
servos): one per arm joint and one for the gripper. The policy moves the arm's joint targets by
small steps, `target += action_scale * action`, and sets the gripper's opening directly.
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

Range = tuple[float, float]


@dataclasses.dataclass(frozen=True)
class PickScene:
    """What the pick task needs of an arm-and-cube MJCF besides the model itself."""

    gripper_site: str = "grip_site"
    """The site between the fingertips (the end effector the task reads)."""
    left_pad: str = "left_pad"
    """The left finger's contact geom."""
    right_pad: str = "right_pad"
    """The right finger's contact geom."""
    gripper_actuator: str = "gripper"
    """The position servo on the pads' gap; every other actuator drives an arm joint."""
    cube: str = "cube"
    """The cube's body: the only geom of a body whose only joint is a free joint."""
    target: str = "target"
    """The mocap body that shows the target (moved there at each reset)."""
    keyframe: str = "home"
    """The start keyframe: arm pose, gripper opening and servo targets (its `ctrl`), cube at rest."""


@dataclasses.dataclass(frozen=True)
class RewardWeights:
    """Each reward term's weight; the reward is `dt` times the weighted sum (each term is a metric)."""

    reach: float = 1.0
    """1 - tanh(|gripper - cube| / reach_scale): the end effector approaching the cube."""
    grasp: float = 0.5
    """1 while both pads touch the cube."""
    lift: float = 2.0
    """The cube's height above its resting height as a fraction of the target's, clipped to [0, 1]."""
    place: float = 4.0
    """1 - tanh(|cube - target| / place_scale), only while the cube is grasped or off the table."""
    action_rate: float = -0.01
    """Change of action between steps, squared."""
    success: float = 0.0
    """1 while the cube is within `success_radius` of the target (a metric unless weighted)."""


_TERMS = tuple(f.name for f in dataclasses.fields(RewardWeights))


def pick_reward_terms(gripper_pos: jax.Array, cube_pos: jax.Array, target_pos: jax.Array,
                      pad_contact: jax.Array, action: jax.Array, last_action: jax.Array, *,
                      rest_height: float | jax.Array, reach_scale: float = 0.1, place_scale: float = 0.1,
                      lift_threshold: float = 0.01, success_radius: float = 0.025) -> dict[str, jax.Array]:
    """Every `RewardWeights` term, () float32 each, from one step's readings.

    `gripper_pos`, `cube_pos` and `target_pos` are (3,) world positions; `pad_contact` (2,) bool says
    whether each pad touches the cube; `action` and `last_action` are (nu,). The cube counts as off
    the table once its centre is `lift_threshold` above `rest_height`.
    """
    reach_dist = jnp.linalg.norm(cube_pos - gripper_pos)
    place_dist = jnp.linalg.norm(target_pos - cube_pos)
    height = cube_pos[2] - rest_height
    grasped = jnp.all(pad_contact)
    lifted = height > lift_threshold
    # a target at the resting height would divide by zero; the task keeps targets above the table
    goal_height = jnp.maximum(target_pos[2] - rest_height, 1e-6)
    f32 = jnp.float32
    return {
        "reach": (1.0 - jnp.tanh(reach_dist / reach_scale)).astype(f32),
        "grasp": grasped.astype(f32),
        "lift": jnp.clip(height / goal_height, 0.0, 1.0).astype(f32),
        "place": jnp.where(grasped | lifted, 1.0 - jnp.tanh(place_dist / place_scale), 0.0).astype(f32),
        "action_rate": jnp.sum((action - last_action) ** 2).astype(f32),
        "success": (place_dist < success_radius).astype(f32),
    }


class PickCube(PipelineEnv):
    """Grasp a cube on a table and hold it at a target 10-30 cm above the table.

    - Reset: the arm at the keyframe's pose with uniform joint noise of `reset_noise` rad, servo
      targets at that pose; the cube at rest on the table, uniform in `cube_x` x `cube_y` at a random
      yaw; the target uniform in `cube_x` x `cube_y` x `target_height` (its mocap body moved there).
    - Action (nu,) in [-1, 1]: arm joint targets move by `action_scale * action` (rad) per step,
      clipped to the servos' ctrlrange; the gripper's entry sets its opening target across its
      ctrlrange (-1 closed, 1 open).
    - Observation `{'state': ..., 'privileged_state': ...}`: `state` is the arm's joint angles less
      the keyframe's, joint velocities, the gripper opening, the end effector's position, the cube's
      position and orientation (two columns of its rotation matrix), the vectors cube to gripper and
      cube to target, and the last action; `privileged_state` adds the cube's linear and angular
      velocity and the two pad contacts.
    - Reward: `dt * sum(weight * term)` over `RewardWeights`; every term is in `metrics`.
    - Ends when the cube leaves the workspace (more than `workspace_radius` from the base
      horizontally, or below the table).
    """

    # actions are normalized steps in [-1, 1] (not the servo targets): adapters give [-1, 1] spaces
    actions_scaled_to_ctrlrange = True

    def __init__(self, model: str | os.PathLike[str] | mujoco.MjModel, scene: PickScene | None = None, *,
                 n_frames: int = 4, weights: RewardWeights | Mapping[str, float] | None = None,
                 action_scale: float = 0.04, reset_noise: float = 0.02,
                 cube_x: Range = (0.35, 0.65), cube_y: Range = (-0.2, 0.2),
                 target_height: Range = (0.1, 0.3), reach_scale: float = 0.1, place_scale: float = 0.1,
                 lift_threshold: float = 0.01, success_radius: float = 0.025,
                 workspace_radius: float = 1.2, backend: str = "generalized") -> None:
        """Build the task on `model` (an MJCF path, XML string or `MjModel`) described by `scene`."""
        m = load_model(model)
        scene = PickScene() if scene is None else scene
        body_names = tuple(m.body(i).name for i in range(m.nbody))
        geom_names = tuple(m.geom(i).name for i in range(m.ngeom))
        site_names = tuple(m.site(i).name for i in range(m.nsite))
        act_names = tuple(m.actuator(i).name for i in range(m.nu))
        key_names = tuple(m.key(i).name for i in range(m.nkey))
        part = functools.partial(index_of, "PickScene")  # errors name PickScene's fields
        self._site = part("site", site_names, scene.gripper_site, "gripper_site")
        pads = [part("geom", geom_names, scene.left_pad, "left_pad"),
                part("geom", geom_names, scene.right_pad, "right_pad")]
        self._gripper = part("actuator", act_names, scene.gripper_actuator, "gripper_actuator")
        self._cube = part("body", body_names, scene.cube, "cube")
        target = part("body", body_names, scene.target, "target")
        key = part("keyframe", key_names, scene.keyframe, "keyframe")

        cube_jnt = m.body_jntadr[self._cube]
        if m.body_jntnum[self._cube] != 1 or m.jnt_type[cube_jnt] != mujoco.mjtJoint.mjJNT_FREE:
            raise ValueError(f"PickScene.cube: body {scene.cube!r} must have one joint, a free joint")
        cube_geoms = np.flatnonzero(m.geom_bodyid == self._cube)
        if cube_geoms.size != 1:
            raise ValueError(f"PickScene.cube: body {scene.cube!r} must have exactly one geom, "
                             f"it has {cube_geoms.size}")
        if m.body_mocapid[target] < 0:
            raise ValueError(f"PickScene.target: body {scene.target!r} must be a mocap body")
        self._mocap = int(m.body_mocapid[target])

        arm = np.asarray([i for i in range(m.nu) if i != self._gripper], np.int32)
        if arm.size == 0:
            raise ValueError("PickCube: the model has no arm actuators besides the gripper")
        joints = m.actuator_trnid[arm, 0]
        if (np.any(m.actuator_trntype[arm] != mujoco.mjtTrn.mjTRN_JOINT)
                or np.any(m.jnt_type[joints] != mujoco.mjtJoint.mjJNT_HINGE)):
            raise ValueError("PickCube: every actuator but the gripper must drive a hinge joint "
                             "(position servos)")
        self._arm = arm
        self._arm_qadr = np.asarray(m.jnt_qposadr[joints], np.int32)
        self._arm_dadr = np.asarray(m.jnt_dofadr[joints], np.int32)
        self._cube_qadr = int(m.jnt_qposadr[cube_jnt])
        self._cube_dadr = int(m.jnt_dofadr[cube_jnt])
        self._pads = np.asarray(pads, np.int32)
        self._cube_geom = int(cube_geoms[0])

        self._key_qpos = np.asarray(m.key_qpos[key], np.float32)
        self._key_ctrl = np.asarray(m.key_ctrl[key], np.float32)
        self._home = self._key_qpos[self._arm_qadr]
        self._rest_height = float(self._key_qpos[self._cube_qadr + 2])
        lo, hi = m.actuator_ctrlrange[:, 0], m.actuator_ctrlrange[:, 1]
        limited = m.actuator_ctrllimited.astype(bool)
        if not limited[self._gripper]:
            raise ValueError(f"PickCube: the gripper actuator {scene.gripper_actuator!r} needs a ctrlrange "
                             "(its actions span it)")
        self._ctrl_lo = np.where(limited, lo, -np.inf).astype(np.float32)
        self._ctrl_hi = np.where(limited, hi, np.inf).astype(np.float32)

        for name, (r_lo, r_hi) in (("cube_x", cube_x), ("cube_y", cube_y), ("target_height", target_height)):
            if not r_lo <= r_hi:
                raise ValueError(f"PickCube.{name} = {(r_lo, r_hi)!r}: low must not exceed high")
        if not target_height[0] > 0:
            raise ValueError(f"PickCube.target_height = {target_height!r}: targets must be above the table")
        if not action_scale > 0:
            raise ValueError(f"PickCube.action_scale must be positive, got {action_scale!r}")
        self.scene = scene
        self.weights = weights_of(RewardWeights, weights, "PickCube")
        self._action_scale = action_scale
        self._reset_noise = reset_noise
        self._cube_lo = np.asarray([cube_x[0], cube_y[0]], np.float32)
        self._cube_hi = np.asarray([cube_x[1], cube_y[1]], np.float32)
        self._target_lo = np.asarray([cube_x[0], cube_y[0], target_height[0]], np.float32)
        self._target_hi = np.asarray([cube_x[1], cube_y[1], target_height[1]], np.float32)
        self._reward_kw: dict[str, float] = {
            "reach_scale": reach_scale, "place_scale": place_scale, "lift_threshold": lift_threshold,
            "success_radius": success_radius}
        self._workspace_radius = workspace_radius
        # the names are checked first: building the System is the slow part
        super().__init__(brax_physics.from_mjmodel(m), backend=backend, n_frames=n_frames)

    # -- readings ------------------------------------------------------------------------------

    def _readings(self, ps: brax_physics.State) -> dict[str, jax.Array]:
        """What rewards and observations read from a physics state."""
        site_pos, _ = brax_physics.sites(self.sys, ps, (self.scene.gripper_site,))
        contact = ps.contact
        cube = self._cube_geom
        pads = jnp.asarray(self._pads)
        g1, g2 = contact.geom1[None, :], contact.geom2[None, :]
        on_pad = ((g1 == pads[:, None]) & (g2 == cube)) | ((g2 == pads[:, None]) & (g1 == cube))
        c, d = self._cube_qadr, self._cube_dadr
        return {
            "joint_pos": ps.q[jnp.asarray(self._arm_qadr)],
            "joint_vel": ps.qd[jnp.asarray(self._arm_dadr)],
            "opening": ps.actuator_length[self._gripper],
            "gripper_pos": site_pos[0],
            "cube_pos": ps.q[c:c + 3],
            "cube_rot": brax_math.quat_to_mat(ps.q[c + 3:c + 7]),
            "cube_vel": ps.qd[d:d + 6],  # world-frame linear, body-frame angular (MuJoCo's free joint)
            "pad_contact": jnp.any(on_pad & contact.active[None, :], axis=1),
        }

    def _obs(self, r: dict[str, jax.Array], info: dict[str, Any]) -> dict[str, jax.Array]:
        """Policy and critic observations."""
        state = jnp.concatenate([
            r["joint_pos"] - jnp.asarray(self._home), r["joint_vel"], r["opening"][None], r["gripper_pos"],
            r["cube_pos"], r["cube_rot"][:, :2].reshape(-1), r["gripper_pos"] - r["cube_pos"],
            info["target"] - r["cube_pos"], info["last_action"]])
        privileged = jnp.concatenate([state, r["cube_vel"], r["pad_contact"].astype(jnp.float32)])
        return {"state": state, "privileged_state": privileged}

    def _terms(self, r: dict[str, jax.Array], info: dict[str, Any],
               action: jax.Array) -> dict[str, jax.Array]:
        """The reward terms of a step's readings."""
        return pick_reward_terms(r["gripper_pos"], r["cube_pos"], info["target"], r["pad_contact"], action,
                                 info["last_action"], rest_height=self._rest_height, **self._reward_kw)

    # -- env -----------------------------------------------------------------------------------

    def reset(self, rng: jax.Array) -> State:
        """The keyframe's arm with joint noise, the cube somewhere on the table, a target above it."""
        k_q, k_xy, k_yaw, k_target = jax.random.split(rng, 4)
        noise = self._reset_noise
        arm_q = jnp.asarray(self._home) + jax.random.uniform(k_q, self._home.shape, jnp.float32, -noise,
                                                             noise)
        q = jnp.asarray(self._key_qpos).at[jnp.asarray(self._arm_qadr)].set(arm_q)
        xy = jax.random.uniform(k_xy, (2,), jnp.float32, jnp.asarray(self._cube_lo),
                                jnp.asarray(self._cube_hi))
        yaw = jax.random.uniform(k_yaw, (), jnp.float32, -math.pi, math.pi)
        c = self._cube_qadr
        q = q.at[c:c + 2].set(xy).at[c + 2].set(self._rest_height)
        zero = jnp.zeros((), jnp.float32)
        q = q.at[c + 3:c + 7].set(jnp.stack([jnp.cos(yaw / 2), zero, zero, jnp.sin(yaw / 2)]))
        target = jax.random.uniform(k_target, (3,), jnp.float32, jnp.asarray(self._target_lo),
                                    jnp.asarray(self._target_hi))
        target = target.at[2].add(self._rest_height)
        ps = self.pipeline_init(q, jnp.zeros(self.sys.nv, jnp.float32))
        ps = ps.replace(mocap_pos=ps.mocap_pos.at[self._mocap].set(target))
        ctrl = jnp.asarray(self._key_ctrl).at[jnp.asarray(self._arm)].set(arm_q)
        info: dict[str, Any] = {
            "target": target,
            "ctrl": jnp.clip(ctrl, jnp.asarray(self._ctrl_lo), jnp.asarray(self._ctrl_hi)),
            "last_action": jnp.zeros(self.sys.nu, jnp.float32),
        }
        r = self._readings(ps)
        metrics = {f"reward/{t}": zero for t in _TERMS}
        return State(pipeline_state=ps, obs=self._obs(r, info), reward=zero, done=zero, metrics=metrics,
                     info=info)

    def step(self, state: State, action: jax.Array) -> State:
        """Move the arm's targets by `action_scale * action`, set the gripper's, and run `n_frames` steps."""
        action = jnp.clip(jnp.asarray(action, jnp.float32), -1.0, 1.0)
        info = state.info
        lo, hi = jnp.asarray(self._ctrl_lo), jnp.asarray(self._ctrl_hi)
        arm = jnp.asarray(self._arm)
        g = self._gripper
        ctrl = info["ctrl"].at[arm].add(self._action_scale * action[arm])
        ctrl = ctrl.at[g].set(lo[g] + 0.5 * (action[g] + 1.0) * (hi[g] - lo[g]))
        ctrl = jnp.clip(ctrl, lo, hi)
        ps = self.pipeline_step(state.pipeline_state, ctrl)
        r = self._readings(ps)
        terms = self._terms(r, info, action)
        reward = self.dt * sum(getattr(self.weights, k) * terms[k] for k in _TERMS)
        cube = r["cube_pos"]
        away = (jnp.linalg.norm(cube[:2]) > self._workspace_radius) | (cube[2] < -self._rest_height)
        done = away.astype(jnp.float32)
        new_info = {**info, "ctrl": ctrl, "last_action": action}
        metrics = {f"reward/{k}": v for k, v in terms.items()}
        return state.replace(pipeline_state=ps, obs=self._obs(r, new_info),
                             reward=jnp.asarray(reward, jnp.float32), done=done, metrics=metrics,
                             info=new_info)
