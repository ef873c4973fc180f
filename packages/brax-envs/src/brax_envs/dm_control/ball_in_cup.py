"""dm_control's ball_in_cup domain: swing a ball on a string into a cup moved in the plane."""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import ClassVar

import brax_physics
import jax
import jax.numpy as jnp
import numpy as np

from brax_envs.dm_control._suite import SuiteEnv, suite_model

_MAX_ATTEMPTS = 1000
"""Ball draws before settling for the last one (dm_control keeps drawing; never in practice)."""

_XZ = np.array([0, 2])


class BallInCup(SuiteEnv):
    """Ball in cup: a cup on two sprung, damped slide joints (x, z motors) and a ball tied to it by a
    0.3 m string (a limited spatial tendon).

    Observation: `position` (qpos: cup x, z, ball x, z) and `velocity` (qvel). Reward (sparse): 1
    while the ball lies inside the cup's target box in x and z. Starts with the cup at rest at its
    origin and the ball uniform in x in [-0.2, 0.2], z in [0.2, 0.5] (relative to its body), drawn
    again while it touches anything. 1000 control steps of 0.02 s (10 physics steps each).
    """

    domain = "ball_in_cup"
    time_limit = 20.0
    control_timestep = 0.02
    fast_solver: ClassVar[Mapping[str, int]] = {"iterations": 4, "ls_iterations": 8}

    def __init__(self, task: str = "catch", *, solver: str = "default", debug: bool = False) -> None:
        """Task `catch`."""
        if task != "catch":
            raise ValueError(f"unknown ball_in_cup task {task!r}")
        model = suite_model("ball_in_cup")
        super().__init__(task, model, solver=solver, debug=debug)
        self._ball_x, self._ball_z = self.joint_qpos("ball_x"), self.joint_qpos("ball_z")
        self._ball = self.body_ids("ball")[0]
        target, ball_geom = self.site_ids("target")[0], self.geom_ids("ball")[0]
        # The ball is in when its centre is this far (x, z) from the target box's centre.
        self._in_target = jnp.asarray(model.site_size[target, [0, 2]] - model.geom_size[ball_geom, 0],
                                      jnp.float32)

    def _draw(self, rng: jax.Array) -> jax.Array:
        kx, kz = jax.random.split(rng)
        q = jnp.asarray(self.sys.qpos0, jnp.float32)
        q = q.at[self._ball_x].set(jax.random.uniform(kx, (1,), jnp.float32, -0.2, 0.2))
        return q.at[self._ball_z].set(jax.random.uniform(kz, (1,), jnp.float32, 0.2, 0.5))

    def _touching(self, q: jax.Array) -> jax.Array:
        # the position stage only (kinematics and collision), as dm_control's count of contacts
        return jnp.any(brax_physics.contacts(self.sys, q).active)

    def initial_state(self, rng: jax.Array) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        """The cup at its origin, the ball at a random contact-free position, all at rest."""
        # dm_control's rejection sampling, as a loop that stops at the first contact-free draw.
        def cond(c: tuple[jax.Array, jax.Array, jax.Array, jax.Array]) -> jax.Array:
            return c[2] & (c[3] < _MAX_ATTEMPTS)

        def body(c: tuple[jax.Array, jax.Array, jax.Array, jax.Array]
                 ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
            key, k = jax.random.split(c[0])
            q = self._draw(k)
            return key, q, self._touching(q), c[3] + 1

        key, k = jax.random.split(rng)
        q0 = self._draw(k)
        _, q, _, _ = jax.lax.while_loop(cond, body, (key, q0, self._touching(q0), jnp.ones((), jnp.int32)))
        return q, jnp.zeros((self.sys.nv,), jnp.float32), {}

    def observation(self, ps: brax_physics.State, info: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        """`position` (4,), `velocity` (4,)."""
        return collections.OrderedDict([("position", ps.q), ("velocity", ps.qd)])

    def reward(self, ps: brax_physics.State, info: Mapping[str, jax.Array], action: jax.Array) -> jax.Array:
        """1 where the ball's x and z lie strictly within the target box shrunk by the ball's radius."""
        target, _ = self.sites(ps, "target")
        offset = jnp.abs(target[0, _XZ] - ps.x.pos[self._ball, _XZ])
        return jnp.all(offset < self._in_target).astype(jnp.float32)


ENV = BallInCup
