"""dm_control's manipulator domain: a planar arm with a two-fingered hand brings a ball or peg to a target."""

from __future__ import annotations

import collections
import math
from collections.abc import Mapping
from typing import Any, ClassVar

import brax_math
import brax_physics
import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from brax_envs.dm_control._suite import SuiteEnv, suite_module
from brax_envs.dm_control.rewards import tolerance

ARM_JOINTS = ("arm_root", "arm_shoulder", "arm_elbow", "arm_wrist",
              "finger", "fingertip", "thumb", "thumbtip")
"""The arm's joints, in the order of the `arm_pos` and `arm_vel` observations."""
TOUCH_SENSORS = ("palm_touch", "finger_touch", "thumb_touch", "fingertip_touch", "thumbtip_touch")
"""The hand's touch sensors, in the order of the `touch` observation."""
TASKS = ("bring_ball", "bring_peg", "insert_ball", "insert_peg")
"""The domain's tasks."""

_CLOSE = 0.01  # metres: a prop this near its target counts as there
_P_IN_HAND = 0.1  # probability of an episode starting with the prop at the grasp site
_P_IN_TARGET = 0.1  # probability of an episode starting with the prop on its target
_MAX_DRAWS = 100  # redraws of a penetrating initial state (dm_control needs about 5 on average)


def manipulator_model(use_peg: bool, insert: bool) -> mujoco.MjModel:
    """dm_control's manipulator model with the task's props; the receptacle of an insert task (a static
    body that dm_control moves by editing the model each episode) is made a mocap body, so that each
    episode can place it without a model of its own."""
    xml, assets = suite_module("manipulator").make_model(use_peg, insert)
    spec = mujoco.MjSpec.from_string(xml.decode() if isinstance(xml, bytes) else xml, assets)
    if insert:
        spec.body("slot" if use_peg else "cup").mocap = True
    return spec.compile()


