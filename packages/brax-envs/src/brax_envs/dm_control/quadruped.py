"""dm_control's quadruped domain: a four-legged robot that walks, runs, escapes a bowl or fetches a ball."""

from __future__ import annotations

import collections
import math
from collections.abc import Mapping
from typing import Any, ClassVar, cast

import brax_math
import brax_physics
import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from brax_envs.base import State
from brax_envs.dm_control._suite import PENETRATION_SLACK, SuiteEnv, penetrating, subtree_mask, suite_module
from brax_envs.dm_control.rewards import tolerance

TASKS = ("walk", "run", "escape", "fetch")
"""The quadruped tasks of dm_control's suite."""
SPEEDS = {"walk": 0.5, "run": 5.0}
"""Target forward speed (m/s) of the move tasks."""
TIME_LIMIT = 20.0
"""dm_control's episode length in seconds."""
BUMP_SCALE = 2.0
"""Spatial scale (m) of escape's random terrain bumps."""
SMOOTHNESS = 0.15
"""Lower bound of escape's bump heights (0: maximally bumpy, 1: flat)."""
LIFT_STEP = 0.01
"""dm_control raises a new episode's quadruped from z = 0 in steps of this many metres until no contact."""


def quadruped_model(task: str) -> mujoco.MjModel:
    """dm_control's quadruped MjModel of `task`, built by its `make_model` (floor size, terrain,
    rangefinders, walls and ball as the task's constructor chooses them)."""
    mod = suite_module("quadruped")
    choices: dict[str, dict[str, Any]] = {
        "walk": {"floor_size": TIME_LIMIT * SPEEDS["walk"]},
        "run": {"floor_size": TIME_LIMIT * SPEEDS["run"]},
        "escape": {"floor_size": 40, "terrain": True, "rangefinders": True},
        "fetch": {"walls_and_ball": True},
    }
    options = choices[task]
    xml = mod.make_model(**options)
    return mujoco.MjModel.from_xml_string(xml.decode() if isinstance(xml, bytes) else xml, mod.common.ASSETS)


def zoom_matrix(n_in: int, n_out: int) -> np.ndarray:
    """(n_out, n_in) matrix Z with `scipy.ndimage.zoom(x, n_out / n_in) == Z @ x @ Z.T` for square x
    (the cubic spline zoom dm_control smooths its bumps with is linear and separable)."""
    from scipy import ndimage  # a dependency of dm_control, which the model needs anyway

    eye = np.eye(n_in)
    return np.stack([ndimage.zoom(eye[j], n_out / float(n_in)) for j in range(n_in)], axis=1)


