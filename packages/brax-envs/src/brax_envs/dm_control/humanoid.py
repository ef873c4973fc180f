"""dm_control's humanoid domain: a 21-hinge humanoid that stands, walks or runs."""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import ClassVar

import brax_math
import brax_physics
import jax
import jax.numpy as jnp

from brax_envs.dm_control._suite import (
    SuiteEnv,
    penetrating,
    randomize_limited_and_rotational_joints,
    suite_model,
)
from brax_envs.dm_control.rewards import tolerance

STAND_HEIGHT = 1.4
"""Head height (m) above which the humanoid counts as standing."""


class Humanoid(SuiteEnv):
    """Humanoid: a 3D humanoid with a free root and limited hinges, torque-actuated.

    Observation (`run_pure_state`): `position` (qpos), `velocity` (qvel); otherwise `joint_angles`
    (qpos without the root), `head_height`, `extremities` (hands and feet in the torso frame),
    `torso_vertical` (the torso frame's world-z row), `com_velocity` (the torso subtree's centre of
    mass velocity) and `velocity`. Reward: standing (head height) · upright · small control · either
    not moving (`stand`) or horizontal centre-of-mass speed reaching `move_speed`. Episodes start
    from random joint angles and root orientation without contacts. 1000 control steps of 0.025 s.
    """

    domain = "humanoid"
    time_limit = 25.0
    control_timestep = 0.025
    fast_solver: ClassVar[Mapping[str, int]] = {"iterations": 4, "ls_iterations": 8}
    speeds: ClassVar[Mapping[str, float]] = {"stand": 0.0, "walk": 1.0, "run": 10.0, "run_pure_state": 10.0}
    """Each task's target horizontal speed (0: stand still)."""
    root: ClassVar[str] = "torso"
    """The body whose frame the egocentric features use and whose subtree's velocity is measured."""
    limbs: ClassVar[tuple[str, ...]] = ("left_hand", "left_foot", "right_hand", "right_foot")
    """The extremities' bodies, in dm_control's order."""
    upright_column: ClassVar[int] = 2
    """Which axis of the root's frame should point up (its world-z component is the uprightness)."""
    max_tries: ClassVar[int] = 200
    """Bound on a reset's draws (dm_control redraws until contact-free; past the bound, which a draw
    accepted with probability p reaches with probability (1 - p)^max_tries, the last draw is kept)."""

    def __init__(self, task: str = "stand", *, solver: str = "default", debug: bool = False) -> None:
        """Task `stand`, `walk`, `run` or (humanoid only) `run_pure_state`."""
        if task not in self.speeds:
            raise ValueError(f"unknown {self.domain} task {task!r}; tasks: {tuple(self.speeds)}")
        super().__init__(task, suite_model(self.domain), solver=solver, debug=debug)
        self.move_speed = self.speeds[task]
        self.pure_state = task == "run_pure_state"
        self._root = int(self.body_ids(self.root)[0])
        self._head = int(self.body_ids("head")[0])
        self._limbs = self.body_ids(*self.limbs)

    def initial_state(self, rng: jax.Array) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        """Joints drawn as dm_control's `randomize_limited_and_rotational_joints`, redrawn while any
        contact exists (at most `max_tries` draws); zero velocity."""
        q0 = self.sys.qpos0

        def retry(c: tuple[jax.Array, jax.Array, jax.Array, jax.Array]) -> jax.Array:
            return c[3] & (c[0] < self.max_tries)

        def draw(c: tuple[jax.Array, jax.Array, jax.Array, jax.Array]
                 ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
            i, key, _, _ = c
            key, k = jax.random.split(key)
            q = randomize_limited_and_rotational_joints(self.model, k, q0)
            touching = penetrating(brax_physics.contacts(self.sys, q))
            return i + 1, key, q, touching

        start = (jnp.zeros((), jnp.int32), rng, q0, jnp.ones((), bool))
        _, _, q, _ = jax.lax.while_loop(retry, draw, start)
        return q, jnp.zeros(self.sys.nv, q0.dtype), {}

    def _root_frame(self, ps: brax_physics.State) -> tuple[jax.Array, jax.Array]:
        return ps.x.pos[self._root], brax_math.quat_to_mat(ps.x.rot[self._root])

    def com_velocity(self, ps: brax_physics.State) -> jax.Array:
        """(3,) velocity of the root subtree's centre of mass (dm_control's subtreelinvel sensor)."""
        return self.subtree_linvel(ps, self.root)

    def observation(self, ps: brax_physics.State, info: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        """`position`, `velocity` (pure state) or the egocentric features (an OrderedDict: jax keeps
        its key order, dm_control's, where it sorts a dict's)."""
        if self.pure_state:
            return collections.OrderedDict(position=ps.q, velocity=ps.qd)
        pos, mat = self._root_frame(ps)
        return collections.OrderedDict(
            joint_angles=ps.q[7:],
            head_height=ps.x.pos[self._head, 2],
            extremities=((ps.x.pos[self._limbs] - pos[None]) @ mat).reshape(-1),
            torso_vertical=mat[2],
            com_velocity=self.com_velocity(ps),
            velocity=ps.qd,
        )

    def reward(self, ps: brax_physics.State, info: Mapping[str, jax.Array], action: jax.Array) -> jax.Array:
        """Standing · upright · small control · (still or moving at `move_speed`)."""
        _, mat = self._root_frame(ps)
        standing = tolerance(ps.x.pos[self._head, 2], (STAND_HEIGHT, float("inf")), margin=STAND_HEIGHT / 4)
        upright = tolerance(mat[2, self.upright_column], (0.9, float("inf")), sigmoid="linear", margin=1.9,
                            value_at_margin=0)
        small = tolerance(action, margin=1, value_at_margin=0, sigmoid="quadratic")
        small_control = (4 + jnp.mean(small)) / 5
        horizontal = self.com_velocity(ps)[:2]
        if self.move_speed == 0:
            move = jnp.mean(tolerance(horizontal, margin=2))
        else:
            speed = tolerance(jnp.linalg.norm(horizontal), (self.move_speed, float("inf")),
                              margin=self.move_speed, value_at_margin=0, sigmoid="linear")
            move = (5 * speed + 1) / 6
        return small_control * standing * upright * move


ENV = Humanoid
