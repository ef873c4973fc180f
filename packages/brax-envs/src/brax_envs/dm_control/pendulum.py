"""dm_control's pendulum domain: swing a torque-limited pendulum up and hold it upright."""

from __future__ import annotations

import collections
import math
from collections.abc import Mapping
from typing import ClassVar

import brax_physics
import jax
import jax.numpy as jnp

from brax_envs.dm_control._suite import SuiteEnv, suite_model
from brax_envs.dm_control.rewards import tolerance

_COSINE_BOUND = math.cos(math.radians(8.0))
"""The pole counts as upright within 8 degrees of vertical."""


class Pendulum(SuiteEnv):
    """Pendulum: one hinged pole with a mass at its end and a weak motor (it must pump energy).

    Observation: `orientation` (the pole's world zz and xz orientation entries) and `velocity`
    (hinge angular velocity). Reward (sparse): 1 while the pole is within 8 degrees of upright.
    Starts at a uniform angle in [-pi, pi), at rest. 1000 control steps of 0.02 s.
    """

    domain = "pendulum"
    time_limit = 20.0
    fast_solver: ClassVar[Mapping[str, int]] = {"iterations": 2, "ls_iterations": 4}

    def __init__(self, task: str = "swingup", *, solver: str = "default", debug: bool = False) -> None:
        """Task `swingup`."""
        if task != "swingup":
            raise ValueError(f"unknown pendulum task {task!r}")
        super().__init__(task, suite_model("pendulum"), solver=solver, debug=debug)
        self._hinge_q = self.joint_qpos("hinge")
        self._hinge_v = self.joint_qvel("hinge")

    def initial_state(self, rng: jax.Array) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        """Hinge angle uniform in [-pi, pi), zero velocity."""
        q = jnp.asarray(self.sys.qpos0, jnp.float32)
        q = q.at[self._hinge_q].set(jax.random.uniform(rng, (1,), jnp.float32, -jnp.pi, jnp.pi))
        return q, jnp.zeros((self.sys.nv,), jnp.float32), {}

    def _pole_xmat(self, ps: brax_physics.State) -> jax.Array:
        return self.body_xmat(ps, "pole")[0]

    def observation(self, ps: brax_physics.State, info: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        """`orientation` (2,): zz, xz of the pole frame; `velocity` (1,)."""
        m = self._pole_xmat(ps)
        return collections.OrderedDict(
            [("orientation", jnp.stack([m[2, 2], m[0, 2]])), ("velocity", ps.qd[self._hinge_v])])

    def reward(self, ps: brax_physics.State, info: Mapping[str, jax.Array], action: jax.Array) -> jax.Array:
        """1 where the pole's cosine to vertical is at least cos(8 degrees), else 0."""
        return tolerance(self._pole_xmat(ps)[2, 2], (_COSINE_BOUND, 1.0))


ENV = Pendulum
