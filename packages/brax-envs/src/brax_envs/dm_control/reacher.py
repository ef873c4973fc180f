"""dm_control's reacher domain: bring a two-link planar arm's fingertip to a random target."""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import Any, ClassVar

import brax_physics
import jax
import jax.numpy as jnp
import numpy as np

from brax_envs.dm_control._suite import SuiteEnv, randomize_limited_and_rotational_joints, suite_model
from brax_envs.dm_control.rewards import tolerance

TARGET_SIZES = {"easy": 0.05, "hard": 0.015}
"""The target's radius per task."""


class Reacher(SuiteEnv):
    """Reacher: a planar arm (unlimited shoulder, limited wrist) and a target disc on the floor.

    Observation: `position` (qpos), `to_target` (target minus fingertip, world x and y) and
    `velocity` (qvel). Reward (sparse): 1 while the fingertip overlaps the target. Starts with the
    joints uniform (shoulder in [-pi, pi), wrist in its range), at rest, and the target uniform in
    angle at a radius uniform in [0.05, 0.2]; the target is a contact-free world geom, so its x, y
    live in `info["task"]["target"]`. 1000 control steps of 0.02 s.
    """

    domain = "reacher"
    time_limit = 20.0
    fast_solver: ClassVar[Mapping[str, int]] = {"iterations": 2, "ls_iterations": 4}

    def __init__(self, task: str = "easy", *, solver: str = "default", debug: bool = False) -> None:
        """Task `easy` (target radius 0.05) or `hard` (0.015)."""
        if task not in TARGET_SIZES:
            raise ValueError(f"unknown reacher task {task!r}")
        model = suite_model("reacher")
        super().__init__(task, model, solver=solver, debug=debug)
        self._finger, self._target = self.geom_ids("finger", "target")
        self._radii = TARGET_SIZES[task] + float(model.geom_size[self._finger, 0])

    def initial_state(self, rng: jax.Array) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        """Random joints at rest and a random target position."""
        k_q, k_a, k_r = jax.random.split(rng, 3)
        q = randomize_limited_and_rotational_joints(self.model, k_q, jnp.asarray(self.sys.qpos0, jnp.float32))
        angle = jax.random.uniform(k_a, (), jnp.float32, 0.0, 2 * jnp.pi)
        radius = jax.random.uniform(k_r, (), jnp.float32, 0.05, 0.2)
        target = jnp.stack([radius * jnp.sin(angle), radius * jnp.cos(angle)])
        return q, jnp.zeros((self.sys.nv,), jnp.float32), {"target": target}

    def task_info_from_physics(self, physics: Any) -> dict[str, jax.Array]:
        """The target's x, y that dm_control wrote into the model."""
        return {"target": jnp.asarray(np.asarray(physics.named.model.geom_pos["target", :2]), jnp.float32)}

    def _to_target(self, ps: brax_physics.State, info: Mapping[str, jax.Array]) -> jax.Array:
        return info["target"] - ps.geom_xpos[self._finger, :2]

    def observation(self, ps: brax_physics.State, info: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        """`position` (2,), `to_target` (2,), `velocity` (2,)."""
        return collections.OrderedDict(
            [("position", ps.q), ("to_target", self._to_target(ps, info)), ("velocity", ps.qd)])

    def reward(self, ps: brax_physics.State, info: Mapping[str, jax.Array], action: jax.Array) -> jax.Array:
        """1 where the fingertip-target distance is within the sum of their radii, else 0."""
        return tolerance(jnp.linalg.norm(self._to_target(ps, info)), (0.0, self._radii))


ENV = Reacher
