"""dm_control's cartpole domain: balance and swing up one, two or three poles on a cart."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import brax_math
import brax_physics
import jax
import jax.numpy as jnp

from brax_envs.dm_control._suite import SuiteEnv, suite_model
from brax_envs.dm_control.rewards import tolerance


class Cartpole(SuiteEnv):
    """Cartpole: a cart on a rail (slider) with a chain of `num_poles` hinged poles.

    Observation: `position` (cart x, then each pole's world zz and xz orientation entries) and
    `velocity` (qvel). Reward (dense): upright · centered · small control · small angular velocity;
    (sparse): 1 with the cart within ±0.25 and every pole's cosine above 0.995. Balance starts near
    upright, swing-up hanging down. 1000 control steps of 0.01 s.
    """

    domain = "cartpole"
    time_limit = 10.0
    fast_solver: ClassVar[Mapping[str, int]] = {"iterations": 2, "ls_iterations": 4}

    def __init__(self, task: str = "balance", *, solver: str = "default", debug: bool = False) -> None:
        """Task `balance`, `balance_sparse`, `swingup`, `swingup_sparse`, `two_poles` or `three_poles`."""
        poles = {"two_poles": 2, "three_poles": 3}.get(task, 1)
        if task not in ("balance", "balance_sparse", "swingup", "swingup_sparse", "two_poles", "three_poles"):
            raise ValueError(f"unknown cartpole task {task!r}")
        super().__init__(task, suite_model("cartpole", poles), solver=solver, debug=debug)
        self._swing_up = task not in ("balance", "balance_sparse")
        self._sparse = task.endswith("_sparse")
        self._poles = self.body_ids(*[f"pole_{i}" for i in range(1, poles + 1)])

    def initial_state(self, rng: jax.Array) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        """Swing-up: cart near 0, first pole hanging (pi ± 0.01 normal), the others ±0.1 normal;
        balance: cart uniform in ±0.1, poles uniform in ±0.034; velocities 0.01 normal."""
        nv = self.sys.nv
        k1, k2, k3, k4 = jax.random.split(rng, 4)
        if self._swing_up:
            q = jnp.concatenate([0.01 * jax.random.normal(k1, (1,)),
                                 jnp.pi + 0.01 * jax.random.normal(k2, (1,)),
                                 0.1 * jax.random.normal(k4, (nv - 2,))])
        else:
            q = jnp.concatenate([jax.random.uniform(k1, (1,), minval=-0.1, maxval=0.1),
                                 jax.random.uniform(k2, (nv - 1,), minval=-0.034, maxval=0.034)])
        return q, 0.01 * jax.random.normal(k3, (nv,)), {}

    def _pole_xmat(self, ps: brax_physics.State) -> jax.Array:
        return brax_math.quat_to_mat(ps.x.rot[self._poles])

    def observation(self, ps: brax_physics.State, info: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        """`position` (1 + 2·poles,), `velocity` (nv,)."""
        m = self._pole_xmat(ps)
        zz_xz = jnp.stack([m[:, 2, 2], m[:, 0, 2]], axis=-1).reshape(-1)
        return {"position": jnp.concatenate([ps.q[:1], zz_xz]), "velocity": ps.qd}

    def reward(self, ps: brax_physics.State, info: Mapping[str, jax.Array], action: jax.Array) -> jax.Array:
        """Dense or sparse balance reward."""
        cosine = self._pole_xmat(ps)[:, 2, 2]
        cart = ps.q[0]
        if self._sparse:
            return tolerance(cart, (-0.25, 0.25)) * jnp.prod(tolerance(cosine, (0.995, 1.0)))
        upright = (cosine + 1) / 2
        centered = (1 + tolerance(cart, margin=2)) / 2
        small_control = (4 + tolerance(action, margin=1, value_at_margin=0, sigmoid="quadratic")[0]) / 5
        small_velocity = (1 + jnp.min(tolerance(ps.qd[1:], margin=5))) / 2
        return jnp.mean(upright) * small_control * small_velocity * centered
ENV = Cartpole
