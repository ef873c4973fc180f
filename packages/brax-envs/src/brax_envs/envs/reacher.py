"""`reacher`: a two-link arm moves its fingertip to a random target (Gym Reacher-v4 / Google Brax)."""

from __future__ import annotations

import brax_physics
import jax
import jax.numpy as jnp
from brax_math import cross

from brax_envs.base import PipelineEnv, State
from brax_envs.envs import _assets

_BODY1, _FINGERTIP, _TARGET = 2, 3, 4  # body indices (world, body0, body1, fingertip, target)


class Reacher(PipelineEnv):
    """Gym Reacher-v4 / Brax `reacher` on assets/reacher.xml: two hinge motors (gear 200).

    Physics step 0.01 s, `n_frames=2` (`dt` 0.02 s). No termination (Gym's time limit is 50 steps;
    set it with `EpisodeWrapper`).

    - Observation (11): `cos` and `sin` of the 2 arm angles, target x, y (`q[2:]`), fingertip x, y velocity
      (Brax's choice; Gym has `qd[:2]`), fingertip - target (3).
    - Action (2): motor controls in [-1, 1] for joint0, joint1.

    | reward term (`metrics`) | value |
    |---|---|
    | `reward_dist` | `-norm(fingertip - target)` after the step (as Brax) |
    | `reward_ctrl` | `-ctrl_cost_weight * sum(action**2)` (weight 1) |

    Reset: arm angles and target uniform noise in `[-reset_noise_scale, reset_noise_scale]` (0.1) on
    `q`, arm velocities uniform in [-0.005, 0.005]; then the target is placed uniformly at angle
    `[0, 2 pi)` and distance `[0, 0.2)` from the centre, at rest.
    """

    def __init__(self, ctrl_cost_weight: float = 1.0, reset_noise_scale: float = 0.1, n_frames: int = 2,
                 backend: str = "generalized", debug: bool = False) -> None:
        """Configure the control cost, reset noise and frames per step."""
        super().__init__(_assets.load_system("reacher"), backend=backend, n_frames=n_frames, debug=debug)
        self._ctrl_cost_weight = ctrl_cost_weight
        self._reset_noise_scale = reset_noise_scale
        self._init_q = _assets.home_qpos("reacher")

    def reset(self, rng: jax.Array) -> State:
        """Noisy arm, random target."""
        k_q, k_qd, k_dist, k_ang = jax.random.split(rng, 4)
        q = self._init_q + _assets.uniform(k_q, self.sys.nq, self._reset_noise_scale)
        qd = _assets.uniform(k_qd, self.sys.nv, 0.005)
        dist = 0.2 * jax.random.uniform(k_dist, (), jnp.float32)
        ang = 2.0 * jnp.pi * jax.random.uniform(k_ang, (), jnp.float32)
        q = q.at[2:].set(jnp.stack([dist * jnp.cos(ang), dist * jnp.sin(ang)]))
        qd = qd.at[2:].set(0.0)
        ps = self.pipeline_init(q, qd)
        zero = jnp.zeros((), jnp.float32)
        return State(pipeline_state=ps, obs=self._obs(ps), reward=zero, done=zero,
                     metrics={"reward_dist": zero, "reward_ctrl": zero}, info={"truncation": zero})

    def step(self, state: State, action: jax.Array) -> State:
        """Apply the motor controls for `n_frames` physics steps."""
        action = jnp.asarray(action, jnp.float32)
        ps = self.pipeline_step(state.pipeline_state, action)
        obs = self._obs(ps)
        dist = -jnp.linalg.norm(obs[-3:])
        ctrl = -self._ctrl_cost_weight * jnp.sum(jnp.square(action))
        return state.replace(pipeline_state=ps, obs=obs, reward=dist + ctrl, done=jnp.zeros_like(state.done),
                             metrics={"reward_dist": dist, "reward_ctrl": ctrl})

    def _obs(self, ps: brax_physics.State) -> jax.Array:
        theta = ps.q[:2]
        tip = ps.x.pos[_FINGERTIP]
        # the fingertip is rigidly attached to body1: its velocity is body1's at the fingertip point
        tip_vel = ps.xd.vel[_BODY1] + cross(ps.xd.ang[_BODY1], tip - ps.x.pos[_BODY1])
        return jnp.concatenate([jnp.cos(theta), jnp.sin(theta), ps.q[2:], tip_vel[:2],
                                tip - ps.x.pos[_TARGET]])
