"""A cart-pole built from an inline MJCF string and registered as `mjcf_cartpole`.

The end-to-end tests hand this file to the CLI with `--import`, the way a user adds a custom
environment: MJCF string -> `brax_physics.load_mjcf` -> `brax_envs.PipelineEnv` -> registry.
"""

from __future__ import annotations

import brax_envs
import brax_physics
import jax
import jax.numpy as jnp

NAME = "mjcf_cartpole"
"""Registered environment name."""

XML = """
<mujoco model="cartpole">
  <option timestep="0.02"/>
  <default>
    <geom contype="0" conaffinity="0"/>
  </default>
  <worldbody>
    <geom name="rail" type="capsule" fromto="-1 0 0 1 0 0" size="0.02" rgba="0.3 0.3 0.7 1"/>
    <body name="cart">
      <joint name="slider" type="slide" axis="1 0 0" damping="0.1"/>
      <geom name="cart" type="box" size="0.2 0.1 0.05" mass="1" rgba="0.8 0.6 0.4 1"/>
      <body name="pole">
        <joint name="hinge" type="hinge" axis="0 1 0" damping="0.05"/>
        <geom name="pole" type="capsule" fromto="0 0 0 0 0 0.6" size="0.04" mass="0.1"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="push" joint="slider" gear="10" ctrllimited="true" ctrlrange="-1 1"/>
  </actuator>
</mujoco>
"""
"""The model: a cart on a rail (slide joint) carrying a hinged pole; one motor pushes the cart."""


class MjcfCartpole(brax_envs.PipelineEnv):
    """Keep the pole upright: reward 1 per step, done when the pole leans more than 0.4 rad."""

    def __init__(
        self, backend: str = "generalized", n_frames: int = 2, reset_noise_scale: float = 0.05
    ) -> None:
        """Load the inline MJCF; `n_frames` physics steps per env step."""
        super().__init__(brax_physics.load_mjcf(XML), backend=backend, n_frames=n_frames)
        self._noise = reset_noise_scale

    def reset(self, rng: jax.Array) -> brax_envs.State:
        """Pole near upright, small random velocities."""
        k_q, k_qd = jax.random.split(rng)
        q = jax.random.uniform(k_q, (self.sys.nq,), jnp.float32, -self._noise, self._noise)
        qd = jax.random.uniform(k_qd, (self.sys.nv,), jnp.float32, -self._noise, self._noise)
        ps = self.pipeline_init(q, qd)
        zero = jnp.zeros((), jnp.float32)
        return brax_envs.State(
            pipeline_state=ps,
            obs=self._obs(ps),
            reward=zero,
            done=zero,
            metrics={"reward_survive": zero},
            info={"truncation": zero},
        )

    def step(self, state: brax_envs.State, action: jax.Array) -> brax_envs.State:
        """Push the cart for `n_frames` physics steps."""
        ps = self.pipeline_step(state.pipeline_state, jnp.asarray(action, jnp.float32))
        obs = self._obs(ps)
        done = (jnp.abs(obs[1]) > 0.4).astype(jnp.float32)
        reward = jnp.ones((), jnp.float32)
        return state.replace(
            pipeline_state=ps, obs=obs, reward=reward, done=done, metrics={"reward_survive": reward}
        )

    def _obs(self, ps: brax_physics.State) -> jax.Array:
        return jnp.concatenate([ps.q, ps.qd])


brax_envs.register_environment(NAME, MjcfCartpole)
