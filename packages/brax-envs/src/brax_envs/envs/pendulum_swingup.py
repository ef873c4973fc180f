"""`pendulum_swingup`: swing a torque-limited pendulum up and balance it."""

from __future__ import annotations

import functools
import importlib.resources

import brax_physics
import jax
import jax.numpy as jnp

from brax_envs.base import PipelineEnv, State


@functools.cache
def _asset_xml() -> str:
    return (importlib.resources.files("brax_envs.envs") / "assets" / "pendulum_swingup.xml").read_text()


def load_system() -> brax_physics.System:
    """The pendulum `System` (assets/pendulum_swingup.xml)."""
    return brax_physics.load_mjcf(_asset_xml())


class PendulumSwingup(PipelineEnv):
    """A 1 kg, 0.5 m pole on a hinge, driven by a motor too weak (1 N m) to lift it directly.

    The hinge angle `q` is 0 hanging down and pi upright; `phi = q - pi` is the angle from upright.
    Physics timestep 0.01 s, `n_frames=2` by default (`dt` 0.02 s). No termination: episodes end only
    by time limit (`EpisodeWrapper`), so `info['truncation']` is 0 here.

    - Observation (3): `cos(phi)`, `sin(phi)`, angular velocity `qd`.
    - Action (1): motor torque in N m, clamped to [-1, 1] by the actuator's ctrlrange.

    | reward term (`metrics`) | value |
    |---|---|
    | `reward_upright` | `(1 + cos(phi)) / 2`, 1 upright, 0 hanging |
    | `reward_ctrl` | `-ctrl_cost_weight * sum(action**2)` |

    Reset: `q` uniform in `pi + [-reset_angle_range, reset_angle_range]` (the default pi covers every
    angle), `qd` uniform in `[-reset_velocity_range, reset_velocity_range]`.
    """

    def __init__(self, ctrl_cost_weight: float = 0.001, reset_angle_range: float = float(jnp.pi),
                 reset_velocity_range: float = 1.0, n_frames: int = 2, backend: str = "generalized",
                 debug: bool = False) -> None:
        """Configure the control cost, reset distribution and frames per step."""
        super().__init__(load_system(), backend=backend, n_frames=n_frames, debug=debug)
        self._ctrl_cost_weight = ctrl_cost_weight
        self._reset_angle_range = reset_angle_range
        self._reset_velocity_range = reset_velocity_range

    def reset(self, rng: jax.Array) -> State:
        """Random angle and velocity."""
        k_q, k_qd = jax.random.split(rng)
        a, v = self._reset_angle_range, self._reset_velocity_range
        q = jnp.pi + jax.random.uniform(k_q, (self.sys.nq,), jnp.float32, -a, a)
        qd = jax.random.uniform(k_qd, (self.sys.nv,), jnp.float32, -v, v)
        pipeline_state = self.pipeline_init(q, qd)
        zero = jnp.zeros((), jnp.float32)
        metrics = {"reward_upright": zero, "reward_ctrl": zero}
        return State(pipeline_state=pipeline_state, obs=self._obs(pipeline_state), reward=zero, done=zero,
                     metrics=metrics, info={"truncation": zero})

    def step(self, state: State, action: jax.Array) -> State:
        """Apply the torque for `n_frames` physics steps."""
        action = jnp.asarray(action, jnp.float32)
        pipeline_state = self.pipeline_step(state.pipeline_state, action)
        upright = 0.5 * (1.0 - jnp.cos(pipeline_state.q[0]))  # cos(q - pi) = -cos(q)
        ctrl = -self._ctrl_cost_weight * jnp.sum(jnp.square(action))
        metrics = {"reward_upright": upright, "reward_ctrl": ctrl}
        return state.replace(pipeline_state=pipeline_state, obs=self._obs(pipeline_state),
                             reward=upright + ctrl, done=jnp.zeros_like(state.done), metrics=metrics)

    def _obs(self, pipeline_state: brax_physics.State) -> jax.Array:
        phi = pipeline_state.q[0] - jnp.pi
        return jnp.stack([jnp.cos(phi), jnp.sin(phi), pipeline_state.qd[0]])
