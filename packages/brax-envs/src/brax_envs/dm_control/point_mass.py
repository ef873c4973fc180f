"""dm_control's point_mass domain: drive a planar point mass to a target at the origin."""

from __future__ import annotations

import collections
import math
from collections.abc import Mapping
from typing import Any, ClassVar

import brax_physics
import jax
import jax.numpy as jnp
import numpy as np

from brax_envs.base import State
from brax_envs.dm_control._suite import SuiteEnv, randomize_limited_and_rotational_joints, suite_model
from brax_envs.dm_control.rewards import tolerance

TASKS = ("easy", "hard")
"""The point_mass tasks."""

_MAX_ALIGNMENT = 0.9
"""`hard`: the two actuation directions' |cosine| is at most this."""


class PointMass(SuiteEnv):
    """Point mass: a sphere on two limited slide joints, pushed through two fixed tendons.

    Observation: `position` (qpos) and `velocity` (qvel). Reward: the mass within the target's
    radius (1, falling off over one radius as a Gaussian) times a small-control term. Starts at a
    uniform position within the joint ranges, at rest. In `hard` each episode draws the tendons'
    joint coefficients (two unit directions no more than 0.9 parallel), so each control pushes along
    a random direction: they live in `info["task"]["wrap_prm"]` and the episode is simulated with
    them (`episode_sys`). 1000 control steps of 0.02 s.
    """

    domain = "point_mass"
    time_limit = 20.0
    fast_solver: ClassVar[Mapping[str, int]] = {"iterations": 2, "ls_iterations": 4}

    def __init__(self, task: str = "easy", *, solver: str = "default", debug: bool = False) -> None:
        """Task `easy` (controls along x and y) or `hard` (random actuation directions)."""
        if task not in TASKS:
            raise ValueError(f"unknown point_mass task {task!r}")
        model = suite_model("point_mass")
        super().__init__(task, model, solver=solver, debug=debug)
        self._randomize_gains = task == "hard"
        self._mass, self._target = self.geom_ids("pointmass", "target")
        self._target_size = float(model.geom_size[self._target, 0])

    def initial_state(self, rng: jax.Array) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        """Joints uniform in their ranges, zero velocity; `hard` also draws the actuation directions."""
        k_q, k_a, k_d, k_s = jax.random.split(rng, 4)
        q = randomize_limited_and_rotational_joints(self.model, k_q, jnp.asarray(self.sys.qpos0, jnp.float32))
        qd = jnp.zeros((self.sys.nv,), jnp.float32)
        if not self._randomize_gains:
            return q, qd, {}
        # dm_control draws dir1 isotropically and rejects dir2 while |dir1·dir2| > 0.9; that leaves the
        # angle between them uniform on the two arcs where |cos| <= 0.9, which we draw directly.
        a1 = jax.random.uniform(k_a, (), jnp.float32, -jnp.pi, jnp.pi)
        lo = math.acos(_MAX_ALIGNMENT)
        delta = jax.random.uniform(k_d, (), jnp.float32, lo, math.pi - lo)
        a2 = a1 + delta + jnp.pi * jax.random.bernoulli(k_s).astype(jnp.float32)
        wrap = jnp.stack([jnp.cos(a1), jnp.sin(a1), jnp.cos(a2), jnp.sin(a2)])
        return q, qd, {"wrap_prm": wrap}

    def episode_sys(self, info: Mapping[str, jax.Array]) -> brax_physics.System:
        """The System of an episode: `hard`'s tendon coefficients from `info` (else `self.sys`)."""
        if "wrap_prm" not in info:
            return self.sys
        return self.sys.replace(wrap_prm=jnp.asarray(info["wrap_prm"], self.sys.wrap_prm.dtype))

    def pipeline_state_init(self, q: jax.Array, qd: jax.Array,
                            info: Mapping[str, jax.Array]) -> brax_physics.State:
        """The physics state at `q`, `qd` under the episode's actuation directions."""
        return brax_physics.init(self.episode_sys(info), q, qd)

    def step(self, state: State, action: jax.Array) -> State:
        """One control step, simulated with the episode's actuation directions."""
        info = state.info["task"]
        if "wrap_prm" not in info:
            return super().step(state, action)
        env = self.with_sys(self.episode_sys(info))
        assert isinstance(env, SuiteEnv)
        return SuiteEnv.step(env, state, action)

    def task_info_from_physics(self, physics: Any) -> dict[str, jax.Array]:
        """`hard`: the tendon coefficients dm_control drew for this episode."""
        if not self._randomize_gains:
            return {}
        return {"wrap_prm": jnp.asarray(np.asarray(physics.model.wrap_prm[:4]), jnp.float32)}

    def observation(self, ps: brax_physics.State, info: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        """`position` (2,), `velocity` (2,)."""
        return collections.OrderedDict([("position", ps.q), ("velocity", ps.qd)])

    def reward(self, ps: brax_physics.State, info: Mapping[str, jax.Array], action: jax.Array) -> jax.Array:
        """Near-target tolerance (margin one target radius) times (4 + mean control tolerance) / 5."""
        dist = jnp.linalg.norm(ps.geom_xpos[self._target] - ps.geom_xpos[self._mass])
        near = tolerance(dist, (0.0, self._target_size), margin=self._target_size)
        control = jnp.mean(tolerance(action, margin=1.0, value_at_margin=0.0, sigmoid="quadratic"))
        return near * (control + 4) / 5


ENV = PointMass
