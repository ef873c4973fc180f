"""dm_control's fish domain: a fish in a fluid without gravity that turns upright or swims to a target."""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import Any, ClassVar

import brax_math
import brax_physics
import jax
import jax.numpy as jnp
import numpy as np

from brax_envs.dm_control._suite import SuiteEnv, suite_model
from brax_envs.dm_control.rewards import tolerance

JOINTS = ("tail1", "tail_twist", "tail2", "finright_roll", "finright_pitch", "finleft_roll", "finleft_pitch")
"""The fish's hinges (tail and fins), in the observation's order."""


class Fish(SuiteEnv):
    """Fish: a free-floating torso with a two-part tail and two fins, in a fluid without gravity or
    constraints.

    Observation: `joint_angles` (the seven hinges), `upright` (the torso's world zz orientation entry),
    for swim `target` (target minus mouth in the mouth's frame), `velocity` (qvel). Reward: upright,
    gaussian in 1 - zz; swim, 7/8 for the mouth reaching the target plus 1/8 uprightness. Episodes
    start at rest with a uniformly random orientation, the hinges uniform in ±0.2 rad and, for swim,
    the target uniform in a box. 1000 control steps of 0.04 s.
    """

    domain = "fish"
    time_limit = 40.0
    control_timestep = 0.04
    fast_solver: ClassVar[Mapping[str, int]] = {"iterations": 2, "ls_iterations": 4}

    def __init__(self, task: str = "upright", *, solver: str = "default", debug: bool = False) -> None:
        """Task `upright` or `swim`."""
        if task not in ("upright", "swim"):
            raise ValueError(f"unknown fish task {task!r}")
        super().__init__(task, suite_model("fish"), solver=solver, debug=debug)
        self._swim = task == "swim"
        self._torso = int(self.body_ids("torso")[0])
        self._mouth = int(self.geom_ids("mouth")[0])
        self._root = self.joint_qpos("root")
        self._joint_q = np.asarray([self.joint_qpos(j).start for j in JOINTS], np.int32)
        size = self.model.geom_size
        self._radii = float(size[self._mouth, 0] + size[int(self.geom_ids("target")[0]), 0])

    def initial_state(self, rng: jax.Array) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        """Orientation uniform on the unit quaternions, hinges uniform in ±0.2, at rest; swim's target
        uniform in x, y ∈ ±0.4, z ∈ [0.1, 0.3]."""
        k_quat, k_joints, k_target = jax.random.split(rng, 3)
        quat = jax.random.normal(k_quat, (4,), jnp.float32)
        q = jnp.asarray(self.model.qpos0, jnp.float32)
        q = q.at[self._root.start + 3:self._root.stop].set(quat / jnp.linalg.norm(quat))
        q = q.at[self._joint_q].set(jax.random.uniform(k_joints, (len(JOINTS),), jnp.float32, -0.2, 0.2))
        info: dict[str, jax.Array] = {}
        if self._swim:
            info["target"] = jax.random.uniform(k_target, (3,), jnp.float32, jnp.array([-0.4, -0.4, 0.1]),
                                                jnp.array([0.4, 0.4, 0.3]))
        return q, jnp.zeros((self.sys.nv,), jnp.float32), info

    def task_info_from_physics(self, physics: Any) -> dict[str, jax.Array]:
        """Swim: the target's position (the target geom's, a child of the world)."""
        if not self._swim:
            return {}
        return {"target": jnp.asarray(physics.named.model.geom_pos["target"], jnp.float32)}

    def upright(self, ps: brax_physics.State) -> jax.Array:
        """() the torso's world zz orientation entry."""
        return brax_math.quat_to_mat(ps.x.rot[self._torso])[2, 2]

    def mouth_to_target(self, ps: brax_physics.State, info: Mapping[str, jax.Array]) -> jax.Array:
        """(3,) target minus mouth in the mouth's frame."""
        return ps.geom_xmat[self._mouth].T @ (info["target"] - ps.geom_xpos[self._mouth])

    def observation(self, ps: brax_physics.State, info: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        """`joint_angles` (7,), `upright` (), swim's `target` (3,), `velocity` (nv,)."""
        # an OrderedDict: jit keeps its keys in dm_control's order (a dict's come back sorted)
        obs = collections.OrderedDict(joint_angles=ps.q[self._joint_q], upright=self.upright(ps))
        if self._swim:
            obs["target"] = self.mouth_to_target(ps, info)
        obs["velocity"] = ps.qd
        return obs

    def reward(self, ps: brax_physics.State, info: Mapping[str, jax.Array], action: jax.Array) -> jax.Array:
        """Upright: gaussian in the torso's tilt; swim: mouth in the target, and uprightness."""
        if not self._swim:
            return tolerance(self.upright(ps), (1.0, 1.0), margin=1.0)
        dist = jnp.linalg.norm(self.mouth_to_target(ps, info))
        in_target = tolerance(dist, (0.0, self._radii), margin=2 * self._radii)
        return (7 * in_target + 0.5 * (self.upright(ps) + 1)) / 8


ENV = Fish
