"""dm_control's cheetah domain: a planar cheetah that runs forward."""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import ClassVar

import brax_physics
import jax
import jax.numpy as jnp
import numpy as np

from brax_envs.dm_control._suite import SuiteEnv, suite_model
from brax_envs.dm_control.rewards import tolerance

RUN_SPEED = 10.0
"""Forward speed (m/s) at and above which the run reward is 1."""


class Cheetah(SuiteEnv):
    """Cheetah: a planar two-legged runner (root slides x, z and hinge y; six leg hinges).

    Observation: `position` (qpos without the root's x) and `velocity` (qvel). Reward: the torso
    subtree's forward speed, linear from 0 at rest to 1 at 10 m/s. Episodes start with the limited
    joints uniform in their range, settled by 200 physics steps at zero control. 1000 steps of 0.01 s.
    """

    domain = "cheetah"
    time_limit = 10.0
    fast_solver: ClassVar[Mapping[str, int]] = {"iterations": 4, "ls_iterations": 8}
    settle_steps: ClassVar[int] = 200
    """Physics steps at zero control that settle a new episode's random pose (dm_control's)."""

    def __init__(self, task: str = "run", *, solver: str = "default", debug: bool = False) -> None:
        """Task `run`."""
        if task != "run":
            raise ValueError(f"unknown cheetah task {task!r}")
        super().__init__(task, suite_model("cheetah"), solver=solver, debug=debug)
        m = self.model
        if m.nq != m.njnt or m.nv != m.nq:
            raise ValueError("cheetah: expected one scalar dof per joint")
        limited = m.jnt_limited == 1
        self._limited = np.asarray(m.jnt_qposadr[limited], np.int32)
        self._lo, self._hi = (np.asarray(r, np.float32) for r in m.jnt_range[limited].T)

    def initial_state(self, rng: jax.Array) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        """Limited joints uniform in their range, then `settle_steps` physics steps at zero control."""
        sys = self.sys
        q0 = jnp.asarray(self.model.qpos0, jnp.float32)
        q = q0.at[self._limited].set(jax.random.uniform(rng, self._lo.shape, jnp.float32, self._lo, self._hi))
        zero = jnp.zeros((sys.nu,), jnp.float32)
        # dm_control's first settling step finishes the one its reset began at qpos0 at rest: the
        # velocity update comes from there, the position update starts from the drawn pose
        first = brax_physics.step(sys, brax_physics.init(sys, q0), zero)
        dt = float(self.model.opt.timestep)
        ps = brax_physics.init(sys, q + dt * first.qd, first.qd)

        def settle(s: brax_physics.State, _: None) -> tuple[brax_physics.State, None]:
            return brax_physics.step(sys, s, zero), None

        ps, _ = jax.lax.scan(settle, ps, None, length=self.settle_steps - 1)
        return ps.q, ps.qd, {}

    def observation(self, ps: brax_physics.State, info: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        """`position` (nq - 1,), `velocity` (nv,)."""
        # an OrderedDict: jit keeps its keys in dm_control's order (a dict's come back sorted)
        return collections.OrderedDict(position=ps.q[1:], velocity=ps.qd)

    def speed(self, ps: brax_physics.State) -> jax.Array:
        """() forward velocity of the cheetah's center of mass."""
        return self.subtree_linvel(ps, "torso")[0]

    def reward(self, ps: brax_physics.State, info: Mapping[str, jax.Array], action: jax.Array) -> jax.Array:
        """Run reward: linear in forward speed up to `RUN_SPEED`."""
        return tolerance(self.speed(ps), (RUN_SPEED, float("inf")), margin=RUN_SPEED, value_at_margin=0.0,
                         sigmoid="linear")


ENV = Cheetah
