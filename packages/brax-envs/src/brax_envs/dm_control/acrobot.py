"""dm_control's acrobot domain: swing up a two-link arm actuated only at the elbow."""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import ClassVar

import brax_physics
import jax
import jax.numpy as jnp

from brax_envs.dm_control._suite import SuiteEnv, suite_model
from brax_envs.dm_control.rewards import tolerance

TASKS = ("swingup", "swingup_sparse")
"""The acrobot tasks."""


class Acrobot(SuiteEnv):
    """Acrobot: a double pendulum (shoulder passive, elbow motor) that must bring its tip to a target
    site above the shoulder.

    Observation: `orientations` (both links' world xz then zz orientation entries) and `velocity`
    (qvel). Reward: tip-to-target distance within the target's radius (1), falling off as a Gaussian
    over 1 m (`swingup`) or not at all (`swingup_sparse`). Starts with both joints uniform in
    [-pi, pi), at rest. 1000 control steps of 0.01 s (RK4).
    """

    domain = "acrobot"
    time_limit = 10.0
    fast_solver: ClassVar[Mapping[str, int]] = {"iterations": 2, "ls_iterations": 4}

    def __init__(self, task: str = "swingup", *, solver: str = "default", debug: bool = False) -> None:
        """Task `swingup` or `swingup_sparse`."""
        if task not in TASKS:
            raise ValueError(f"unknown acrobot task {task!r}")
        model = suite_model("acrobot")
        super().__init__(task, model, solver=solver, debug=debug)
        self._sparse = task == "swingup_sparse"
        self._joints = [self.joint_qpos("shoulder"), self.joint_qpos("elbow")]
        self._target_radius = float(model.site_size[self.site_ids("target")[0], 0])

    def initial_state(self, rng: jax.Array) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        """Shoulder and elbow angles uniform in [-pi, pi), zero velocity."""
        angles = jax.random.uniform(rng, (2,), jnp.float32, -jnp.pi, jnp.pi)
        q = jnp.asarray(self.sys.qpos0, jnp.float32)
        for i, s in enumerate(self._joints):
            q = q.at[s].set(angles[i:i + 1])
        return q, jnp.zeros((self.sys.nv,), jnp.float32), {}

    def observation(self, ps: brax_physics.State, info: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        """`orientations` (4,): xz of both links, then zz of both; `velocity` (2,)."""
        m = self.body_xmat(ps, "upper_arm", "lower_arm")
        return collections.OrderedDict(
            [("orientations", jnp.concatenate([m[:, 0, 2], m[:, 2, 2]])), ("velocity", ps.qd)])

    def reward(self, ps: brax_physics.State, info: Mapping[str, jax.Array], action: jax.Array) -> jax.Array:
        """Tolerance of the tip's distance to the target site (margin 1, or 0 when sparse)."""
        pos, _ = self.sites(ps, "target", "tip")
        dist = jnp.linalg.norm(pos[0] - pos[1])
        return tolerance(dist, (0.0, self._target_radius), margin=0.0 if self._sparse else 1.0)


ENV = Acrobot
