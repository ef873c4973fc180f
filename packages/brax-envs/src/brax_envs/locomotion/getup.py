"""Get up from a fall with any legged MJCF: reach the standing keyframe's height and pose, upright.

The robot starts fallen (a random orientation and random joint angles, dropped onto the floor and
left to settle) or, with probability `stand_prob`, standing on its keyframe, so the policy learns
both to get up and to stay up. Episodes never end on a fall: getting up is the task, and
fixed-length episodes come from the training wrapper. Use a full-collision model: getting up needs
the torso, thighs and arms to touch the floor.
"""

from __future__ import annotations

import dataclasses
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

from brax_envs._model import load_model, weights_of
from brax_envs.base import PipelineEnv, State
from brax_envs.locomotion.joystick import LeggedRobot, legged_parts, legged_readings


@dataclasses.dataclass(frozen=True)
class GetUpWeights:
    """Each reward term's weight; the reward is `dt` times the weighted sum (each term is a metric)."""

    upright: float = 1.0
    """(1 + z) / 2 of the torso's up axis: 1 upright, 0 upside down."""
    height: float = 1.0
    """Torso height toward the keyframe's: 1 at or above it, a gaussian of the relative shortfall below."""
    posture: float = 1.0
    """exp(-mean squared joint distance to the keyframe / posture_sigma^2), only while upright."""
    action_rate: float = -0.01
    """Change of action between steps, squared."""
    torques: float = -0.01
    """Actuator forces relative to their force limits, squared."""
    joint_vel: float = -1e-3
    """Joint velocities, squared."""


_TERMS = tuple(f.name for f in dataclasses.fields(GetUpWeights))


def getup_reward_terms(r: Mapping[str, jax.Array], action: jax.Array, last_action: jax.Array, *,
                       default: jax.Array | np.ndarray, standing_height: float,
                       force_limit: jax.Array | np.ndarray, height_sigma: float, posture_sigma: float,
                       posture_upright: float) -> dict[str, jax.Array]:
    """Every term of `GetUpWeights` from a step's readings `r` and actions (nu,).

    `r` holds `up_z` () (the torso up axis' world z), `height` () (the torso's), `joint_pos` (nu,),
    `joint_vel` (nu,) and `actuator_force` (nu,); `default` (nu,) is the keyframe's joint angles,
    `force_limit` (nu,) each actuator's force limit (1 where unlimited), `height_sigma` a fraction of
    `standing_height`, `posture_sigma` radians and `posture_upright` the up-axis z that gates posture.
    """
    shortfall = jnp.maximum(1.0 - r["height"] / standing_height, 0.0)
    mean_sq = jnp.mean((r["joint_pos"] - jnp.asarray(default)) ** 2)
    return {
        "upright": (1.0 + r["up_z"]) / 2.0,
        "height": jnp.exp(-0.5 * (shortfall / height_sigma) ** 2),
        # lying down, the keyframe's joint angles are no target: only the upright robot is paid for them
        "posture": jnp.where(r["up_z"] > posture_upright, jnp.exp(-mean_sq / posture_sigma ** 2), 0.0),
        "action_rate": jnp.sum((action - last_action) ** 2),
        "torques": jnp.sum((r["actuator_force"] / jnp.asarray(force_limit)) ** 2),
        "joint_vel": jnp.sum(r["joint_vel"] ** 2),
    }


def getup_success(up_z: jax.Array, height: jax.Array, standing_height: float, *, min_upright: float = 0.9,
                  height_tolerance: float = 0.1) -> jax.Array:
    """() float32 1.0 when the torso's up-axis z exceeds `min_upright` and its height is within
    `height_tolerance` (a fraction) of `standing_height`, else 0.0."""
    near = jnp.abs(height - standing_height) <= height_tolerance * standing_height
    return ((up_z > min_upright) & near).astype(jnp.float32)


def _random_quat(key: jax.Array) -> jax.Array:
    """(4,) a rotation uniform on SO(3): a normalized 4-D gaussian (wxyz)."""
    q = jax.random.normal(key, (4,), jnp.float32)
    unit: jax.Array = q / jnp.linalg.norm(q)
    return unit


def _yaw_quat(yaw: jax.Array) -> jax.Array:
    """(4,) the rotation by `yaw` () about the world z axis (wxyz)."""
    return jnp.stack([jnp.cos(yaw / 2), jnp.zeros(()), jnp.zeros(()), jnp.sin(yaw / 2)])


