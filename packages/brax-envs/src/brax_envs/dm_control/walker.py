"""dm_control's walker domain: a planar biped that stands, walks or runs."""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import ClassVar

import brax_math
import brax_physics
import jax
import jax.numpy as jnp

from brax_envs.dm_control._suite import SuiteEnv, randomize_limited_and_rotational_joints, suite_model
from brax_envs.dm_control.rewards import tolerance

STAND_HEIGHT = 1.2
"""Torso height (m) at and above which the standing term is 1."""

MOVE_SPEEDS = {"stand": 0.0, "walk": 1.0, "run": 8.0}
"""Each task's target forward speed (m/s); 0 rewards standing only."""


class Walker(SuiteEnv):
    """Walker: a planar biped (root slides z, x and hinge y; hip, knee and ankle per leg).

    Observation: `orientations` (every body's world xx and xz orientation entries), torso `height`,
    `velocity` (qvel). Reward: standing (torso height, gaussian below 1.2 m) and uprightness, times a
    linear forward-speed term for walk and run. Episodes start with the joints randomized
    (limited ones in range, the root's pitch in ±pi). 1000 control steps of 0.025 s.
    """

    domain = "walker"
    time_limit = 25.0
    control_timestep = 0.025
    fast_solver: ClassVar[Mapping[str, int]] = {"iterations": 4, "ls_iterations": 8}

    def __init__(self, task: str = "stand", *, solver: str = "default", debug: bool = False) -> None:
        """Task `stand`, `walk` or `run`."""
        if task not in MOVE_SPEEDS:
            raise ValueError(f"unknown walker task {task!r}")
        super().__init__(task, suite_model("walker"), solver=solver, debug=debug)
        self._move_speed = MOVE_SPEEDS[task]
        self._torso = int(self.body_ids("torso")[0])

    def initial_state(self, rng: jax.Array) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        """Joints randomized as dm_control's `randomize_limited_and_rotational_joints`, at rest."""
        q0 = jnp.asarray(self.model.qpos0, jnp.float32)
        q = randomize_limited_and_rotational_joints(self.model, rng, q0)
        return q, jnp.zeros((self.sys.nv,), jnp.float32), {}

    def torso_height(self, ps: brax_physics.State) -> jax.Array:
        """() height of the torso's frame."""
        return ps.x.pos[self._torso, 2]

    def observation(self, ps: brax_physics.State, info: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        """`orientations` (2·(nbody - 1),), `height` (), `velocity` (nv,)."""
        m = brax_math.quat_to_mat(ps.x.rot[1:])
        orientations = jnp.stack([m[:, 0, 0], m[:, 0, 2]], axis=-1).reshape(-1)
        # an OrderedDict: jit keeps its keys in dm_control's order (a dict's come back sorted)
        return collections.OrderedDict(orientations=orientations, height=self.torso_height(ps),
                                       velocity=ps.qd)

    def reward(self, ps: brax_physics.State, info: Mapping[str, jax.Array], action: jax.Array) -> jax.Array:
        """Stand reward, times the move reward for walk and run."""
        standing = tolerance(self.torso_height(ps), (STAND_HEIGHT, float("inf")), margin=STAND_HEIGHT / 2)
        upright = (1 + brax_math.quat_to_mat(ps.x.rot[self._torso])[2, 2]) / 2
        stand = (3 * standing + upright) / 4
        if self._move_speed == 0:
            return stand
        speed = self.subtree_linvel(ps, "torso")[0]
        move = tolerance(speed, (self._move_speed, float("inf")), margin=self._move_speed / 2,
                         value_at_margin=0.5, sigmoid="linear")
        return stand * (5 * move + 1) / 6


ENV = Walker
