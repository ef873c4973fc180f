"""dm_control's LQR domain: a chain of spring-loaded sliders, the first few actuated, to hold at zero."""

from __future__ import annotations

import collections
import math
from collections.abc import Mapping
from typing import ClassVar

import brax_physics
import jax
import jax.numpy as jnp
import numpy as np

from brax_envs.dm_control._suite import SuiteEnv, suite_model

TASKS = {"lqr_2_1": (2, 1), "lqr_6_2": (6, 2)}
"""The domain's tasks and their (bodies, actuated bodies)."""

_CONTROL_COST = 0.1  # weight of the control's half squared norm in the cost
_TERMINAL_NORM = 1e-6  # the episode ends once |(q, qd)| falls below this


class LQR(SuiteEnv):
    """LQR: `n` bodies on sliders joined by springs of random stiffness, the first `m` driven by motors.

    dm_control draws each joint's stiffness (uniform in [15, 25]) when it builds the model, from the
    task's random seed; ours is built by dm_control's own generator from `model_seed` (default 0), so
    `load("lqr", task, model_seed=s)` is the system of `suite.load("lqr", task, task_kwargs={"random": s})`.
    Observation: `position` (q), `velocity` (qd). Reward: 1 - (|q|²/2 + 0.1 |u|²/2) of the control
    `u` (unbounded). Episodes start at rest on the sphere |q| = sqrt(2), have no time limit and end
    (done) when |(q, qd)| < 1e-6. Control steps of one 0.03 s physics step.
    """

    domain = "lqr"
    time_limit = float("inf")
    fast_solver: ClassVar[Mapping[str, int]] = {"iterations": 2, "ls_iterations": 4}

    def __init__(self, task: str = "lqr_2_1", *, model_seed: int = 0, solver: str = "default",
                 debug: bool = False) -> None:
        """Task `lqr_2_1` or `lqr_6_2`, with the springs that dm_control draws from seed `model_seed`."""
        if task not in TASKS:
            raise ValueError(f"unknown lqr task {task!r}; tasks: {tuple(TASKS)}")
        n_bodies, n_actuators = TASKS[task]
        model = suite_model("lqr", n_bodies, n_actuators, np.random.RandomState(model_seed))
        super().__init__(task, model, solver=solver, debug=debug)
        self.model_seed = model_seed

    def initial_state(self, rng: jax.Array) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        """q uniform on the sphere of radius sqrt(2) (a normalized gaussian), qd zero."""
        u = jax.random.normal(rng, (self.sys.nq,), jnp.float32)
        return math.sqrt(2) * u / jnp.linalg.norm(u), jnp.zeros(self.sys.nv, jnp.float32), {}

    def observation(self, ps: brax_physics.State, info: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        """`position` (nq,), `velocity` (nv,)."""
        return collections.OrderedDict([("position", ps.q), ("velocity", ps.qd)])

    def reward(self, ps: brax_physics.State, info: Mapping[str, jax.Array], action: jax.Array) -> jax.Array:
        """1 minus the quadratic state and control cost."""
        return 1 - (0.5 * jnp.dot(ps.q, ps.q) + _CONTROL_COST * 0.5 * jnp.dot(action, action))

    def termination(self, ps: brax_physics.State, info: Mapping[str, jax.Array]) -> jax.Array:
        """1.0 once the state's norm is below 1e-6 (dm_control's terminal state)."""
        norm = jnp.sqrt(jnp.dot(ps.q, ps.q) + jnp.dot(ps.qd, ps.qd) + jnp.dot(ps.act, ps.act))
        return jnp.where(norm < _TERMINAL_NORM, 1.0, 0.0).astype(jnp.float32)


ENV = LQR