class GetUp(PipelineEnv):
    """Get up from a random fall to the standing keyframe's height and pose, then stay up.

    - Reset: with probability `stand_prob` the keyframe pose at a random heading (joints perturbed by
      `reset_noise`); otherwise a random orientation (uniform on SO(3)) and joint angles uniform in
      their ranges, dropped with the lowest collision geom's bounding sphere `fall_height` above the
      floor. Either start then runs `settle_time` seconds of physics with the servos holding the
      drawn joint angles (the keyframe's when standing), so episodes begin landed on the floor (a
      few still rolling) in a pose the physics reached, not in the air or in penetration: a pose
      written lying down would need a hand-made contact-free configuration per robot.
      `info['standing_start']` says which start it was.
    - Observation `{'state': ..., 'privileged_state': ...}`: the policy's `state` is gravity and the
      angular velocity in the torso frame, joint angles less the keyframe's, joint velocities and
      the last action; the critic's `privileged_state` adds the torso's height, its linear velocity
      in its frame and foot contacts.
    - Action (nu,) in [-1, 1]: joint targets `default + action_scale * action`, clipped to the
      actuators' ctrlrange.
    - Reward: `dt * sum(weight * term)` over `GetUpWeights` (`getup_reward_terms`); every term and
      `success` (`getup_success`) are in `metrics`. Never done: the training wrapper ends episodes.
    """

    # actions are normalized offsets in [-1, 1] (not the servo targets): adapters give [-1, 1] spaces
    actions_scaled_to_ctrlrange = True

    def __init__(self, model: str | os.PathLike[str] | mujoco.MjModel, robot: LeggedRobot, *,
                 n_frames: int = 5, weights: GetUpWeights | Mapping[str, float] | None = None,
                 action_scale: float | None = None, stand_prob: float = 0.5, fall_height: float = 0.1,
                 settle_time: float = 1.0, reset_noise: float = 0.05, height_sigma: float = 0.4,
                 posture_sigma: float = 0.5, posture_upright: float = 0.9, success_upright: float = 0.9,
                 success_height_tolerance: float = 0.1, backend: str = "generalized") -> None:
        """Build the task on `model` (an MJCF path, XML string or `MjModel`) described by `robot`.

        `action_scale` overrides the robot's; `fall_height` (m) and `settle_time` (s) shape the
        fallen start, `stand_prob` is the share of standing starts; `height_sigma` (a fraction of the
        standing height), `posture_sigma` (rad) and `posture_upright` shape the rewards;
        `success_upright` and `success_height_tolerance` define `success`.
        """
        m = load_model(model)
        super().__init__(brax_physics.from_mjmodel(m), backend=backend, n_frames=n_frames)
        self._torso, self._feet, key, joints = legged_parts(m, robot, "GetUp")
        scale = robot.action_scale if action_scale is None else action_scale
        checks = {"action_scale": (scale, scale > 0), "stand_prob": (stand_prob, 0.0 <= stand_prob <= 1.0),
                  "fall_height": (fall_height, fall_height >= 0.0),
                  "settle_time": (settle_time, settle_time >= 0.0),
                  "height_sigma": (height_sigma, height_sigma > 0.0),
                  "posture_sigma": (posture_sigma, posture_sigma > 0.0)}
        for name, (value, ok) in checks.items():
            if not ok:
                raise ValueError(f"GetUp.{name}: got {value!r} (see the docstring for its range)")
        self.robot = robot
        self.weights = weights_of(GetUpWeights, weights, "GetUp")
        self.action_scale = float(scale)
        self._qadr = np.asarray(m.jnt_qposadr[joints], np.int32)
        self._dadr = np.asarray(m.jnt_dofadr[joints], np.int32)
        self._key_qpos = np.asarray(m.key_qpos[key], np.float32)
        self._default = self._key_qpos[self._qadr]
        self.standing_height = float(self._key_qpos[2])
        if not self.standing_height > 0.0:
            raise ValueError(f"LeggedRobot.keyframe: {robot.keyframe!r} puts the torso at height "
                             f"{self.standing_height!r}; a standing keyframe has it above the floor")
        lo, hi = m.actuator_ctrlrange[:, 0], m.actuator_ctrlrange[:, 1]
        limited = m.actuator_ctrllimited.astype(bool)
        self._ctrl_lo = np.where(limited, lo, -np.inf).astype(np.float32)
        self._ctrl_hi = np.where(limited, hi, np.inf).astype(np.float32)
        force = np.max(np.abs(m.actuator_forcerange), axis=1)
        self._force_limit = np.where(m.actuator_forcelimited.astype(bool) & (force > 0), force, 1.0
                                     ).astype(np.float32)
        # fallen starts draw each joint in its range; an unlimited joint gets a half turn either way
        jlimited = m.jnt_limited[joints].astype(bool)
        jrange = m.jnt_range[joints]
        self._joint_lo = np.where(jlimited, jrange[:, 0], self._default - math.pi).astype(np.float32)
        self._joint_hi = np.where(jlimited, jrange[:, 1], self._default + math.pi).astype(np.float32)
        # the robot's colliding geoms: the fallen start lifts their lowest bounding sphere off the floor
        root = m.body_rootid[self._torso]
        robot_geom = (m.body_rootid[m.geom_bodyid] == root) & ((m.geom_contype | m.geom_conaffinity) != 0)
        self._drop_geoms = np.flatnonzero(robot_geom).astype(np.int32)
        if self._drop_geoms.size == 0:
            raise ValueError(f"GetUp: no geom of {robot.torso!r}'s tree collides; use a full-collision model")
        self._geom_body = np.asarray(m.geom_bodyid[self._drop_geoms], np.int32)
        self._geom_pos = np.asarray(m.geom_pos[self._drop_geoms], np.float32)
        self._geom_rbound = np.asarray(m.geom_rbound[self._drop_geoms], np.float32)
        self._stand_prob = float(stand_prob)
        self._fall_height = float(fall_height)
        self._settle_steps = round(settle_time / float(m.opt.timestep))
        self._reset_noise = float(reset_noise)
        self._height_sigma = float(height_sigma)
        self._posture_sigma = float(posture_sigma)
        self._posture_upright = float(posture_upright)
        self._success_upright = float(success_upright)
        self._success_tolerance = float(success_height_tolerance)

    # -- readings ------------------------------------------------------------------------------

    def _readings(self, ps: brax_physics.State) -> dict[str, jax.Array]:
        """What rewards and observations read from a physics state."""
        readings = legged_readings(ps, self._qadr, self._dadr, self._feet)
        return {**readings, "actuator_force": ps.actuator_force}

    def _obs(self, r: dict[str, jax.Array], last_action: jax.Array) -> dict[str, jax.Array]:
        """Policy and critic observations."""
        joint_pos = r["joint_pos"] - jnp.asarray(self._default)
        state = jnp.concatenate([r["gravity"], r["ang_vel"], joint_pos, r["joint_vel"], last_action])
        privileged = jnp.concatenate([state, r["height"][None], r["lin_vel"],
                                      r["foot_contact"].astype(jnp.float32)])
        return {"state": state, "privileged_state": privileged}

    def _metrics(self, terms: Mapping[str, jax.Array], r: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        """Every reward term and `success`."""
        metrics = {f"reward/{k}": jnp.asarray(v, jnp.float32) for k, v in terms.items()}
        metrics["success"] = getup_success(r["up_z"], r["height"], self.standing_height,
                                           min_upright=self._success_upright,
                                           height_tolerance=self._success_tolerance)
        return metrics

    def _terms(self, r: Mapping[str, jax.Array], action: jax.Array, last_action: jax.Array
               ) -> dict[str, jax.Array]:
        """`getup_reward_terms` with this task's constants."""
        return getup_reward_terms(r, action, last_action, default=self._default,
                                  standing_height=self.standing_height, force_limit=self._force_limit,
                                  height_sigma=self._height_sigma, posture_sigma=self._posture_sigma,
                                  posture_upright=self._posture_upright)

    # -- starts --------------------------------------------------------------------------------

    def _fallen_q(self, key: jax.Array, q: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(nq,) `q` turned to a random orientation with random joints, its lowest collision geom's
        bounding sphere `fall_height` above the floor, and the (nu,) drawn joint angles."""
        k_rot, k_joint = jax.random.split(key)
        joints = jax.random.uniform(k_joint, (self.sys.nu,), jnp.float32, jnp.asarray(self._joint_lo),
                                    jnp.asarray(self._joint_hi))
        q = q.at[3:7].set(_random_quat(k_rot)).at[jnp.asarray(self._qadr)].set(joints).at[2].set(0.0)
        x = brax_physics.forward_kinematics(self.sys, q)
        body = jnp.asarray(self._geom_body)
        centers = x.pos[body] + jax.vmap(brax_math.rotate)(jnp.asarray(self._geom_pos), x.rot[body])
        lowest = jnp.min(centers[:, 2] - jnp.asarray(self._geom_rbound))
        return q.at[2].set(self._fall_height - lowest), joints

    def _standing_q(self, key: jax.Array, q: jax.Array) -> jax.Array:
        """(nq,) `q` (the keyframe) at a random heading, joints perturbed by `reset_noise`."""
        k_yaw, k_joint = jax.random.split(key)
        yaw = jax.random.uniform(k_yaw, (), jnp.float32, -math.pi, math.pi)
        q = q.at[3:7].set(brax_math.quat_mul(_yaw_quat(yaw), q[3:7]))
        noise = jax.random.uniform(k_joint, (self.sys.nu,), jnp.float32, -self._reset_noise,
                                   self._reset_noise)
        return q.at[jnp.asarray(self._qadr)].add(noise)

    def _settle(self, ps: brax_physics.State, ctrl: jax.Array) -> brax_physics.State:
        """`settle_time` seconds of physics under `ctrl` (nu,), the clock then set back to 0."""
        if self._settle_steps == 0:
            return ps
        sys = self.sys

        def physics_step(s: brax_physics.State, _: None) -> tuple[brax_physics.State, None]:
            return brax_physics.step(sys, s, ctrl), None

        ps, _ = jax.lax.scan(physics_step, ps, None, length=self._settle_steps)
        return ps.replace(time=jnp.zeros_like(ps.time))

    # -- env -----------------------------------------------------------------------------------

    def reset(self, rng: jax.Array) -> State:
        """A fallen start (or a standing one with probability `stand_prob`), settled on the floor."""
        k_xy, k_stand, k_up, k_fall = jax.random.split(rng, 4)
        q = jnp.asarray(self._key_qpos)
        q = q.at[0:2].add(jax.random.uniform(k_xy, (2,), jnp.float32, -0.5, 0.5))
        standing = jax.random.uniform(k_stand) < self._stand_prob
        q_fall, joints = self._fallen_q(k_fall, q)
        q = jnp.where(standing, self._standing_q(k_up, q), q_fall)
        # the servos hold the drawn joints while the body lands, so the joints stay random
        hold = jnp.clip(jnp.where(standing, jnp.asarray(self._default), joints), jnp.asarray(self._ctrl_lo),
                        jnp.asarray(self._ctrl_hi))
        ps = self._settle(self.pipeline_init(q, jnp.zeros(self.sys.nv, jnp.float32)), hold)
        r = self._readings(ps)
        last_action = jnp.zeros(self.sys.nu, jnp.float32)
        info: dict[str, Any] = {"last_action": last_action, "standing_start": standing}
        zero = jnp.zeros((), jnp.float32)
        metrics = self._metrics({t: zero for t in _TERMS}, r)
        return State(pipeline_state=ps, obs=self._obs(r, last_action), reward=zero, done=zero,
                     metrics=metrics, info=info)

    def step(self, state: State, action: jax.Array) -> State:
        """Drive the joints toward `default + action_scale * action` for `n_frames` physics steps."""
        action = jnp.clip(jnp.asarray(action, jnp.float32), -1.0, 1.0)
        target = jnp.asarray(self._default) + self.action_scale * action
        ctrl = jnp.clip(target, jnp.asarray(self._ctrl_lo), jnp.asarray(self._ctrl_hi))
        ps = self.pipeline_step(state.pipeline_state, ctrl)
        r = self._readings(ps)
        terms = self._terms(r, action, state.info["last_action"])
        reward = self.dt * sum(getattr(self.weights, k) * terms[k] for k in _TERMS)
        info = {**state.info, "last_action": action}
        return state.replace(pipeline_state=ps, obs=self._obs(r, action),
                             reward=jnp.asarray(reward, jnp.float32), done=jnp.zeros((), jnp.float32),
                             metrics=self._metrics(terms, r), info=info)


def _full_collision_scene(robot: str, self_collision: bool) -> mujoco.MjModel:
    """`robot`'s flat-ground scene, every link colliding (with the floor only unless `self_collision`)."""
    from brax_envs import locomotion  # here, not at the top: the package imports this module

    m = mujoco.MjModel.from_xml_path(os.fspath(locomotion.asset(f"{robot}_full_collision_scene_flat.xml")))
    if not self_collision:
        # contype 0 on the robot: its geoms still meet the floor's contype through their conaffinity
        m.geom_contype[m.body_rootid[m.geom_bodyid] != 0] = 0
    return m


def quadruped_getup(self_collision: bool = False, **kwargs: Any) -> GetUp:
    """The get-up task on our quadruped on flat ground, every link touching the floor (`GetUp` keywords
    in `kwargs`); `self_collision=True` lets its links collide with each other too (about seven times
    the contact slots, so far slower to compile and step on a CPU)."""
    from brax_envs import locomotion

    # the joystick's 0.3 rad reaches too little of the legs' range to roll over and stand
    kwargs.setdefault("action_scale", 0.5)
    return GetUp(_full_collision_scene("quadruped", self_collision), locomotion.QUADRUPED, **kwargs)


def humanoid_getup(self_collision: bool = False, **kwargs: Any) -> GetUp:
    """The get-up task on our humanoid on flat ground, every link touching the floor (`GetUp` keywords
    in `kwargs`); `self_collision=True` lets its links collide with each other too (about seven times
    the contact slots, so far slower to compile and step on a CPU)."""
    from brax_envs import locomotion

    # pushing up from the floor takes larger joint excursions than walking's 0.25 rad
    kwargs.setdefault("action_scale", 0.5)
    return GetUp(_full_collision_scene("humanoid", self_collision), locomotion.HUMANOID, **kwargs)


__all__ = ["GetUp", "GetUpWeights", "getup_reward_terms", "getup_success", "humanoid_getup",
           "quadruped_getup"]
