"""dm_control's finger domain: a two-link planar finger spins or turns a free hinged body."""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import Any, ClassVar

import brax_math
import brax_physics
import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from brax_envs.dm_control._suite import SuiteEnv, randomize_limited_and_rotational_joints, suite_model

TASKS = ("spin", "turn_easy", "turn_hard")
"""The finger tasks."""

TARGET_RADII = {"turn_easy": 0.07, "turn_hard": 0.03}
"""The target site's radius in the turn tasks."""

_SPIN_VELOCITY = 15.0
"""`spin` pays while the body turns at least this fast (rad/s, in the hinge's negative sense)."""
_SPIN_DAMPING = 0.03
"""`spin` lowers the spinner hinge's damping to this (dm_control sets it every episode)."""
_MAX_ATTEMPTS = 1000
"""Joint draws before settling for the last one (dm_control raises there; never in practice)."""

_XZ = np.array([0, 2])


class Finger(SuiteEnv):
    """Finger: a planar two-link finger (two motors) next to a body on a passive, damped hinge with
    friction loss, whose tip site marks its angle.

    Observation: `position` (proximal and distal angles, then the tip site's x, z relative to the
    spinner), `velocity` (proximal, distal, hinge), `touch` (log1p of the fingertip's two touch
    sensors) and, for turn, `target_position` (the target's x, z relative to the spinner) and
    `dist_to_target` (tip to target minus the target's radius). Reward (sparse): spin: 1 while the
    hinge turns at <= -15 rad/s; turn: 1 while the tip is within the target. Starts with the joints
    uniform (finger in range, hinge in [-pi, pi)) and drawn again while anything touches, at rest;
    turn also draws the target uniformly on the circle the tip sweeps: a world site that touches nothing, so
    its x, z live in `info["task"]["target"]`. 1000 control steps of 0.02 s (2 physics steps each).
    """

    domain = "finger"
    time_limit = 20.0
    control_timestep = 0.02
    # one Newton step with the full line search: at 2-4 the capped problems start each step further
    # off, and the finger ran slower than with dm_control's converged solve
    fast_solver: ClassVar[Mapping[str, int]] = {"iterations": 1, "ls_iterations": 50}

    def __init__(self, task: str = "spin", *, solver: str = "default", debug: bool = False) -> None:
        """Task `spin`, `turn_easy` or `turn_hard`."""
        if task not in TASKS:
            raise ValueError(f"unknown finger task {task!r}")
        model = suite_model("finger")
        hinge = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, "hinge")
        if task == "spin":
            model.dof_damping[model.jnt_dofadr[hinge]] = _SPIN_DAMPING
        super().__init__(task, model, solver=solver, debug=debug)
        self._turn = task != "spin"
        self._target_radius = TARGET_RADII.get(task, float(model.site_size[self.site_ids("target")[0], 0]))
        self._spinner = self.body_ids("spinner")[0]
        self._qpos = np.asarray([self.joint_qpos(j).start for j in ("proximal", "distal")])
        self._qvel = np.asarray([self.joint_qvel(j).start for j in ("proximal", "distal", "hinge")])
        self._hinge_v = self.joint_qvel("hinge").start
        data = mujoco.MjData(model)
        mujoco.mj_kinematics(model, data)
        # turn's targets lie on a circle about the hinge's anchor, of radius cap1's half-length plus
        # its radius (dm_control's choice)
        self._hinge_xz = np.asarray(data.xanchor[hinge, _XZ], np.float32)
        self._target_circle = float(np.sum(model.geom_size[self.geom_ids("cap1")[0]]))
        capsules = self.geom_ids("fingertip", "cap1", "cap2")
        self._capsule_body = np.asarray(model.geom_bodyid[capsules], np.int32)
        self._capsule_pos = jnp.asarray(model.geom_pos[capsules], jnp.float32)
        axes = np.zeros((len(capsules), 9))
        for i, g in enumerate(capsules):
            mujoco.mju_quat2Mat(axes[i], model.geom_quat[g])
        self._capsule_axis = jnp.asarray(axes.reshape(-1, 3, 3)[:, :, 2], jnp.float32)
        self._capsule_half = jnp.asarray(model.geom_size[capsules, 1], jnp.float32)
        self._capsule_radius = jnp.asarray(model.geom_size[capsules, 0], jnp.float32)

    def _capsule_segments(self, q: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(3, 2, 3) end points of the fingertip, cap1 and cap2 segments, and (3,) their radii."""
        x = brax_physics.forward_kinematics(self.sys, q)
        rot = x.rot[self._capsule_body]
        centre = x.pos[self._capsule_body] + brax_math.rotate(self._capsule_pos, rot)
        half = brax_math.rotate(self._capsule_axis, rot) * self._capsule_half[:, None]
        return jnp.stack([centre - half, centre + half], axis=1), self._capsule_radius

    def touching(self, q: jax.Array) -> jax.Array:
        """() bool: anything in contact at joint positions `q` (dm_control's `ncon > 0`)."""
        # Only the fingertip can reach the spinner's capsules (nothing reaches the floor, proximal
        # and fingertip are parent and child), so MuJoCo's contact count is positive exactly where
        # the fingertip's segment comes within the radii of cap1's or cap2's (finger_test checks it
        # against MuJoCo); this skips compiling the engine's cylinder colliders for every reset.
        seg, radius = self._capsule_segments(q)
        to_caps = jax.vmap(_segment_distance, in_axes=(None, None, 0, 0))
        dist = to_caps(seg[0, 0], seg[0, 1], seg[1:, 0], seg[1:, 1])
        return jnp.any(dist < radius[0] + radius[1:])

    def _joints(self, rng: jax.Array) -> jax.Array:
        """Joint angles drawn until nothing touches (dm_control's `_set_random_joint_angles`)."""
        q0 = jnp.asarray(self.sys.qpos0, jnp.float32)

        def draw(k: jax.Array) -> jax.Array:
            return randomize_limited_and_rotational_joints(self.model, k, q0)

        def cond(c: tuple[jax.Array, jax.Array, jax.Array, jax.Array]) -> jax.Array:
            return c[2] & (c[3] < _MAX_ATTEMPTS)

        def body(c: tuple[jax.Array, jax.Array, jax.Array, jax.Array]
                 ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
            key, k = jax.random.split(c[0])
            q = draw(k)
            return key, q, self.touching(q), c[3] + 1

        key, k = jax.random.split(rng)
        q = draw(k)
        _, q, _, _ = jax.lax.while_loop(cond, body, (key, q, self.touching(q), jnp.ones((), jnp.int32)))
        return q

    def initial_state(self, rng: jax.Array) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        """Random contact-free joints at rest; turn: a target angle uniform in [-pi, pi)."""
        k_t, k_q = jax.random.split(rng)
        q, qd = self._joints(k_q), jnp.zeros((self.sys.nv,), jnp.float32)
        if not self._turn:
            return q, qd, {}
        angle = jax.random.uniform(k_t, (), jnp.float32, -jnp.pi, jnp.pi)
        offset = self._target_circle * jnp.stack([jnp.sin(angle), jnp.cos(angle)])
        target = jnp.asarray(self._hinge_xz) + offset
        return q, qd, {"target": target}

    def task_info_from_physics(self, physics: Any) -> dict[str, jax.Array]:
        """turn: the target's x, z that dm_control wrote into the model."""
        if not self._turn:
            return {}
        target = np.asarray(physics.named.model.site_pos["target", ["x", "z"]])
        return {"target": jnp.asarray(target, jnp.float32)}

    def _tip(self, ps: brax_physics.State) -> jax.Array:
        """The tip site's x, z relative to the spinner's body origin."""
        pos, _ = self.sites(ps, "tip")
        return pos[0, _XZ] - ps.x.pos[self._spinner, _XZ]

    def _to_target(self, ps: brax_physics.State,
                   info: Mapping[str, jax.Array]) -> tuple[jax.Array, jax.Array]:
        """(target relative to the spinner, signed distance from the tip to the target's surface)."""
        target = info["target"] - ps.x.pos[self._spinner, _XZ]
        return target, jnp.linalg.norm(target - self._tip(ps)) - self._target_radius

    def observation(self, ps: brax_physics.State, info: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        """`position`, `velocity`, `touch`; turn also `target_position` and the scalar `dist_to_target`."""
        touch = jnp.concatenate([self.sensor(ps, "touchtop"), self.sensor(ps, "touchbottom")])
        obs = collections.OrderedDict([("position", jnp.concatenate([ps.q[self._qpos], self._tip(ps)])),
                                       ("velocity", ps.qd[self._qvel]), ("touch", jnp.log1p(touch))])
        if self._turn:
            obs["target_position"], obs["dist_to_target"] = self._to_target(ps, info)
        return obs

    def reward(self, ps: brax_physics.State, info: Mapping[str, jax.Array], action: jax.Array) -> jax.Array:
        """spin: 1 while the hinge turns at <= -15 rad/s; turn: 1 while the tip is within the target."""
        if self._turn:
            return (self._to_target(ps, info)[1] <= 0).astype(jnp.float32)
        return (ps.qd[self._hinge_v] <= -_SPIN_VELOCITY).astype(jnp.float32)


def _segment_distance(p1: jax.Array, q1: jax.Array, p2: jax.Array, q2: jax.Array) -> jax.Array:
    """() distance between segments p1-q1 and p2-q2 (both of nonzero length)."""
    d1, d2, r = q1 - p1, q2 - p2, p1 - p2
    a, e, b = jnp.dot(d1, d1), jnp.dot(d2, d2), jnp.dot(d1, d2)
    c, f = jnp.dot(d1, r), jnp.dot(d2, r)
    den = a * e - b * b
    # closest point parameters of the infinite lines, then clamped onto the segments in turn
    parallel = den <= 1e-12 * a * e
    s = jnp.where(parallel, 0.0, jnp.clip((b * f - c * e) / jnp.where(parallel, 1.0, den), 0.0, 1.0))
    t = (b * s + f) / e
    s = jnp.where(t < 0, jnp.clip(-c / a, 0.0, 1.0), jnp.where(t > 1, jnp.clip((b - c) / a, 0.0, 1.0), s))
    t = jnp.clip(t, 0.0, 1.0)
    dist: jax.Array = jnp.linalg.norm(p1 + s * d1 - p2 - t * d2)
    return dist


ENV = Finger
