"""`ant`: a four-legged ant learns to run in the +x direction (Gym Ant-v4 / Google Brax `ant`)."""

from __future__ import annotations

import brax_physics
import jax
import jax.numpy as jnp

from brax_envs.base import PipelineEnv, State
from brax_envs.envs import _assets

_TORSO = 1  # body index of the torso (0 is the world)


class Ant(PipelineEnv):
    """Gym Ant-v4 / Brax `ant` on assets/ant.xml: 8 hip/ankle motors (gear 150), a free torso.

    Physics step 0.01 s, `n_frames=5` (`dt` 0.05 s), as Google Brax.

    - Observation (27): `q[2:]` (torso z, quaternion, 8 joint angles), `qd` (14); 29 with `q[:2]` when
      `exclude_current_positions_from_observation=False`.
    - Action (8): motor controls in [-1, 1] (torque = 150 * action), order hip_4, ankle_4, hip_1, ankle_1,
      hip_2, ankle_2, hip_3, ankle_3.

    | reward term (`metrics`) | value |
    |---|---|
    | `reward_forward` | torso x velocity over the step: `(x' - x) / dt` |
    | `reward_survive` | `healthy_reward` (times `is_healthy` when `terminate_when_unhealthy=False`) |
    | `reward_ctrl` | `-ctrl_cost_weight * sum(action**2)` |
    | `reward_contact` | 0: contact forces are not used (`use_contact_forces=False`, Brax's default) |

    Also reported: `x_position`, `y_position`, `distance_from_origin`, `x_velocity`, `y_velocity`,
    `forward_reward` (= `reward_forward`).

    Healthy: torso z inside `healthy_z_range` (default (0.2, 1.0)). With `terminate_when_unhealthy`
    (default) an unhealthy state ends the episode (`done=1`; `info['truncation']` stays 0, time limits
    are set by `EpisodeWrapper`). Reset: the 'home' pose (z 0.55, legs bent) plus uniform noise in
    `[-reset_noise_scale, reset_noise_scale]` on `q` (quaternion renormalized), `reset_noise_scale *
    N(0, 1)` on `qd`. `use_contact_forces=True` (Gym's contact cost and 84 contact-force observations)
    is not available yet: it raises `NotImplementedError`.
    """

    def __init__(self, ctrl_cost_weight: float = 0.5, use_contact_forces: bool = False,
                 contact_cost_weight: float = 5e-4, healthy_reward: float = 1.0,
                 terminate_when_unhealthy: bool = True, healthy_z_range: tuple[float, float] = (0.2, 1.0),
                 contact_force_range: tuple[float, float] = (-1.0, 1.0), reset_noise_scale: float = 0.1,
                 exclude_current_positions_from_observation: bool = True, n_frames: int = 5,
                 backend: str = "generalized", debug: bool = False) -> None:
        """Configure reward weights, termination, reset noise and observation (see the class table)."""
        if use_contact_forces:
            raise NotImplementedError("use_contact_forces=True needs per-contact forces from brax_physics")
        super().__init__(_assets.load_system("ant"), backend=backend, n_frames=n_frames, debug=debug)
        self._ctrl_cost_weight = ctrl_cost_weight
        self._contact_cost_weight = contact_cost_weight
        self._contact_force_range = contact_force_range
        self._healthy_reward = healthy_reward
        self._terminate_when_unhealthy = terminate_when_unhealthy
        self._healthy_z_range = healthy_z_range
        self._reset_noise_scale = reset_noise_scale
        self._exclude_current_positions = exclude_current_positions_from_observation
        self._init_q = _assets.home_qpos("ant")

    def reset(self, rng: jax.Array) -> State:
        """Home pose plus noise."""
        k_q, k_qd = jax.random.split(rng)
        s = self._reset_noise_scale
        q = _assets.normalize_free_quat(self.sys, self._init_q + _assets.uniform(k_q, self.sys.nq, s))
        qd = s * jax.random.normal(k_qd, (self.sys.nv,), jnp.float32)
        ps = self.pipeline_init(q, qd)
        zero = jnp.zeros((), jnp.float32)
        metrics = {k: zero for k in ("reward_forward", "reward_survive", "reward_ctrl", "reward_contact",
                                     "x_position", "y_position", "distance_from_origin", "x_velocity",
                                     "y_velocity", "forward_reward")}
        return State(pipeline_state=ps, obs=self._obs(ps), reward=zero, done=zero, metrics=metrics,
                     info={"truncation": zero})

    def step(self, state: State, action: jax.Array) -> State:
        """Apply the motor controls for `n_frames` physics steps."""
        action = jnp.asarray(action, jnp.float32)
        ps0 = state.pipeline_state
        ps = self.pipeline_step(ps0, action)
        velocity = (ps.x.pos[_TORSO] - ps0.x.pos[_TORSO]) / self.dt
        forward = velocity[0]
        z = ps.x.pos[_TORSO, 2]
        lo, hi = self._healthy_z_range
        is_healthy = jnp.where((z < lo) | (z > hi), 0.0, 1.0).astype(jnp.float32)
        healthy = jnp.float32(self._healthy_reward)
        if not self._terminate_when_unhealthy:
            healthy = healthy * is_healthy
        ctrl = -self._ctrl_cost_weight * jnp.sum(jnp.square(action))
        contact = jnp.zeros((), jnp.float32)
        reward = forward + healthy + ctrl + contact
        done = 1.0 - is_healthy if self._terminate_when_unhealthy else jnp.zeros((), jnp.float32)
        pos = ps.x.pos[_TORSO]
        metrics = {
            "reward_forward": forward, "reward_survive": healthy * jnp.ones((), jnp.float32),
            "reward_ctrl": ctrl, "reward_contact": contact, "x_position": pos[0], "y_position": pos[1],
            "distance_from_origin": jnp.linalg.norm(pos), "x_velocity": velocity[0],
            "y_velocity": velocity[1], "forward_reward": forward,
        }
        return state.replace(pipeline_state=ps, obs=self._obs(ps), reward=reward, done=done, metrics=metrics)

    def _obs(self, ps: brax_physics.State) -> jax.Array:
        q = ps.q[2:] if self._exclude_current_positions else ps.q
        return jnp.concatenate([q, ps.qd])
