"""`fast`: a tiny pipeline-free environment for testing trainers quickly."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from brax_envs.base import Env, State


class Fast(Env):
    """A damped point mass on a line that should move to `target` and stay there.

    No physics pipeline: `pipeline_state` is the (2,) vector `[position, velocity]` and one step costs
    a handful of flops, so trainers can be tested end to end in seconds. Dynamics (deterministic,
    semi-implicit Euler with `dt`): `velocity += dt * (clip(action, -1, 1) - damping * velocity)`,
    then `position += dt * velocity`. Episodes never terminate (`done` is always 0; use
    `EpisodeWrapper` for a time limit). A random policy scores about -1 per step, a good one
    approaches 0 after ~100 steps, so learning progress is easy to detect.

    - Observation (2): position, velocity.
    - Action (1): force, clipped to [-1, 1].

    | reward term (`metrics`) | value |
    |---|---|
    | `reward_distance` | `-(position - target)**2` |
    | `reward_ctrl` | `-ctrl_cost_weight * action**2` (after clipping) |

    Also in `metrics`: `x_position`, `x_velocity`. Reset: position uniform in
    `[-reset_noise_scale, reset_noise_scale]`, velocity 0.
    """

    def __init__(self, target: float = 1.0, ctrl_cost_weight: float = 0.01, damping: float = 1.0,
                 reset_noise_scale: float = 0.1, dt: float = 0.02, backend: str = "none") -> None:
        """Configure the target, cost weight, damping, reset noise and step length.

        `backend` is accepted for call compatibility with physics environments and ignored.
        """
        self._target = target
        self._ctrl_cost_weight = ctrl_cost_weight
        self._damping = damping
        self._reset_noise_scale = reset_noise_scale
        self._dt = dt
        del backend

    def reset(self, rng: jax.Array) -> State:
        """Start near the origin at rest."""
        pos = jax.random.uniform(rng, (), jnp.float32, -self._reset_noise_scale, self._reset_noise_scale)
        x = jnp.stack([pos, jnp.zeros((), jnp.float32)])
        zero = jnp.zeros((), jnp.float32)
        metrics = {"reward_distance": zero, "reward_ctrl": zero, "x_position": pos, "x_velocity": zero}
        return State(pipeline_state=x, obs=x, reward=zero, done=zero, metrics=metrics,
                     info={"truncation": zero})

    def step(self, state: State, action: jax.Array) -> State:
        """Advance the point mass by one `dt`."""
        force = jnp.clip(jnp.asarray(action, jnp.float32)[0], -1.0, 1.0)
        pos, vel = state.pipeline_state[0], state.pipeline_state[1]
        vel = vel + self._dt * (force - self._damping * vel)
        pos = pos + self._dt * vel
        x = jnp.stack([pos, vel])
        reward_distance = -jnp.square(pos - self._target)
        reward_ctrl = -self._ctrl_cost_weight * jnp.square(force)
        metrics = {"reward_distance": reward_distance, "reward_ctrl": reward_ctrl, "x_position": pos,
                   "x_velocity": vel}
        return state.replace(pipeline_state=x, obs=x, reward=reward_distance + reward_ctrl,
                             done=jnp.zeros_like(state.done), metrics=metrics,
                             info={**state.info, "truncation": jnp.zeros_like(state.done)})

    @property
    def observation_size(self) -> int:
        """2: position and velocity."""
        return 2

    @property
    def action_size(self) -> int:
        """1: the force."""
        return 1

    @property
    def dt(self) -> jax.Array:
        """() seconds per step."""
        return jnp.asarray(self._dt, jnp.float32)
