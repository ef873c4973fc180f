"""dm_control's hopper domain: a planar one-legged hopper that stands or hops forward."""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import ClassVar

import brax_physics
import jax
import jax.numpy as jnp

from brax_envs.dm_control._suite import SuiteEnv, randomize_limited_and_rotational_joints, suite_model
from brax_envs.dm_control.rewards import tolerance

STAND_HEIGHT = 0.6
"""Height (m) of the torso's center of mass over the foot's above which the hopper stands."""

HOP_SPEED = 2.0
"""Forward speed (m/s) at and above which the hop term is 1."""


class Hopper(SuiteEnv):
    """Hopper: a planar leg (root slides x, z and hinge y; waist, hip, knee, ankle).

    Observation: `position` (qpos without the root's x), `velocity` (qvel), `touch` (log1p of the toe
    and heel touch sensors). Reward: standing (torso over foot between 0.6 and 2 m) times, for stand,
    a small-control term, for hop, a linear forward-speed term. Episodes start with the joints
    randomized (limited ones in range, the root's pitch in ±pi). 1000 control steps of 0.02 s.
    """

    domain = "hopper"
    time_limit = 20.0
    control_timestep = 0.02
    fast_solver: ClassVar[Mapping[str, int]] = {"iterations": 4, "ls_iterations": 8}

    def __init__(self, task: str = "stand", *, solver: str = "default", debug: bool = False) -> None:
        """Task `stand` or `hop`."""
        if task not in ("stand", "hop"):
            raise ValueError(f"unknown hopper task {task!r}")
        super().__init__(task, suite_model("hopper"), solver=solver, debug=debug)
        self._hopping = task == "hop"
        self._torso, self._foot = (int(i) for i in self.body_ids("torso", "foot"))

    def initial_state(self, rng: jax.Array) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        """Joints randomized as dm_control's `randomize_limited_and_rotational_joints`, at rest."""
        q0 = jnp.asarray(self.model.qpos0, jnp.float32)
        q = randomize_limited_and_rotational_joints(self.model, rng, q0)
        return q, jnp.zeros((self.sys.nv,), jnp.float32), {}

    def height(self, ps: brax_physics.State) -> jax.Array:
        """() height of the torso's center of mass over the foot's."""
        return ps.xipos[self._torso, 2] - ps.xipos[self._foot, 2]

    def observation(self, ps: brax_physics.State, info: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        """`position` (nq - 1,), `velocity` (nv,), `touch` (2,)."""
        touch = jnp.concatenate([self.sensor(ps, "touch_toe"), self.sensor(ps, "touch_heel")])
        # an OrderedDict: jit keeps its keys in dm_control's order (a dict's come back sorted)
        return collections.OrderedDict(position=ps.q[1:], velocity=ps.qd, touch=jnp.log1p(touch))

    def reward(self, ps: brax_physics.State, info: Mapping[str, jax.Array], action: jax.Array) -> jax.Array:
        """Standing times hopping speed (hop) or small control (stand)."""
        standing = tolerance(self.height(ps), (STAND_HEIGHT, 2.0))
        if self._hopping:
            speed = self.subtree_linvel(ps, "torso")[0]
            return standing * tolerance(speed, (HOP_SPEED, float("inf")), margin=HOP_SPEED / 2,
                                        value_at_margin=0.5, sigmoid="linear")
        small_control = jnp.mean(tolerance(action, margin=1.0, value_at_margin=0.0, sigmoid="quadratic"))
        return standing * (small_control + 4) / 5


ENV = Hopper