class Quadruped(SuiteEnv):
    """Quadruped: a torso on four three-hinge legs with filtered position actuators.

    Observation: `egocentric_state` (hinge angles, hinge velocities, actuator activations),
    `torso_velocity` (velocimeter), `torso_upright`, `imu` (accelerometer, gyro), `force_torque`
    (arcsinh of the toe force and torque sensors); escape adds `origin` (in the torso frame) and
    `rangefinder` (tanh of 20 ranges, 1 where a ray misses); fetch adds `ball_state` and
    `target_position` (torso frame). Reward: upright · forward speed (walk, run), upright within 20°
    · distance from the origin (escape), upright · reaching the ball · bringing it to the target
    (fetch). Episodes start with a random orientation at the lowest contact-free height (fetch:
    random heading and position, ball thrown from 2 m). Escape draws a new bumpy bowl terrain
    every episode: it lives in `info["task"]["hfield"]` and is the System's `hfield_data` for that
    episode's physics. 1000 control steps of 0.02 s.
    """

    domain = "quadruped"
    time_limit = TIME_LIMIT
    control_timestep = 0.02
    fast_solver: ClassVar[Mapping[str, int]] = {"iterations": 3, "ls_iterations": 6}
    max_lifts: ClassVar[int] = 1000
    """Bound on the contact tests of a reset's height search (dm_control gives up after 10000 steps)."""

    def __init__(self, task: str = "walk", *, solver: str = "default", debug: bool = False) -> None:
        """Task `walk`, `run`, `escape` or `fetch` (each on its own variant of the model)."""
        if task not in TASKS:
            raise ValueError(f"unknown quadruped task {task!r}; tasks: {TASKS}")
        super().__init__(task, quadruped_model(task), solver=solver, debug=debug)
        m = self.model
        self._torso = int(self.body_ids("torso")[0])
        hinges = np.flatnonzero(m.jnt_type == mujoco.mjtJoint.mjJNT_HINGE)
        self._hinge_q = np.asarray(m.jnt_qposadr[hinges], np.int32)
        self._hinge_v = np.asarray(m.jnt_dofadr[hinges], np.int32)
        site = int(self.site_ids("torso")[0])
        if int(m.sensor_objid[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SENSOR, "velocimeter")]) != site:
            raise ValueError("dm_control's quadruped: the velocimeter is expected on site 'torso'")
        # the imu reads dm_control's gyro and accelerometer sensors in sensor-id order
        self._imu = self._sensors_of(mujoco.mjtSensor.mjSENS_GYRO, mujoco.mjtSensor.mjSENS_ACCELEROMETER)
        force_torque = self._sensors_of(mujoco.mjtSensor.mjSENS_FORCE, mujoco.mjtSensor.mjSENS_TORQUE)
        self._force_torque = np.concatenate(
            [np.arange(m.sensor_adr[i], m.sensor_adr[i] + m.sensor_dim[i]) for i in force_torque]
        ).astype(np.int32)
        self._rf_sites = np.asarray(
            m.sensor_objid[self._sensors_of(mujoco.mjtSensor.mjSENS_RANGEFINDER)], np.int32)
        self._robot_geoms(m)
        self._escape = task == "escape"
        self._fetch = task == "fetch"
        if self._escape:
            terrain = int(mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_HFIELD, "terrain"))
            res = int(m.hfield_nrow[terrain])
            if res != int(m.hfield_ncol[terrain]) or m.nhfield != 1:
                raise ValueError("dm_control's escape expects one square height field")
            self.terrain_size = float(m.hfield_size[terrain, 0])
            bumps = int(2 * self.terrain_size / BUMP_SCALE)
            grid = np.linspace(-1, 1, res)
            radius = np.clip(np.hypot(grid[None, :], grid[:, None]), 0.04, 1)
            self._bowl = jnp.asarray(0.5 - np.cos(2 * np.pi * radius) / 2, jnp.float32)
            self._zoom = jnp.asarray(zoom_matrix(bumps, res), jnp.float32)
            self._n_bumps = bumps
        if self._fetch:
            self._ball = int(self.body_ids("ball")[0])
            self._ball_q, self._ball_v = self.joint_qpos("ball_root"), self.joint_qvel("ball_root")
            floor = float(m.geom_size[self.geom_ids("floor")[0], 0])
            self._spawn = 0.9 * floor
            self._arena = floor * math.sqrt(2)
            workspace, ball = self.site_ids("workspace")[0], self.geom_ids("ball")[0]
            self._reach = float(m.site_size[workspace, 0] + m.geom_size[ball, 0])
            self._target_radius = float(m.site_size[self.site_ids("target")[0], 0])

    def _robot_geoms(self, m: mujoco.MjModel) -> None:
        """The quadruped's geoms in its root frame at qpos0 (for `_lowest_point`; the floor must be z = 0)."""
        floor = int(self.geom_ids("floor")[0])
        if (int(m.geom_type[floor]) != mujoco.mjtGeom.mjGEOM_PLANE or np.any(m.geom_pos[floor] != 0)
                or np.any(m.geom_quat[floor] != [1, 0, 0, 0])):
            raise ValueError("dm_control's quadruped: the floor is expected to be the plane z = 0")
        data = mujoco.MjData(m)
        data.qpos[:] = m.qpos0
        data.qpos[:7] = [0, 0, 0, 1, 0, 0, 0]
        mujoco.mj_kinematics(m, data)
        robot = np.flatnonzero(np.isin(m.geom_bodyid, np.flatnonzero(subtree_mask(m, self._torso))))
        kinds = (mujoco.mjtGeom.mjGEOM_SPHERE, mujoco.mjtGeom.mjGEOM_CAPSULE, mujoco.mjtGeom.mjGEOM_ELLIPSOID,
                 mujoco.mjtGeom.mjGEOM_CYLINDER, mujoco.mjtGeom.mjGEOM_BOX)
        if not np.all(np.isin(m.geom_type[robot], [int(k) for k in kinds])):
            raise ValueError("dm_control's quadruped: unexpected geom types for the height search")
        self._geom_pos = jnp.asarray(data.geom_xpos[robot], jnp.float32)
        self._geom_mat = jnp.asarray(data.geom_xmat[robot].reshape(-1, 3, 3), jnp.float32)
        self._geom_size = jnp.asarray(m.geom_size[robot], jnp.float32)
        self._geom_type = jnp.asarray(m.geom_type[robot], jnp.int32)

    def _sensors_of(self, *types: int) -> np.ndarray:
        """Ids of the sensors of `types`, in id order."""
        return np.flatnonzero(np.isin(self.model.sensor_type, [int(t) for t in types])).astype(np.int32)

    def _episode_sys(self, sys: brax_physics.System, info: Mapping[str, jax.Array]) -> brax_physics.System:
        """`sys` with the episode's terrain (escape) in place of the model's height field."""
        return sys.replace(hfield_data=info["hfield"]) if self._escape else sys

    # ---- episodes ----

    def _lift(self, sys: brax_physics.System, q: jax.Array) -> jax.Array:
        """`q` with the root at the lowest z = k·LIFT_STEP (k >= 0) without contacts, as dm_control's
        `_find_non_contacting_height`. A contact `d` deep persists for lifts below `d` (signed distance
        changes no faster than a translation), so the search skips those (less one step, for round-off)."""

        def lifted(k: jax.Array) -> jax.Array:
            return q.at[2].set(k.astype(q.dtype) * LIFT_STEP)

        def search(c: tuple[jax.Array, jax.Array, jax.Array, jax.Array]) -> jax.Array:
            return c[1] & (c[3] < self.max_lifts)

        def lift(c: tuple[jax.Array, jax.Array, jax.Array, jax.Array]
                 ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
            k, _, depth, n = c
            k = k + jnp.maximum(1, jnp.floor(depth / LIFT_STEP).astype(jnp.int32) - 1)
            con = brax_physics.contacts(sys, lifted(k))
            depth = jnp.max(jnp.where(con.active, -con.dist, 0.0), initial=0.0)
            return k, penetrating(con), depth, n + 1

        # below the floor bound every lift touches the floor: start there, sparing the collision
        # tests of deep penetrations (slow ones against a height field)
        start_depth = jnp.maximum(-self._lowest_point(q[3:7]) - PENETRATION_SLACK, 0.0)
        start = (jnp.full((), -1, jnp.int32), jnp.ones((), bool), start_depth, jnp.zeros((), jnp.int32))
        k, _, _, _ = jax.lax.while_loop(search, lift, start)
        return lifted(k)

    def _lowest_point(self, quat: jax.Array) -> jax.Array:
        """() lowest z of the quadruped's geoms with its root at the origin with orientation `quat` and
        its hinges at qpos0 (as dm_control's height search holds them)."""
        rot = brax_math.quat_to_mat(quat)
        centre = (self._geom_pos @ rot.T)[:, 2]
        up = jnp.einsum("j,gji->gi", rot[2], self._geom_mat)  # world z in each geom's frame
        s, kind, g = self._geom_size, self._geom_type, mujoco.mjtGeom
        along = jnp.abs(up[:, 2])
        radial = jnp.sqrt(jnp.maximum(1 - along * along, 0.0))
        # each geom's support along -z (its half-extent straight down), by type
        extent = jnp.where(kind == int(g.mjGEOM_SPHERE), s[:, 0], 0.0)
        extent += jnp.where(kind == int(g.mjGEOM_CAPSULE), s[:, 0] + s[:, 1] * along, 0.0)
        extent += jnp.where(kind == int(g.mjGEOM_ELLIPSOID), jnp.linalg.norm(s * up, axis=-1), 0.0)
        extent += jnp.where(kind == int(g.mjGEOM_CYLINDER), s[:, 0] * radial + s[:, 1] * along, 0.0)
        extent += jnp.where(kind == int(g.mjGEOM_BOX), jnp.sum(s * jnp.abs(up), axis=-1), 0.0)
        return jnp.min(centre - extent)

    def terrain(self, bumps: jax.Array) -> jax.Array:
        """(nrow·ncol,) escape's height field data from (n, n) bump heights (n = terrain width / 2 m):
        a sinusoidal bowl times the bumps zoomed to the grid by cubic splines, as dm_control's."""
        if not self._escape:
            raise ValueError(f"quadruped {self.task!r} has no terrain (only escape does)")
        return (self._bowl * (self._zoom @ bumps @ self._zoom.T)).reshape(-1)

    def initial_state(self, rng: jax.Array) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        """Move tasks and escape: a uniformly random orientation (escape: on a new terrain) at the
        origin; fetch: a random heading and position within 90% of the floor, then the ball at 2 m
        over a random point with a random horizontal velocity (5 m/s normal)."""
        k_terrain, k_quat, k_xy, k_ball, k_throw = jax.random.split(rng, 5)
        q = self.sys.qpos0
        qd = jnp.zeros(self.sys.nv, q.dtype)
        info: dict[str, jax.Array] = {}
        if self._escape:
            shape = (self._n_bumps, self._n_bumps)
            info["hfield"] = self.terrain(jax.random.uniform(k_terrain, shape, q.dtype, SMOOTHNESS, 1.0))
        if self._fetch:
            azimuth = jax.random.uniform(k_quat, (), q.dtype, 0.0, 2 * jnp.pi)
            quat = jnp.stack([jnp.cos(azimuth / 2), jnp.zeros_like(azimuth), jnp.zeros_like(azimuth),
                              jnp.sin(azimuth / 2)])
            q = q.at[:2].set(jax.random.uniform(k_xy, (2,), q.dtype, -self._spawn, self._spawn))
        else:
            quat = jax.random.normal(k_quat, (4,), q.dtype)
            quat = quat / jnp.linalg.norm(quat)
        q = self._lift(self._episode_sys(self.sys, info), q.at[3:7].set(quat))
        if self._fetch:
            bq, bv = self._ball_q.start, self._ball_v.start
            ball = jax.random.uniform(k_ball, (2,), q.dtype, -self._spawn, self._spawn)
            q = q.at[bq:bq + 3].set(jnp.concatenate([ball, jnp.full((1,), 2.0, q.dtype)]))
            qd = qd.at[bv:bv + 2].set(5 * jax.random.normal(k_throw, (2,), q.dtype))
        return q, qd, info

    def pipeline_state_init(self, q: jax.Array, qd: jax.Array,
                            info: Mapping[str, jax.Array]) -> brax_physics.State:
        """The physics state at `q`, `qd` on the episode's terrain."""
        return brax_physics.init(self._episode_sys(self.sys, info), q, qd)

    def step(self, state: State, action: jax.Array) -> State:
        """One control step (escape: on the episode's terrain)."""
        env = self
        if self._escape:
            env = cast(Quadruped, self.with_sys(self._episode_sys(self.sys, state.info["task"])))
        return SuiteEnv.step(env, state, action)

    def task_info_from_physics(self, physics: Any) -> dict[str, jax.Array]:
        """Escape's terrain: the model's `hfield_data`, which dm_control redraws every episode."""
        if not self._escape:
            return {}
        return {"hfield": jnp.asarray(np.array(physics.model.hfield_data), jnp.float32)}

    # ---- observation and reward ----

    def _torso_frame(self, ps: brax_physics.State) -> tuple[jax.Array, jax.Array]:
        return ps.x.pos[self._torso], brax_math.quat_to_mat(ps.x.rot[self._torso])

    def _torso_site_motion(self, ps: brax_physics.State) -> tuple[jax.Array, jax.Array]:
        """(velocimeter, gyro) of site 'torso' at `ps`: its linear and angular velocity in its frame."""
        pos, mat = self.sites(ps, "torso")
        body = self._torso
        ang = ps.xd.ang[body]
        lin = ps.xd.vel[body] + brax_math.cross(ang, pos[0] - ps.x.pos[body])
        return mat[0].T @ lin, mat[0].T @ ang

    def _upright(self, ps: brax_physics.State) -> jax.Array:
        return self._torso_frame(ps)[1][2, 2]

    def _rangefinder(self, ps: brax_physics.State, info: Mapping[str, jax.Array]) -> jax.Array:
        """Rangefinder readings at `ps` (rays along each site's z axis, the torso excluded), squashed."""
        sys = self._episode_sys(self.sys, info)
        pos, mat = brax_physics.sites(sys, ps, [self.sys.site_names[int(s)] for s in self._rf_sites])
        body = int(self.model.site_bodyid[int(self._rf_sites[0])])

        def cast_ray(p: jax.Array, v: jax.Array) -> jax.Array:
            return brax_physics.ray(sys, ps, p, v, bodyexclude=body).dist

        dist = jax.vmap(cast_ray)(pos, mat[:, :, 2])
        return jnp.where(dist == -1.0, 1.0, jnp.tanh(dist))

    def observation(self, ps: brax_physics.State, info: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        """The common observations, then escape's or fetch's (an OrderedDict, in dm_control's order)."""
        velocimeter, gyro = self._torso_site_motion(ps)
        imu = [gyro if int(self.model.sensor_type[i]) == mujoco.mjtSensor.mjSENS_GYRO
               else self.sensor(ps, self.sys.sensor_names[int(i)]) for i in self._imu]
        pos, mat = self._torso_frame(ps)
        obs = collections.OrderedDict(
            egocentric_state=jnp.concatenate([ps.q[self._hinge_q], ps.qd[self._hinge_v], ps.act]),
            torso_velocity=velocimeter,
            torso_upright=mat[2, 2],
            imu=jnp.concatenate(imu),
            force_torque=jnp.arcsinh(ps.sensordata[self._force_torque]),
        )
        if self._escape:
            obs["origin"] = -pos @ mat
            obs["rangefinder"] = self._rangefinder(ps, info)
        if self._fetch:
            ball_v = ps.qd[self._ball_v]
            rows = jnp.stack([ps.x.pos[self._ball] - pos, ball_v[:3] - ps.qd[:3], ball_v[3:]])
            obs["ball_state"] = (rows @ mat).reshape(-1)
            obs["target_position"] = (self.sites(ps, "target")[0][0] - pos) @ mat
        return obs

    def reward(self, ps: brax_physics.State, info: Mapping[str, jax.Array], action: jax.Array) -> jax.Array:
        """Upright (within 20° for escape) times the task's term."""
        deviation = math.cos(math.radians(20.0 if self._escape else 0.0))
        upright = tolerance(self._upright(ps), (deviation, float("inf")), sigmoid="linear",
                            margin=1 + deviation, value_at_margin=0)
        if self._escape:
            workspace = self.sites(ps, "workspace")[0][0]
            away = tolerance(jnp.linalg.norm(workspace), (self.terrain_size, float("inf")),
                             margin=self.terrain_size, value_at_margin=0, sigmoid="linear")
            return upright * away
        if self._fetch:
            workspace, target = self.sites(ps, "workspace", "target")[0]
            ball = ps.x.pos[self._ball]
            reach = tolerance(jnp.linalg.norm(workspace[:2] - ball[:2]), (0.0, self._reach), sigmoid="linear",
                              margin=self._arena, value_at_margin=0)
            fetch = tolerance(jnp.linalg.norm(target[:2] - ball[:2]), (0.0, self._target_radius),
                              sigmoid="linear", margin=self._arena, value_at_margin=0)
            return upright * reach * (0.5 + 0.5 * fetch)
        speed = SPEEDS[self.task]
        forward = tolerance(self._torso_site_motion(ps)[0][0], (speed, float("inf")), margin=speed,
                            value_at_margin=0.5, sigmoid="linear")
        return upright * forward


ENV = Quadruped
