"""dm_control's stacker domain: a planar arm with a two-fingered hand stacks boxes onto a target."""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import Any, ClassVar

import brax_physics
import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from brax_envs.dm_control._suite import SuiteEnv, suite_module
from brax_envs.dm_control.manipulator import ARM_JOINTS
from brax_envs.dm_control.rewards import tolerance

TASKS = {"stack_2": 2, "stack_4": 4}
"""The domain's tasks and their numbers of boxes."""

_CLOSE = 0.01  # metres: the hand this much beyond 10 cm of the target counts as away from it
_MAX_DRAWS = 100  # redraws of a penetrating initial state (dm_control needs about 5 on average)


def stacker_model(n_boxes: int) -> mujoco.MjModel:
    """dm_control's stacker model with `n_boxes` boxes."""
    xml, assets = suite_module("stacker").make_model(n_boxes)
    return mujoco.MjModel.from_xml_string(xml.decode() if isinstance(xml, bytes) else xml, assets)


class Stacker(SuiteEnv):
    """Stacker: the manipulator's arm and `n` boxes (2 or 4) free in the plane.

    Observation: `arm_pos` (sin, cos of the 8 arm joints), `arm_vel`, `touch` (log1p of the hand's
    5 touch sensors), `hand_pos` ((x, z, qw, qy)), `box_pos` ((n, 4) poses), `box_vel` (x, angle, z
    velocities of each box), `target_pos` ((x, z)). Reward: some box near the target (a gaussian of
    margin two box sizes) with the hand at least 10 cm from it. Episodes start collision free: arm
    joints uniform, boxes uniform in a region, the target at a random x and at the height of the
    first, second, ... n-th box of a stack. 1000 control steps of 0.01 s.
    """

    domain = "stacker"
    time_limit = 10.0
    control_timestep = 0.01
    fast_solver: ClassVar[Mapping[str, int]] = {"iterations": 3, "ls_iterations": 6}

    def __init__(self, task: str = "stack_2", *, solver: str = "default", debug: bool = False) -> None:
        """Task `stack_2` or `stack_4`."""
        if task not in TASKS:
            raise ValueError(f"unknown stacker task {task!r}; tasks: {tuple(TASKS)}")
        n = TASKS[task]
        super().__init__(task, stacker_model(n), solver=solver, debug=debug)
        m = self.model
        self._n_boxes = n
        self._boxes = self.body_ids(*[f"box{i}" for i in range(n)])
        self._box_sites = tuple(f"box{i}" for i in range(n))
        self._arm_qpos = np.asarray([self.joint_qpos(j).start for j in ARM_JOINTS], np.int32)
        self._arm_qvel = np.asarray([self.joint_qvel(j).start for j in ARM_JOINTS], np.int32)
        self._box_qpos = np.asarray([[self.joint_qpos(f"box{i}_{d}").start for d in "xzy"] for i in range(n)],
                                    np.int32)
        # dm_control's box velocities: joints x, y, z by name, i.e. x, angle, z
        self._box_qvel = np.asarray([self.joint_qvel(f"box{i}_{d}").start for i in range(n) for d in "xyz"],
                                    np.int32)
        jids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in ARM_JOINTS]
        limited = m.jnt_limited[jids].astype(bool)
        self._arm_low = np.where(limited, m.jnt_range[jids, 0], -np.pi).astype(np.float32)
        self._arm_high = np.where(limited, m.jnt_range[jids, 1], np.pi).astype(np.float32)
        self._hand = int(self.body_ids("hand")[0])
        self._box_size = float(m.geom_size[self.geom_ids("target")[0], 0])
        target = int(self.body_ids("target")[0])
        self._target_y = float(m.body_pos[target, 1])
        self._target_site = np.asarray(m.site_pos[self.site_ids("target")[0]], np.float32)

    def _draw(self, rng: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """One draw of dm_control's loop: (q, target (x, z), penetrating)."""
        n = self._n_boxes
        ks = jax.random.split(rng, 6)
        q = jnp.asarray(self.sys.qpos0, jnp.float32)
        q = q.at[self._arm_qpos].set(jax.random.uniform(ks[0], (len(ARM_JOINTS),), jnp.float32,
                                                        self._arm_low, self._arm_high))
        # the hand is symmetric: the finger mirrors the thumb
        q = q.at[self._arm_qpos[4]].set(q[self._arm_qpos[6]])
        # the target sits where the first, second, ... box of a stack would
        level = jax.random.randint(ks[1], (), 0, n)
        tz = self._box_size * (2 * level + 1).astype(jnp.float32)
        tx = jax.random.uniform(ks[2], (), jnp.float32, -0.37, 0.37)
        boxes = jnp.stack([jax.random.uniform(ks[3], (n,), jnp.float32, 0.1, 0.3),
                           jax.random.uniform(ks[4], (n,), jnp.float32, 0.0, 0.7),
                           jax.random.uniform(ks[5], (n,), jnp.float32, 0.0, 2 * jnp.pi)], axis=-1)
        q = q.at[self._box_qpos].set(boxes)
        contact = brax_physics.contacts(self.sys, q)
        return q, jnp.stack([tx, tz]), jnp.any(contact.active)

    def initial_state(self, rng: jax.Array) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        """dm_control's draw (arm joints uniform in range, finger = thumb; target x in ±0.37 at a
        random stack level; boxes x in [0.1, 0.3], z in [0, 0.7], any angle), redrawn while anything
        penetrates (at most 100 draws); velocities zero."""
        k0, rng = jax.random.split(rng)
        first = self._draw(k0)

        Carry = tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array]

        def again(carry: Carry) -> Carry:
            i, key = carry[0], carry[1]
            key, k = jax.random.split(key)
            return (i + 1, key, *self._draw(k))

        def penetrating(carry: Carry) -> jax.Array:
            return carry[-1] & (carry[0] < _MAX_DRAWS)

        start: Carry = (jnp.ones((), jnp.int32), rng, *first)
        _, _, q, target, _ = jax.lax.while_loop(penetrating, again, start)
        return q, jnp.zeros(self.sys.nv, jnp.float32), {"target": target}

    def task_info_from_physics(self, physics: Any) -> dict[str, jax.Array]:
        """The target's (x, z) that dm_control wrote into its model."""
        pos = physics.named.model.body_pos["target"]
        return {"target": jnp.asarray([pos[0], pos[2]], jnp.float32)}

    def observation(self, ps: brax_physics.State, info: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        """`arm_pos` (8, 2), `arm_vel` (8,), `touch` (5,), `hand_pos` (4,), `box_pos` (n, 4),
        `box_vel` (3n,), `target_pos` (2,)."""
        arm = ps.q[self._arm_qpos]
        pos, rot = ps.x.pos, ps.x.rot
        hand = jnp.stack([pos[self._hand, 0], pos[self._hand, 2], rot[self._hand, 0], rot[self._hand, 2]])
        b = self._boxes
        boxes = jnp.stack([pos[b, 0], pos[b, 2], rot[b, 0], rot[b, 2]], axis=-1)
        # ordered: jax sorts a plain dict's keys, dm_control's order is its own
        return collections.OrderedDict([
            ("arm_pos", jnp.stack([jnp.sin(arm), jnp.cos(arm)], axis=-1)),
            ("arm_vel", ps.qd[self._arm_qvel]),
            ("touch", jnp.log1p(ps.sensordata)),
            ("hand_pos", hand),
            ("box_pos", boxes),
            ("box_vel", ps.qd[self._box_qvel]),
            ("target_pos", jnp.asarray(info["target"], jnp.float32)),
        ])

    def reward(self, ps: brax_physics.State, info: Mapping[str, jax.Array], action: jax.Array) -> jax.Array:
        """Nearest box within the target's gaussian (margin 2 box sizes) · hand beyond 10 cm of it."""
        t = jnp.asarray(info["target"], jnp.float32)
        target = jnp.stack([t[0], jnp.zeros((), jnp.float32) + self._target_y, t[1]]) + self._target_site
        site_pos = self.sites(ps, *self._box_sites, "grasp")[0]
        dist = jnp.linalg.norm(site_pos - target[None], axis=-1)
        box_is_close = tolerance(jnp.min(dist[:-1]), margin=2 * self._box_size)
        hand_is_far = tolerance(dist[-1], (0.1, float("inf")), margin=_CLOSE)
        return box_is_close * hand_is_far


ENV = Stacker
