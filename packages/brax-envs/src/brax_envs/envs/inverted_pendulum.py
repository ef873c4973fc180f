"""`inverted_pendulum`: balance a pole on a cart (Gym InvertedPendulum-v4 / Google Brax)."""

from __future__ import annotations

import brax_physics
import jax
import jax.numpy as jnp

from brax_envs.base import PipelineEnv, State
from brax_envs.envs import _assets


class InvertedPendulum(PipelineEnv):
    """Gym InvertedPendulum-v4 / Brax `inverted_pendulum` on assets/inverted_pendulum.xml.

    Physics step 0.02 s, `n_frames=2` (`dt` 0.04 s).

    - Observation (4): cart position, pole angle, cart velocity, pole angular velocity (`q`, `qd`).
    - Action (1): cart force in [-1, 1], mapped linearly onto the motor's ctrlrange [-3, 3] (gear 100),
      as Google Brax does: a policy's whole action range reaches the whole force range.

    | reward term (`metrics`) | value |
    |---|---|
    | `reward_survive` | 1 every step (also on the terminating step, as Gym-v4 and Brax) |

    Terminates (`done=1`, `info['truncation']` 0) when `|pole angle| > 0.2` rad. Reset: `q` and `qd`
    uniform in `[-reset_noise_scale, reset_noise_scale]` (0.01).
    """

    actions_scaled_to_ctrlrange = True

    def __init__(self, reset_noise_scale: float = 0.01, n_frames: int = 2, backend: str = "generalized",
                 debug: bool = False) -> None:
        """Configure the reset noise and frames per step."""
        super().__init__(_assets.load_system("inverted_pendulum"), backend=backend, n_frames=n_frames,
                         debug=debug)
        self._reset_noise_scale = reset_noise_scale
        self._init_q = _assets.home_qpos("inverted_pendulum")

    def reset(self, rng: jax.Array) -> State:
        """Upright pole plus noise."""
        k_q, k_qd = jax.random.split(rng)
        s = self._reset_noise_scale
        q = self._init_q + _assets.uniform(k_q, self.sys.nq, s)
        qd = _assets.uniform(k_qd, self.sys.nv, s)
        ps = self.pipeline_init(q, qd)
        zero = jnp.zeros((), jnp.float32)
        return State(pipeline_state=ps, obs=self._obs(ps), reward=zero, done=zero,
                     metrics={"reward_survive": zero}, info={"truncation": zero})

    def step(self, state: State, action: jax.Array) -> State:
        """Map the action onto the ctrlrange and push the cart for `n_frames` physics steps."""
        ctrl = _assets.scale_action(self.sys, jnp.asarray(action, jnp.float32))
        ps = self.pipeline_step(state.pipeline_state, ctrl)
        obs = self._obs(ps)
        done = jnp.where(jnp.abs(obs[1]) > 0.2, 1.0, 0.0).astype(jnp.float32)
        reward = jnp.ones((), jnp.float32)
        return state.replace(pipeline_state=ps, obs=obs, reward=reward, done=done,
                             metrics={"reward_survive": reward})

    def _obs(self, ps: brax_physics.State) -> jax.Array:
        return jnp.concatenate([ps.q, ps.qd])
