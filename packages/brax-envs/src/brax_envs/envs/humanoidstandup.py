"""`humanoidstandup`: a humanoid lying on its back learns to stand up (Gym HumanoidStandup / Brax)."""

from __future__ import annotations

import brax_physics
import jax
import jax.numpy as jnp

from brax_envs.base import PipelineEnv, State
from brax_envs.envs import _assets

_TORSO = 1


class HumanoidStandup(PipelineEnv):
    """Gym HumanoidStandup-v4 / Brax `humanoidstandup` on assets/humanoidstandup.xml (the humanoid body).

    Physics step 0.003 s, `n_frames=5` (`dt` 0.015 s), as Google Brax. Actions in [-1, 1] are mapped
    onto the ctrlrange [-0.4, 0.4]. No termination: episodes end only by time limit.

    - Observation (244): `q[2:]` (22), `qd` (23), MuJoCo `cinert` (110) and `cvel` (66) of the 11 bodies,
      `qfrc_actuator` (23).
    - Action (17): motor controls in [-1, 1], as `humanoid`.

    | reward term (`metrics`) | value |
    |---|---|
    | `reward_linup` | `uph_cost_weight * z / dt`, `z` the torso height (Brax divides by the env `dt`) |
    | `reward_quadctrl` | `-ctrl_cost_weight * sum(ctrl**2)` with `ctrl` the mapped control (Brax's 0.01) |
    | `reward_alive` | 1 |

    Reset: `q` and `qd` uniform in `[-reset_noise_scale, reset_noise_scale]` (0.01) around the lying pose.
    """

    actions_scaled_to_ctrlrange = True

    def __init__(self, uph_cost_weight: float = 1.0, ctrl_cost_weight: float = 0.01,
                 reset_noise_scale: float = 1e-2, n_frames: int = 5, backend: str = "generalized",
                 debug: bool = False) -> None:
        """Configure reward weights and reset noise (see the class table)."""
        super().__init__(_assets.load_system("humanoidstandup"), backend=backend, n_frames=n_frames,
                         debug=debug)
        self._uph_cost_weight = uph_cost_weight
        self._ctrl_cost_weight = ctrl_cost_weight
        self._reset_noise_scale = reset_noise_scale
        self._init_q = _assets.home_qpos("humanoidstandup")

    def reset(self, rng: jax.Array) -> State:
        """Lying pose plus noise."""
        k_q, k_qd = jax.random.split(rng)
        s = self._reset_noise_scale
        q = _assets.normalize_free_quat(self.sys, self._init_q + _assets.uniform(k_q, self.sys.nq, s))
        qd = _assets.uniform(k_qd, self.sys.nv, s)
        ps = self.pipeline_init(q, qd)
        zero = jnp.zeros((), jnp.float32)
        metrics = {k: zero for k in ("reward_linup", "reward_quadctrl", "reward_alive")}
        return State(pipeline_state=ps, obs=self._obs(ps), reward=zero, done=zero, metrics=metrics,
                     info={"truncation": zero})

    def step(self, state: State, action: jax.Array) -> State:
        """Map the action onto the ctrlrange and apply it for `n_frames` physics steps."""
        ctrl = _assets.scale_action(self.sys, jnp.asarray(action, jnp.float32))
        ps = self.pipeline_step(state.pipeline_state, ctrl)
        linup = self._uph_cost_weight * ps.x.pos[_TORSO, 2] / self.dt
        quadctrl = -self._ctrl_cost_weight * jnp.sum(jnp.square(ctrl))
        alive = jnp.ones((), jnp.float32)
        metrics = {"reward_linup": linup, "reward_quadctrl": quadctrl, "reward_alive": alive}
        return state.replace(pipeline_state=ps, obs=self._obs(ps), reward=linup + quadctrl + alive,
                             done=jnp.zeros_like(state.done), metrics=metrics)

    def _obs(self, ps: brax_physics.State) -> jax.Array:
        return jnp.concatenate([ps.q[2:], ps.qd, *_assets.com_observation(ps), ps.qfrc_actuator])
