"""dm_control's dog domain: a detailed quadruped that stands, walks, trots, runs and fetches a ball."""

from __future__ import annotations

import collections
import math
from collections.abc import Mapping
from typing import ClassVar

import brax_math
import brax_physics
import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from brax_envs.dm_control._suite import SuiteEnv, suite_model
from brax_envs.dm_control.rewards import tolerance

TASKS = {"stand": None, "walk": 1.0, "trot": 3.0, "run": 9.0, "fetch": None}
"""The domain's tasks and their target forward speeds (m/s; None: no locomotion term)."""

_TIME_LIMIT = 15.0  # seconds; the floor of a moving task spans this long at its speed
_STAND_HEIGHT_FRACTION = 0.9  # torso and pelvis count as standing above this part of their rest height
_MIN_UPRIGHT_COSINE = math.cos(math.radians(30))  # head, torso, pelvis upright within 30 degrees
_HINGE = int(mujoco.mjtJoint.mjJNT_HINGE)
_TOUCH = ("palm_L", "palm_R", "sole_L", "sole_R")
_FORCES = ("foot_L", "foot_R", "hand_L", "hand_R")


class Dog(SuiteEnv):
    """Dog: a quadruped of 38 actuators, each a first-order filter of its control (their states observed).

    Observation: `joint_angles`, `joint_velocites` (dm_control's spelling) of the hinges,
    `torso_pelvis_height`, `z_projection` (skull, torso, pelvis z rows), `torso_com_velocity`
    (the body's centre-of-mass velocity in the torso frame), `inertial_sensors` (head
    accelerometer, velocimeter, gyro), `foot_forces`, `touch_sensors`, `actuator_state`; fetch adds
    `ball_state` and `target_position` in the head's frame. Reward: product of standing factors
    (torso and pelvis height, uprightness, feet carrying the body weight), times a forward-speed
    factor (walk 1, trot 3, run 9 m/s) or reach-ball and ball-at-target factors (fetch).
    Episodes start at rest pose with a random heading, random horizontal root velocities and
    random actuator states; fetch throws the ball towards the centre. 1000 control steps of 0.015 s.
    """

    domain = "dog"
    time_limit = _TIME_LIMIT
    control_timestep = 0.015
    fast_solver: ClassVar[Mapping[str, int]] = {"iterations": 4, "ls_iterations": 8}

    def __init__(self, task: str = "stand", *, solver: str = "default", debug: bool = False) -> None:
        """Task `stand`, `walk`, `trot`, `run` or `fetch`."""
        if task not in TASKS:
            raise ValueError(f"unknown dog task {task!r}; tasks: {tuple(TASKS)}")
        self._fetch = task == "fetch"
        self._speed = TASKS[task]
        # dm_control's floors: fetch's 10 m (with ball, target and walls), else as long as an episode
        # at the task's speed (stand: walking speed)
        model = (suite_model("dog", 10, False) if self._fetch
                 else suite_model("dog", int((self._speed or 1.0) * _TIME_LIMIT), True))
        super().__init__(task, model, solver=solver, debug=debug)
        m = self.model
        hinges = np.flatnonzero(m.jnt_type == _HINGE)
        self._hinge_qpos = np.asarray(m.jnt_qposadr[hinges], np.int32)
        self._hinge_qvel = np.asarray(m.jnt_dofadr[hinges], np.int32)
        self._root_qpos = self.joint_qpos("root")
        self._torso, self._pelvis, self._skull = (int(i) for i in self.body_ids("torso", "pelvis", "skull"))
        # rest heights and body weight, at the model's default pose as dm_control measures them
        d = mujoco.MjData(m)
        mujoco.mj_forward(m, d)
        self._stand_height = tuple(_STAND_HEIGHT_FRACTION * float(d.xpos[b, 2])
                                   for b in (self._torso, self._pelvis))
        self._body_weight = float(-m.opt.gravity[2] * m.body_subtreemass[self._torso])
        self._ctrl_low = np.asarray(m.actuator_ctrlrange[:, 0], np.float32)
        self._ctrl_high = np.asarray(m.actuator_ctrlrange[:, 1], np.float32)
        head = int(self.site_ids("head")[0])
        self._head_body = int(m.site_bodyid[head])
        if self._fetch:
            self._ball_qpos = self.joint_qpos("ball_root")
            self._ball_qvel = self.joint_qvel("ball_root")
            self._ball_geom, self._target_geom = (int(i) for i in self.geom_ids("ball", "target"))
            self._ball_body = int(m.geom_bodyid[self._ball_geom])
            self._floor_size = float(m.geom_size[self.geom_ids("floor")[0], 0])
            self._bite_radius = float(m.site_size[self.site_ids("upper_bite")[0], 0])
            self._target_radius = float(m.geom_size[self._target_geom, 0])
            self._gravity = float(-m.opt.gravity[2])

    # ---- the episode ----

    def initial_state(self, rng: jax.Array) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        """Rest pose turned to a uniform heading; root x, y and yaw velocities N(0, 2²); actuator
        states uniform in their control ranges (in `info["initial_act"]`); fetch: the ball 0.75 of the
        floor's half-size out at a uniform azimuth, thrown towards the centre (±0.05 noise) at up to 5 m/s
        and up to 3 m high."""
        ks = jax.random.split(rng, 8)
        q = jnp.asarray(self.sys.qpos0, jnp.float32)
        azimuth = jax.random.uniform(ks[0], (), jnp.float32, 0.0, 2 * jnp.pi)
        zero = jnp.zeros((), jnp.float32)
        heading = jnp.stack([jnp.cos(azimuth / 2), zero, zero, jnp.sin(azimuth / 2)])
        q = q.at[self._root_qpos.start + 3:self._root_qpos.stop].set(heading)
        qd = jnp.zeros(self.sys.nv, jnp.float32).at[jnp.asarray([0, 1, 5])].set(
            2 * jax.random.normal(ks[1], (3,), jnp.float32))
        act = jax.random.uniform(ks[2], (self.sys.nu,), jnp.float32, self._ctrl_low, self._ctrl_high)
        if self._fetch:
            radius = 0.75 * self._floor_size
            throw = jax.random.uniform(ks[3], (), jnp.float32, 0.0, 2 * jnp.pi)
            ball = jnp.stack([radius * jnp.sin(throw), radius * jnp.cos(throw), zero + 0.05])
            q = q.at[self._ball_qpos.start:self._ball_qpos.start + 3].set(ball)
            # upward speed reaching the drawn height: v = sqrt(2 g h)
            up = jnp.sqrt(2 * self._gravity * jax.random.uniform(ks[4], (), jnp.float32, 0.0, 3.0))
            speed = jax.random.uniform(ks[5], (), jnp.float32, 0.0, 5.0)
            direction = -jnp.stack([jnp.sin(throw), jnp.cos(throw)]) + 0.05 * jax.random.normal(ks[6], (2,))
            qd = qd.at[self._ball_qvel.start:self._ball_qvel.start + 3].set(
                jnp.concatenate([speed * direction, up[None]]))
        return q, qd, {"initial_act": act}

    def pipeline_state_init(self, q: jax.Array, qd: jax.Array,
                            info: Mapping[str, jax.Array]) -> brax_physics.State:
        """The physics state with the episode's actuator states."""
        return brax_physics.init(self.sys, q, qd, activation=jnp.asarray(info["initial_act"], jnp.float32))

    # ---- observation and reward ----

    def _point_velocity(self, ps: brax_physics.State, body: int, point: jax.Array) -> jax.Array:
        """World linear velocity of `point` moving with `body`."""
        return ps.xd.vel[body] + jnp.cross(ps.xd.ang[body], point - ps.x.pos[body])

    def _com_velocity(self, ps: brax_physics.State) -> jax.Array:
        """The dog's centre-of-mass velocity (the `torso_linvel` subtree sensor, at this state)."""
        return self.subtree_linvel(ps, "torso")

    def _head(self, ps: brax_physics.State) -> tuple[jax.Array, jax.Array]:
        """Position and orientation of the head site."""
        pos, mat = self.sites(ps, "head")
        return pos[0], mat[0]

    def _torso_com_velocity(self, ps: brax_physics.State) -> jax.Array:
        """The centre-of-mass velocity in the torso's frame."""
        return self._com_velocity(ps) @ brax_math.quat_to_mat(ps.x.rot[self._torso])

    def _heights(self, ps: brax_physics.State) -> jax.Array:
        """World z of torso and pelvis."""
        return ps.x.pos[jnp.asarray([self._torso, self._pelvis]), 2]

    def _z_projection(self, ps: brax_physics.State) -> jax.Array:
        """(3, 3) the z rows of skull, torso and pelvis orientations."""
        return self.body_xmat(ps, "skull", "torso", "pelvis")[:, 2, :]

    def _touch(self, ps: brax_physics.State) -> jax.Array:
        """The four paw touch sensors."""
        return jnp.concatenate([self.sensor(ps, s) for s in _TOUCH])

    def observation(self, ps: brax_physics.State, info: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        """dm_control's dog observation (velocity sensors evaluated at this state, acceleration and
        force sensors those of the last physics step)."""
        head_pos, head_mat = self._head(ps)
        skull_vel = self._point_velocity(ps, self._head_body, head_pos)
        inertial = jnp.concatenate([self.sensor(ps, "accelerometer"), skull_vel @ head_mat,
                                    ps.xd.ang[self._head_body] @ head_mat])
        # ordered: jax sorts a plain dict's keys, dm_control's order is its own
        obs = collections.OrderedDict([
            ("joint_angles", ps.q[self._hinge_qpos]),
            ("joint_velocites", ps.qd[self._hinge_qvel]),
            ("torso_pelvis_height", self._heights(ps)),
            ("z_projection", self._z_projection(ps).reshape(-1)),
            ("torso_com_velocity", self._torso_com_velocity(ps)),
            ("inertial_sensors", inertial),
            ("foot_forces", jnp.concatenate([self.sensor(ps, s) for s in _FORCES])),
            ("touch_sensors", self._touch(ps)),
            ("actuator_state", ps.act),
        ])
        if self._fetch:
            ball = ps.geom_xpos[self._ball_geom]
            ball_vel = self._point_velocity(ps, self._ball_body, ball)
            obs["ball_state"] = jnp.concatenate([(ball - head_pos) @ head_mat,
                                                 (ball_vel - skull_vel) @ head_mat])
            obs["target_position"] = (ps.geom_xpos[self._target_geom] - head_pos) @ head_mat
        return obs

    def _standing(self, ps: brax_physics.State) -> jax.Array:
        """Product of the standing factors: torso and pelvis height, uprightness, paws' support."""
        h = self._heights(ps)
        torso = tolerance(h[0], (self._stand_height[0], float("inf")), self._stand_height[0])
        pelvis = tolerance(h[1], (self._stand_height[1], float("inf")), self._stand_height[1])
        upright = tolerance(self._z_projection(ps)[:, 2], (_MIN_UPRIGHT_COSINE, float("inf")),
                            _MIN_UPRIGHT_COSINE + 1, sigmoid="linear", value_at_margin=0.0)
        touch = tolerance(jnp.sum(self._touch(ps)), (self._body_weight, float("inf")), self._body_weight,
                          sigmoid="linear", value_at_margin=0.9)
        return torso * pelvis * jnp.prod(upright) * touch

    def reward(self, ps: brax_physics.State, info: Mapping[str, jax.Array], action: jax.Array) -> jax.Array:
        """Standing factors, times the task's speed or fetch factors."""
        r = self._standing(ps)
        if self._speed is not None:
            speed = self._speed
            forward = tolerance(self._torso_com_velocity(ps)[0], (speed, 2 * speed), max(1.0, speed),
                                sigmoid="linear", value_at_margin=0.0)
            r = r * (4 * forward + 1) / 5
        if self._fetch:
            ball = ps.geom_xpos[self._ball_geom]
            bites = self.sites(ps, "upper_bite", "lower_bite")[0]
            to_mouth = 0.5 * jnp.sum(jnp.linalg.norm(bites - ball[None], axis=-1))
            to_target = jnp.linalg.norm(ball - ps.geom_xpos[self._target_geom])
            reach = (6 * tolerance(to_mouth, (0.0, self._bite_radius), 2.0, sigmoid="reciprocal") + 1) / 7
            # a fetched ball may be let go
            reach = jnp.where(to_target < 2 * self._target_radius, 1.0, reach)
            near = tolerance(to_target, (0.0, self._target_radius), self._floor_size, sigmoid="reciprocal")
            r = r * reach * (near + 1) / 2
        return r


ENV = Dog
