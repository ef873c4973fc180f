"""`humanoid`: a 3D humanoid learns to walk forward without falling (Gym Humanoid-v4 / Google Brax)."""

from __future__ import annotations

import brax_physics
import jax
import jax.numpy as jnp

from brax_envs.base import PipelineEnv, State
from brax_envs.envs import _assets

_TORSO = 1


class Humanoid(PipelineEnv):
    """Gym Humanoid-v4 / Brax `humanoid` on assets/humanoid.xml: 17 motors, free torso, 11 bodies.

    Physics step 0.003 s, `n_frames=5` (`dt` 0.015 s), as Google Brax. Actions in [-1, 1] are mapped
    linearly onto the motors' ctrlrange [-0.4, 0.4] (as Brax); the control cost uses the mapped control.

    - Observation (244): `q[2:]` (22), `qd` (23), MuJoCo `cinert` of the 11 bodies (110), MuJoCo `cvel` of the
      11 bodies (66), `qfrc_actuator` (23); 246 with `q[:2]` when
      `exclude_current_positions_from_observation=False`.
    - Action (17): motor controls in [-1, 1]: abdomen y/z/x, right hip x/z/y, right knee, left hip x/z/y, left
      knee, right shoulder 1/2, right elbow, left shoulder 1/2, left elbow.

    | reward term (`metrics`) | value |
    |---|---|
    | `reward_linvel` (= `forward_reward`) | `forward_reward_weight * (c' - c)[0] / dt` |
    | `reward_alive` | `healthy_reward` (times `is_healthy` when `terminate_when_unhealthy=False`) |
    | `reward_quadctrl` | `-ctrl_cost_weight * sum(ctrl**2)` with `ctrl` the mapped control |

    `c` is the humanoid's centre of mass. Also reported: `x_position`, `y_position` (of `c`),
    `distance_from_origin`, `x_velocity`, `y_velocity`. Healthy: torso z inside `healthy_z_range`
    (default (1.0, 2.0)); with `terminate_when_unhealthy` an unhealthy state ends the episode
    (`done=1`, `info['truncation']` 0). Reset: `q` and `qd` uniform in
    `[-reset_noise_scale, reset_noise_scale]` (0.01) around the standing pose (torso at 1.4 m).
    External contact forces are not observed (as Brax).
    """

    actions_scaled_to_ctrlrange = True

    def __init__(self, forward_reward_weight: float = 1.25, ctrl_cost_weight: float = 0.1,
                 healthy_reward: float = 5.0, terminate_when_unhealthy: bool = True,
                 healthy_z_range: tuple[float, float] = (1.0, 2.0), reset_noise_scale: float = 1e-2,
                 exclude_current_positions_from_observation: bool = True, n_frames: int = 5,
                 backend: str = "generalized", debug: bool = False) -> None:
        """Configure reward weights, termination, reset noise and observation (see the class table)."""
        super().__init__(_assets.load_system("humanoid"), backend=backend, n_frames=n_frames, debug=debug)
        self._forward_reward_weight = forward_reward_weight
        self._ctrl_cost_weight = ctrl_cost_weight
        self._healthy_reward = healthy_reward
        self._terminate_when_unhealthy = terminate_when_unhealthy
        self._healthy_z_range = healthy_z_range
        self._reset_noise_scale = reset_noise_scale
        self._exclude_current_positions = exclude_current_positions_from_observation
        self._init_q = _assets.home_qpos("humanoid")

    def reset(self, rng: jax.Array) -> State:
        """Standing pose plus noise."""
        k_q, k_qd = jax.random.split(rng)
        s = self._reset_noise_scale
        q = _assets.normalize_free_quat(self.sys, self._init_q + _assets.uniform(k_q, self.sys.nq, s))
        qd = _assets.uniform(k_qd, self.sys.nv, s)
        ps = self.pipeline_init(q, qd)
        zero = jnp.zeros((), jnp.float32)
        metrics = {k: zero for k in ("forward_reward", "reward_linvel", "reward_quadctrl", "reward_alive",
                                     "x_position", "y_position", "distance_from_origin", "x_velocity",
                                     "y_velocity")}
        return State(pipeline_state=ps, obs=self._obs(ps), reward=zero, done=zero, metrics=metrics,
                     info={"truncation": zero})

    def step(self, state: State, action: jax.Array) -> State:
        """Map the action onto the ctrlrange and apply it for `n_frames` physics steps."""
        ctrl = _assets.scale_action(self.sys, jnp.asarray(action, jnp.float32))
        ps0 = state.pipeline_state
        ps = self.pipeline_step(ps0, ctrl)
        com0, com1 = ps0.subtree_com[_TORSO], ps.subtree_com[_TORSO]
        velocity = (com1 - com0) / self.dt
        forward = self._forward_reward_weight * velocity[0]
        z = ps.x.pos[_TORSO, 2]
        lo, hi = self._healthy_z_range
        is_healthy = jnp.where((z < lo) | (z > hi), 0.0, 1.0).astype(jnp.float32)
        alive = jnp.float32(self._healthy_reward) * jnp.ones((), jnp.float32)
        if not self._terminate_when_unhealthy:
            alive = alive * is_healthy
        quadctrl = -self._ctrl_cost_weight * jnp.sum(jnp.square(ctrl))
        done = 1.0 - is_healthy if self._terminate_when_unhealthy else jnp.zeros((), jnp.float32)
        metrics = {
            "forward_reward": forward, "reward_linvel": forward, "reward_quadctrl": quadctrl,
            "reward_alive": alive, "x_position": com1[0], "y_position": com1[1],
            "distance_from_origin": jnp.linalg.norm(com1), "x_velocity": velocity[0],
            "y_velocity": velocity[1],
        }
        return state.replace(pipeline_state=ps, obs=self._obs(ps), reward=forward + alive + quadctrl,
                             done=done, metrics=metrics)

    def _obs(self, ps: brax_physics.State) -> jax.Array:
        q = ps.q[2:] if self._exclude_current_positions else ps.q
        return jnp.concatenate([q, ps.qd, *_assets.com_observation(ps), ps.qfrc_actuator])
