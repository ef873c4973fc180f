"""`halfcheetah`: a planar cheetah learns to run in the +x direction (Gym HalfCheetah-v4 / Brax)."""

from __future__ import annotations

import brax_physics
import jax
import jax.numpy as jnp

from brax_envs.base import PipelineEnv, State
from brax_envs.envs import _assets

_TORSO = 1


class Halfcheetah(PipelineEnv):
    """Gym HalfCheetah-v4 / Brax `halfcheetah` on assets/halfcheetah.xml: 6 motors, planar root.

    Physics step 0.01 s, `n_frames=5` (`dt` 0.05 s). No termination: episodes end only by time limit
    (`EpisodeWrapper`), so `done` and `info['truncation']` stay 0 here.

    - Observation (17): `q[1:]` (rootz, rooty, 6 joint angles), `qd` (9); 18 with rootx when
      `exclude_current_positions_from_observation=False`.
    - Action (6): motor controls in [-1, 1] (gears 120, 90, 60, 120, 60, 30): bthigh, bshin, bfoot, fthigh,
      fshin, ffoot.

    | reward term (`metrics`) | value |
    |---|---|
    | `reward_run` | `forward_reward_weight * (x' - x) / dt` of the torso |
    | `reward_ctrl` | `-ctrl_cost_weight * sum(action**2)` |

    Also reported: `x_position`, `x_velocity`. Reset: `q` uniform in `[-reset_noise_scale,
    reset_noise_scale]`, `qd = reset_noise_scale * N(0, 1)`.
    """

    def __init__(self, forward_reward_weight: float = 1.0, ctrl_cost_weight: float = 0.1,
                 reset_noise_scale: float = 0.1, exclude_current_positions_from_observation: bool = True,
                 n_frames: int = 5, backend: str = "generalized", debug: bool = False) -> None:
        """Configure reward weights, reset noise and observation (see the class table)."""
        super().__init__(_assets.load_system("halfcheetah"), backend=backend, n_frames=n_frames, debug=debug)
        self._forward_reward_weight = forward_reward_weight
        self._ctrl_cost_weight = ctrl_cost_weight
        self._reset_noise_scale = reset_noise_scale
        self._exclude_current_positions = exclude_current_positions_from_observation
        self._init_q = _assets.home_qpos("halfcheetah")

    def reset(self, rng: jax.Array) -> State:
        """Zero pose plus noise."""
        k_q, k_qd = jax.random.split(rng)
        s = self._reset_noise_scale
        q = self._init_q + _assets.uniform(k_q, self.sys.nq, s)
        qd = s * jax.random.normal(k_qd, (self.sys.nv,), jnp.float32)
        ps = self.pipeline_init(q, qd)
        zero = jnp.zeros((), jnp.float32)
        metrics = {k: zero for k in ("x_position", "x_velocity", "reward_run", "reward_ctrl")}
        return State(pipeline_state=ps, obs=self._obs(ps), reward=zero, done=zero, metrics=metrics,
                     info={"truncation": zero})

    def step(self, state: State, action: jax.Array) -> State:
        """Apply the motor controls for `n_frames` physics steps."""
        action = jnp.asarray(action, jnp.float32)
        ps0 = state.pipeline_state
        ps = self.pipeline_step(ps0, action)
        x_velocity = (ps.x.pos[_TORSO, 0] - ps0.x.pos[_TORSO, 0]) / self.dt
        run = self._forward_reward_weight * x_velocity
        ctrl = -self._ctrl_cost_weight * jnp.sum(jnp.square(action))
        metrics = {"x_position": ps.x.pos[_TORSO, 0], "x_velocity": x_velocity, "reward_run": run,
                   "reward_ctrl": ctrl}
        return state.replace(pipeline_state=ps, obs=self._obs(ps), reward=run + ctrl,
                             done=jnp.zeros_like(state.done), metrics=metrics)

    def _obs(self, ps: brax_physics.State) -> jax.Array:
        q = ps.q[1:] if self._exclude_current_positions else ps.q
        return jnp.concatenate([q, ps.qd])
