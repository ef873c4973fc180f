"""`swimmer`: a three-link swimmer learns to swim forward in a viscous fluid (Gym Swimmer-v4)."""

from __future__ import annotations

import brax_physics
import jax
import jax.numpy as jnp

from brax_envs.base import PipelineEnv, State
from brax_envs.envs import _assets


class Swimmer(PipelineEnv):
    """Gym Swimmer-v4 on assets/swimmer.xml: two hinge motors (gear 150), planar root, fluid drag.

    Physics step 0.01 s, `n_frames=4` (`dt` 0.04 s), as Gym (Google Brax has no generalized swimmer).
    Propulsion comes from MuJoCo's fluid model (`<option density="4000" viscosity="0.1"/>`), so the
    physics must support fluid forces to load this model. No termination.

    - Observation (8): `q[2:]` (torso angle, 2 joint angles), `qd` (5); 10 with `q[:2]` when
      `exclude_current_positions_from_observation=False`.
    - Action (2): motor controls in [-1, 1] for the two body joints.

    | reward term (`metrics`) | value |
    |---|---|
    | `reward_fwd` | `forward_reward_weight * (q'[0] - q[0]) / dt`, the torso's x velocity |
    | `reward_ctrl` | `-ctrl_cost_weight * sum(action**2)` (1e-4) |

    Also reported: `x_position`, `y_position`, `distance_from_origin`, `x_velocity`, `y_velocity`,
    `forward_reward`. Reset: `q` and `qd` uniform in `[-reset_noise_scale, reset_noise_scale]` (0.1).
    """

    def __init__(self, forward_reward_weight: float = 1.0, ctrl_cost_weight: float = 1e-4,
                 reset_noise_scale: float = 0.1, exclude_current_positions_from_observation: bool = True,
                 n_frames: int = 4, backend: str = "generalized", debug: bool = False) -> None:
        """Configure reward weights, reset noise and observation (see the class table)."""
        super().__init__(_assets.load_system("swimmer"), backend=backend, n_frames=n_frames, debug=debug)
        self._forward_reward_weight = forward_reward_weight
        self._ctrl_cost_weight = ctrl_cost_weight
        self._reset_noise_scale = reset_noise_scale
        self._exclude_current_positions = exclude_current_positions_from_observation
        self._init_q = _assets.home_qpos("swimmer")

    def reset(self, rng: jax.Array) -> State:
        """Straight swimmer plus noise."""
        k_q, k_qd = jax.random.split(rng)
        s = self._reset_noise_scale
        q = self._init_q + _assets.uniform(k_q, self.sys.nq, s)
        qd = _assets.uniform(k_qd, self.sys.nv, s)
        ps = self.pipeline_init(q, qd)
        zero = jnp.zeros((), jnp.float32)
        metrics = {k: zero for k in ("reward_fwd", "reward_ctrl", "x_position", "y_position",
                                     "distance_from_origin", "x_velocity", "y_velocity", "forward_reward")}
        return State(pipeline_state=ps, obs=self._obs(ps), reward=zero, done=zero, metrics=metrics,
                     info={"truncation": zero})

    def step(self, state: State, action: jax.Array) -> State:
        """Apply the motor controls for `n_frames` physics steps."""
        action = jnp.asarray(action, jnp.float32)
        ps0 = state.pipeline_state
        ps = self.pipeline_step(ps0, action)
        velocity = (ps.q[:2] - ps0.q[:2]) / self.dt
        fwd = self._forward_reward_weight * velocity[0]
        ctrl = -self._ctrl_cost_weight * jnp.sum(jnp.square(action))
        metrics = {"reward_fwd": fwd, "reward_ctrl": ctrl, "x_position": ps.q[0], "y_position": ps.q[1],
                   "distance_from_origin": jnp.linalg.norm(ps.q[:2]), "x_velocity": velocity[0],
                   "y_velocity": velocity[1], "forward_reward": fwd}
        return state.replace(pipeline_state=ps, obs=self._obs(ps), reward=fwd + ctrl,
                             done=jnp.zeros_like(state.done), metrics=metrics)

    def _obs(self, ps: brax_physics.State) -> jax.Array:
        q = ps.q[2:] if self._exclude_current_positions else ps.q
        return jnp.concatenate([q, ps.qd])
