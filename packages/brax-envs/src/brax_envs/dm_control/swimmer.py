"""dm_control's swimmer domain: a planar chain of links in a fluid that swims to a target."""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import Any, ClassVar

import brax_math
import brax_physics
import jax
import jax.numpy as jnp
import numpy as np

from brax_envs.dm_control._suite import SuiteEnv, randomize_limited_and_rotational_joints, suite_model
from brax_envs.dm_control.rewards import tolerance

LINKS = {"swimmer6": 6, "swimmer15": 15}
"""Each task's number of links."""

CLOSE_TARGET_PROBABILITY = 0.2
"""Chance that an episode's target lies in the near box (±0.3 m) rather than the far one (±2 m)."""


class Swimmer(SuiteEnv):
    """Swimmer: `n` capsule links chained by limited hinges, its head free in the plane (slides x, y
    and hinge z), pushed by the fluid (no contacts).

    Observation: `joints` (the link hinges' angles), `to_target` (target minus nose in the head's
    frame, x and y), `body_velocities` (each link's local x, y velocity and z angular velocity, head
    first). Reward: long-tailed in the nose's distance to the target (1 within its radius). Episodes
    start with the head's heading in ±pi, the hinges uniform in range, and the target uniform in a
    ±0.3 m (20%) or ±2 m square. 1000 control steps of 0.03 s.
    """

    domain = "swimmer"
    time_limit = 30.0
    control_timestep = 0.03
    fast_solver: ClassVar[Mapping[str, int]] = {"iterations": 2, "ls_iterations": 4}

    def __init__(self, task: str = "swimmer6", *, solver: str = "default", debug: bool = False) -> None:
        """Task `swimmer6` or `swimmer15`."""
        if task not in LINKS:
            raise ValueError(f"unknown swimmer task {task!r}")
        n = LINKS[task]
        super().__init__(task, suite_model("swimmer", n), solver=solver, debug=debug)
        self._head = int(self.body_ids("head")[0])
        self._nose, self._target = (int(i) for i in self.geom_ids("nose", "target"))
        self._target_size = float(self.model.geom_size[self._target, 0])
        self._target_z = float(self.model.geom_pos[self._target, 2])
        # the velocimeter and gyro pairs dm_control reads: the head's site, then each link's
        self._sites = ("head", *[f"site_{i}" for i in range(n - 1)])
        self._site_bodies = np.asarray(self.model.site_bodyid[self.site_ids(*self._sites)], np.int32)

    def initial_state(self, rng: jax.Array) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        """Heading in ±pi and hinges uniform in range (at rest); the target in the near or far box."""
        k_joints, k_close, k_xy = jax.random.split(rng, 3)
        q = randomize_limited_and_rotational_joints(self.model, k_joints,
                                                    jnp.asarray(self.model.qpos0, jnp.float32))
        half = jnp.where(jax.random.uniform(k_close) < CLOSE_TARGET_PROBABILITY, 0.3, 2.0)
        xy = half * jax.random.uniform(k_xy, (2,), jnp.float32, -1.0, 1.0)
        target = jnp.concatenate([xy, jnp.full((1,), self._target_z, jnp.float32)])
        return q, jnp.zeros((self.sys.nv,), jnp.float32), {"target": target}

    def task_info_from_physics(self, physics: Any) -> dict[str, jax.Array]:
        """The target's position (the target geom's, a child of the world)."""
        return {"target": jnp.asarray(physics.named.model.geom_pos["target"], jnp.float32)}

    def nose_to_target(self, ps: brax_physics.State, info: Mapping[str, jax.Array]) -> jax.Array:
        """(2,) target minus nose in the head's frame, x and y."""
        head = brax_math.quat_to_mat(ps.x.rot[self._head])
        return (head.T @ (info["target"] - ps.geom_xpos[self._nose]))[:2]

    def body_velocities(self, ps: brax_physics.State) -> jax.Array:
        """(3·n,) each link's site-frame x, y linear and z angular velocity (velocimeter, gyro)."""
        pos, mat = self.sites(ps, *self._sites)
        b = self._site_bodies
        ang = ps.xd.ang[b]
        # xd.vel is the velocity of each body's origin: carry it to the site
        lin = ps.xd.vel[b] + jnp.cross(ang, pos - ps.x.pos[b])
        lin_local = jnp.einsum("nji,nj->ni", mat, lin)
        ang_local = jnp.einsum("nji,nj->ni", mat, ang)
        return jnp.stack([lin_local[:, 0], lin_local[:, 1], ang_local[:, 2]], axis=-1).reshape(-1)

    def observation(self, ps: brax_physics.State, info: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        """`joints` (n - 1,), `to_target` (2,), `body_velocities` (3·n,)."""
        # an OrderedDict: jit keeps its keys in dm_control's order (a dict's come back sorted)
        return collections.OrderedDict(joints=ps.q[3:], to_target=self.nose_to_target(ps, info),
                                       body_velocities=self.body_velocities(ps))

    def reward(self, ps: brax_physics.State, info: Mapping[str, jax.Array], action: jax.Array) -> jax.Array:
        """Long-tailed reward in the nose's distance to the target."""
        dist = jnp.linalg.norm(self.nose_to_target(ps, info))
        return tolerance(dist, (0.0, self._target_size), margin=5 * self._target_size, sigmoid="long_tail")


ENV = Swimmer