class Manipulator(SuiteEnv):
    """Manipulator: a 4-link planar arm (root, shoulder, elbow, wrist) with a thumb and finger.

    Observation: `arm_pos` (sin, cos of the 8 arm joints), `arm_vel`, `touch` (log1p of the hand's
    5 touch sensors), `hand_pos`, `object_pos`, `target_pos` ((x, z, qw, qy) 2-d poses) and
    `object_vel`. Reward: the ball at its target (bring/insert_ball), or the peg at its target or
    held (bring/insert_peg), each a tolerance of 1 cm with a 2 cm margin. Episodes start collision
    free with the prop in the hand (10%), on the target (10%) or anywhere; insert tasks put the
    receptacle (cup or slot) at the target. 1000 control steps of 0.01 s.
    """

    domain = "manipulator"
    time_limit = 10.0
    control_timestep = 0.01
    fast_solver: ClassVar[Mapping[str, int]] = {"iterations": 3, "ls_iterations": 6}

    def __init__(self, task: str = "bring_ball", *, solver: str = "default", debug: bool = False) -> None:
        """Task `bring_ball`, `bring_peg`, `insert_ball` or `insert_peg`."""
        if task not in TASKS:
            raise ValueError(f"unknown manipulator task {task!r}; tasks: {TASKS}")
        self._use_peg = task.endswith("_peg")
        self._insert = task.startswith("insert")
        super().__init__(task, manipulator_model(self._use_peg, self._insert), solver=solver, debug=debug)
        m = self.model
        prop = "peg" if self._use_peg else "ball"
        self._prop = prop
        self._target = f"target_{prop}"
        self._receptacle = "slot" if self._use_peg else "cup"
        self._arm_qpos = np.asarray([self.joint_qpos(j).start for j in ARM_JOINTS], np.int32)
        self._arm_qvel = np.asarray([self.joint_qvel(j).start for j in ARM_JOINTS], np.int32)
        self._prop_qpos = np.asarray([self.joint_qpos(f"{prop}_{d}").start for d in "xzy"], np.int32)
        self._prop_qvel = np.asarray([self.joint_qvel(f"{prop}_{d}").start for d in "xzy"], np.int32)
        jids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in ARM_JOINTS]
        limited = m.jnt_limited[jids].astype(bool)
        self._arm_low = np.where(limited, m.jnt_range[jids, 0], -np.pi).astype(np.float32)
        self._arm_high = np.where(limited, m.jnt_range[jids, 1], np.pi).astype(np.float32)
        self._hand, self._target_body = self.body_ids("hand", self._target)
        grasp = int(self.site_ids("grasp")[0])
        self._grasp_pos = np.asarray(m.site_pos[grasp], np.float32)
        self._grasp_rot = np.asarray(brax_math.quat_to_mat(jnp.asarray(m.site_quat[grasp], jnp.float32)))
        self._target_y = float(m.body_pos[self._target_body, 1])
        target_sites = ("target_peg", "target_peg_tip") if self._use_peg else ("target_ball",)
        self._target_sites = {s: np.asarray(m.site_pos[self.site_ids(s)[0]], np.float32)
                              for s in target_sites}
        self._receptacle_body = int(self.body_ids(self._receptacle)[0]) if self._insert else 0
        self._receptacle_y = float(m.body_pos[self._receptacle_body, 1])

    # ---- the episode ----

    def _receptacle_pose(self, target: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(1, 3) mocap position and (1, 4) orientation of the receptacle at `target` (x, z, qw, qy)."""
        zero = jnp.zeros((), target.dtype)
        pos = jnp.stack([target[0], zero + self._receptacle_y, target[1]])[None]
        quat = jnp.stack([target[2], zero, target[3], zero])[None]
        return pos, quat

    def _draw(self, rng: jax.Array, qd: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        """One draw of dm_control's loop: (q, qd, target (x, z, qw, qy), penetrating)."""
        ks = jax.random.split(rng, 9)
        q = jnp.asarray(self.sys.qpos0, jnp.float32)
        q = q.at[self._arm_qpos].set(jax.random.uniform(ks[0], (len(ARM_JOINTS),), jnp.float32,
                                                        self._arm_low, self._arm_high))
        # the hand is symmetric: the finger mirrors the thumb
        q = q.at[self._arm_qpos[4]].set(q[self._arm_qpos[6]])
        tx = jax.random.uniform(ks[1], (), jnp.float32, -0.4, 0.4)
        tz = jax.random.uniform(ks[2], (), jnp.float32, 0.1, 0.4)
        half_range = math.pi / 3 if self._insert else math.pi
        ta = jax.random.uniform(ks[3], (), jnp.float32, -half_range, half_range)
        target = jnp.stack([tx, tz, jnp.cos(ta / 2), jnp.sin(ta / 2)])
        p_kind = jnp.asarray([_P_IN_HAND, _P_IN_TARGET, 1 - _P_IN_HAND - _P_IN_TARGET])
        kind = jax.random.choice(ks[4], 3, p=p_kind)
        # in the hand: at the grasp site, turned with it (the arm's new pose)
        x = brax_physics.forward_kinematics(self.sys, q)
        hand_rot = brax_math.quat_to_mat(x.rot[self._hand])
        grasp = x.pos[self._hand] + hand_rot @ self._grasp_pos
        grasp_rot = hand_rot @ self._grasp_rot
        in_hand = jnp.stack([grasp[0], grasp[2], jnp.pi - jnp.arctan2(grasp_rot[2, 0], grasp_rot[0, 0])])
        in_target = jnp.stack([tx, tz, ta])
        anywhere = jnp.stack([jax.random.uniform(ks[5], (), jnp.float32, -0.5, 0.5),
                              jax.random.uniform(ks[6], (), jnp.float32, 0.0, 0.7),
                              jax.random.uniform(ks[7], (), jnp.float32, 0.0, 2 * jnp.pi)])
        prop = jnp.stack([in_hand, in_target, anywhere])[kind]
        q = q.at[self._prop_qpos].set(prop)
        # only a prop placed anywhere gets a velocity; dm_control keeps one set by a rejected draw
        vx = jax.random.uniform(ks[8], (), jnp.float32, -5.0, 5.0)
        qd = jnp.where(kind == 2, qd.at[self._prop_qvel[0]].set(vx), qd)
        if self._insert:
            pos, quat = self._receptacle_pose(target)
            contact = brax_physics.contacts(self.sys, q, pos, quat)
        else:
            contact = brax_physics.contacts(self.sys, q)
        return q, qd, target, jnp.any(contact.active)

    def initial_state(self, rng: jax.Array) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        """dm_control's draw (arm joints uniform in range, finger = thumb; target x in ±0.4, z in
        [0.1, 0.4], angle in ±pi (insert: ±pi/3); prop in hand, on target, or uniform with an x
        velocity in ±5), redrawn while anything penetrates (at most 100 draws)."""
        k0, rng = jax.random.split(rng)
        first = self._draw(k0, jnp.zeros(self.sys.nv, jnp.float32))

        Carry = tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array, jax.Array]

        def again(carry: Carry) -> Carry:
            i, key, _, qd, _, _ = carry
            key, k = jax.random.split(key)
            return (i + 1, key, *self._draw(k, qd))

        def penetrating(carry: Carry) -> jax.Array:
            return carry[-1] & (carry[0] < _MAX_DRAWS)

        start: Carry = (jnp.ones((), jnp.int32), rng, *first)
        _, _, q, qd, target, _ = jax.lax.while_loop(penetrating, again, start)
        return q, qd, {"target": target}

    def pipeline_state_init(self, q: jax.Array, qd: jax.Array,
                            info: Mapping[str, jax.Array]) -> brax_physics.State:
        """The physics state, with an insert task's receptacle (mocap) at the target."""
        if not self._insert:
            return self.pipeline_init(q, qd)
        pos, quat = self._receptacle_pose(jnp.asarray(info["target"], jnp.float32))
        # init starts mocap bodies at their model pose: so its contacts and sensors see the receptacle
        # where it is, it is given a System with that pose
        sys = self.sys.replace(body_pos=self.sys.body_pos.at[self._receptacle_body].set(pos[0]),
                               body_quat=self.sys.body_quat.at[self._receptacle_body].set(quat[0]))
        return brax_physics.init(sys, q, qd)

    def task_info_from_physics(self, physics: Any) -> dict[str, jax.Array]:
        """The target's (x, z, qw, qy) that dm_control wrote into its model."""
        pos = physics.named.model.body_pos[self._target]
        quat = physics.named.model.body_quat[self._target]
        return {"target": jnp.asarray([pos[0], pos[2], quat[0], quat[2]], jnp.float32)}

    # ---- observation and reward ----

    def _pose_2d(self, ps: brax_physics.State, body: int) -> jax.Array:
        """(x, z, qw, qy) of a body's frame."""
        pos, rot = ps.x.pos[body], ps.x.rot[body]
        return jnp.stack([pos[0], pos[2], rot[0], rot[2]])

    def observation(self, ps: brax_physics.State, info: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        """`arm_pos` (8, 2), `arm_vel` (8,), `touch` (5,), `hand_pos`, `object_pos` (4,),
        `object_vel` (3,), `target_pos` (4,)."""
        arm = ps.q[self._arm_qpos]
        touch = jnp.concatenate([self.sensor(ps, s) for s in TOUCH_SENSORS])
        # ordered: jax sorts a plain dict's keys, dm_control's order is its own
        return collections.OrderedDict([
            ("arm_pos", jnp.stack([jnp.sin(arm), jnp.cos(arm)], axis=-1)),
            ("arm_vel", ps.qd[self._arm_qvel]),
            ("touch", jnp.log1p(touch)),
            ("hand_pos", self._pose_2d(ps, int(self._hand))),
            ("object_pos", self._pose_2d(ps, int(self.body_ids(self._prop)[0]))),
            ("object_vel", ps.qd[self._prop_qvel]),
            ("target_pos", jnp.asarray(info["target"], jnp.float32)),
        ])

    def _target_site(self, info: Mapping[str, jax.Array], name: str) -> jax.Array:
        """World position of a site of the (static, visual) target body."""
        t = jnp.asarray(info["target"], jnp.float32)
        zero = jnp.zeros((), jnp.float32)
        rot = brax_math.quat_to_mat(jnp.stack([t[2], zero, t[3], zero]))
        return jnp.stack([t[0], zero + self._target_y, t[1]]) + rot @ self._target_sites[name]

    def reward(self, ps: brax_physics.State, info: Mapping[str, jax.Array], action: jax.Array) -> jax.Array:
        """Ball: near its target; peg: max(near its target (centre and tip), held (grasp and pinch) / 3)."""
        def close(a: jax.Array, b: jax.Array) -> jax.Array:
            return tolerance(jnp.linalg.norm(a - b), (0.0, _CLOSE), 2 * _CLOSE)

        if not self._use_peg:
            ball = self.sites(ps, "ball")[0][0]
            return close(ball, self._target_site(info, "target_ball"))
        peg, tip, peg_grasp, peg_pinch, grasp, pinch = self.sites(
            ps, "peg", "peg_tip", "peg_grasp", "peg_pinch", "grasp", "pinch")[0]
        grasping = (close(peg_grasp, grasp) + close(peg_pinch, pinch)) / 2
        bringing = (close(peg, self._target_site(info, "target_peg"))
                    + close(tip, self._target_site(info, "target_peg_tip"))) / 2
        return jnp.maximum(bringing, grasping / 3)


ENV = Manipulator
