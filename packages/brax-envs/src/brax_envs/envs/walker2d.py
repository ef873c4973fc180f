"""`walker2d`: a planar biped learns to walk forward (Gym Walker2d-v4 / Google Brax `walker2d`)."""

from __future__ import annotations

import brax_physics
import jax
import jax.numpy as jnp

from brax_envs.base import PipelineEnv, State
from brax_envs.envs import _assets

_TORSO = 1


class Walker2d(PipelineEnv):
    """Gym Walker2d-v4 / Brax `walker2d` on assets/walker2d.xml: 6 motors (gear 100).

    Physics step 0.002 s, `n_frames=4` (`dt` 0.008 s). The root joints sit at the torso centre, so
    the observation uses the torso height `z` (world) where Gym has `qpos[1]`.

    - Observation (17): torso z, rooty angle, 6 joint angles, `clip(qd, -10, 10)` (9); 18 with rootx when
      `exclude_current_positions_from_observation=False`.
    - Action (6): motor controls in [-1, 1]: right thigh, leg, foot, left thigh, leg, foot.

    | reward term (`metrics`) | value |
    |---|---|
    | `reward_forward` | `forward_reward_weight * (x' - x) / dt` of the torso |
    | `reward_healthy` | `healthy_reward` (times `is_healthy` when `terminate_when_unhealthy=False`) |
    | `reward_ctrl` | `-ctrl_cost_weight * sum(action**2)` |

    Also reported: `x_position`, `x_velocity`. Healthy: torso z strictly inside `healthy_z_range`
    (0.8, 2.0) and the torso angle `q[2]` inside `healthy_angle_range` (-1, 1). With
    `terminate_when_unhealthy` (default) an unhealthy state ends the episode (`done=1`,
    `info['truncation']` 0). Reset: `q` and `qd` uniform in `[-reset_noise_scale, reset_noise_scale]`
    (default 0.005) around the upright pose.
    """

    def __init__(self, forward_reward_weight: float = 1.0, ctrl_cost_weight: float = 1e-3,
                 healthy_reward: float = 1.0, terminate_when_unhealthy: bool = True,
                 healthy_z_range: tuple[float, float] = (0.8, 2.0),
                 healthy_angle_range: tuple[float, float] = (-1.0, 1.0), reset_noise_scale: float = 5e-3,
                 exclude_current_positions_from_observation: bool = True, n_frames: int = 4,
                 backend: str = "generalized", debug: bool = False) -> None:
        """Configure reward weights, health ranges, reset noise and observation (see the class table)."""
        super().__init__(_assets.load_system("walker2d"), backend=backend, n_frames=n_frames, debug=debug)
        self._forward_reward_weight = forward_reward_weight
        self._ctrl_cost_weight = ctrl_cost_weight
        self._healthy_reward = healthy_reward
        self._terminate_when_unhealthy = terminate_when_unhealthy
        self._healthy_z_range = healthy_z_range
        self._healthy_angle_range = healthy_angle_range
        self._reset_noise_scale = reset_noise_scale
        self._exclude_current_positions = exclude_current_positions_from_observation
        self._init_q = _assets.home_qpos("walker2d")

    def reset(self, rng: jax.Array) -> State:
        """Upright pose plus noise."""
        k_q, k_qd = jax.random.split(rng)
        s = self._reset_noise_scale
        q = self._init_q + _assets.uniform(k_q, self.sys.nq, s)
        qd = _assets.uniform(k_qd, self.sys.nv, s)
        ps = self.pipeline_init(q, qd)
        zero = jnp.zeros((), jnp.float32)
        metrics = {k: zero for k in ("reward_forward", "reward_ctrl", "reward_healthy", "x_position",
                                     "x_velocity")}
        return State(pipeline_state=ps, obs=self._obs(ps), reward=zero, done=zero, metrics=metrics,
                     info={"truncation": zero})

    def is_healthy(self, ps: brax_physics.State) -> jax.Array:
        """() float32 1.0 when `ps` is inside the health ranges, else 0.0."""
        z, angle = ps.x.pos[_TORSO, 2], ps.q[2]
        lo_z, hi_z = self._healthy_z_range
        lo_a, hi_a = self._healthy_angle_range
        ok = (z > lo_z) & (z < hi_z)
        ok &= (angle > lo_a) & (angle < hi_a)
        return ok.astype(jnp.float32)

    def step(self, state: State, action: jax.Array) -> State:
        """Apply the motor controls for `n_frames` physics steps."""
        action = jnp.asarray(action, jnp.float32)
        ps0 = state.pipeline_state
        ps = self.pipeline_step(ps0, action)
        x_velocity = (ps.x.pos[_TORSO, 0] - ps0.x.pos[_TORSO, 0]) / self.dt
        forward = self._forward_reward_weight * x_velocity
        is_healthy = self.is_healthy(ps)
        healthy = jnp.float32(self._healthy_reward) * jnp.ones((), jnp.float32)
        if not self._terminate_when_unhealthy:
            healthy = healthy * is_healthy
        ctrl = -self._ctrl_cost_weight * jnp.sum(jnp.square(action))
        done = 1.0 - is_healthy if self._terminate_when_unhealthy else jnp.zeros((), jnp.float32)
        metrics = {"reward_forward": forward, "reward_ctrl": ctrl, "reward_healthy": healthy,
                   "x_position": ps.x.pos[_TORSO, 0], "x_velocity": x_velocity}
        return state.replace(pipeline_state=ps, obs=self._obs(ps), reward=forward + healthy + ctrl,
                             done=done, metrics=metrics)

    def _obs(self, ps: brax_physics.State) -> jax.Array:
        q = ps.q.at[1].set(ps.x.pos[_TORSO, 2])
        if self._exclude_current_positions:
            q = q[1:]
        return jnp.concatenate([q, jnp.clip(ps.qd, -10.0, 10.0)])
