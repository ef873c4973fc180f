"""`inverted_double_pendulum`: balance two stacked poles on a cart (Gym InvertedDoublePendulum-v4 / Brax)."""

from __future__ import annotations

import brax_physics
import jax
import jax.numpy as jnp
from brax_math import Transform

from brax_envs.base import PipelineEnv, State
from brax_envs.envs import _assets

_POLE2 = 3  # body index of pole2 (world, cart, pole, pole2)
TIP_OFFSET = (0.0, 0.0, 0.6)
"""The tip (site 'tip' of the asset) in the pole2 frame."""


def tip_position(ps: brax_physics.State) -> jax.Array:
    """(3,) world position of the pole tip: the pole2 frame applied to `TIP_OFFSET`."""
    x = Transform(pos=ps.x.pos[_POLE2], rot=ps.x.rot[_POLE2])
    return x.do(Transform.create(pos=jnp.asarray(TIP_OFFSET, jnp.float32))).pos


class InvertedDoublePendulum(PipelineEnv):
    """Gym InvertedDoublePendulum-v4 / Brax `inverted_double_pendulum` on assets/inverted_double_pendulum.xml.

    Physics step 0.01 s, `n_frames=2` (`dt` 0.02 s), as Google Brax.

    - Observation (8): cart position, `sin` and `cos` of both hinge angles, `clip(qd, -10, 10)` (3).
    - Action (1): cart force control in [-1, 1] (gear 500).

    | reward term (`metrics`) | value |
    |---|---|
    | `reward_alive` | `healthy_reward` (10) while the tip is above 1 m, 0 on the terminating step |
    | `reward_distance` | `-(0.01 * x**2 + (z - 2)**2)`, `(x, z)` the tip position |
    | `reward_velocity` | `-(1e-3 * qd[1]**2 + 5e-3 * qd[2]**2)` |

    Terminates (`done=1`, `info['truncation']` 0) when the tip height `z <= 1`. Reset: `q` uniform in
    `[-reset_noise_scale, reset_noise_scale]`, `qd = reset_noise_scale * N(0, 1)` (Brax's 0.01).
    Gym's 3 constraint-force observations are not included (as Brax).
    """

    def __init__(self, healthy_reward: float = 10.0, reset_noise_scale: float = 0.01, n_frames: int = 2,
                 backend: str = "generalized", debug: bool = False) -> None:
        """Configure the alive bonus, reset noise and frames per step."""
        super().__init__(_assets.load_system("inverted_double_pendulum"), backend=backend,
                         n_frames=n_frames, debug=debug)
        self._healthy_reward = healthy_reward
        self._reset_noise_scale = reset_noise_scale
        self._init_q = _assets.home_qpos("inverted_double_pendulum")

    def reset(self, rng: jax.Array) -> State:
        """Upright poles plus noise."""
        k_q, k_qd = jax.random.split(rng)
        s = self._reset_noise_scale
        q = self._init_q + _assets.uniform(k_q, self.sys.nq, s)
        qd = s * jax.random.normal(k_qd, (self.sys.nv,), jnp.float32)
        ps = self.pipeline_init(q, qd)
        zero = jnp.zeros((), jnp.float32)
        metrics = {"reward_alive": zero, "reward_distance": zero, "reward_velocity": zero}
        return State(pipeline_state=ps, obs=self._obs(ps), reward=zero, done=zero, metrics=metrics,
                     info={"truncation": zero})

    def step(self, state: State, action: jax.Array) -> State:
        """Push the cart for `n_frames` physics steps."""
        ps = self.pipeline_step(state.pipeline_state, jnp.asarray(action, jnp.float32))
        x, _, z = tip_position(ps)
        v1, v2 = ps.qd[1], ps.qd[2]
        distance = -(0.01 * x**2 + (z - 2.0) ** 2)
        velocity = -(1e-3 * v1**2 + 5e-3 * v2**2)
        done = jnp.where(z <= 1.0, 1.0, 0.0).astype(jnp.float32)
        alive = (1.0 - done) * self._healthy_reward
        metrics = {"reward_alive": alive, "reward_distance": distance, "reward_velocity": velocity}
        return state.replace(pipeline_state=ps, obs=self._obs(ps), reward=alive + distance + velocity,
                             done=done, metrics=metrics)

    def _obs(self, ps: brax_physics.State) -> jax.Array:
        return jnp.concatenate([ps.q[:1], jnp.sin(ps.q[1:]), jnp.cos(ps.q[1:]), jnp.clip(ps.qd, -10.0, 10.0)])
