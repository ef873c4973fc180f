"""`pusher`: a 7-joint arm pushes a cylinder to a goal (Gym Pusher-v4 / Google Brax `pusher`)."""

from __future__ import annotations

import brax_physics
import jax
import jax.numpy as jnp

from brax_envs.base import PipelineEnv, State
from brax_envs.envs import _assets


class Pusher(PipelineEnv):
    """Gym Pusher-v4 / Brax `pusher` on assets/pusher.xml: 7 arm motors, object and goal on slides.

    Physics step 0.01 s, `n_frames=5` (`dt` 0.05 s), no gravity. Actions in [-1, 1] are mapped onto
    the motors' ctrlrange [-2, 2] (as Brax; Gym's action space is [-2, 2] itself).

    - Observation (23): arm `q[:7]`, arm `qd[:7]`, frame positions of the bodies `tips_arm`, `object`, `goal`
      (3 each).
    - Action (7): motor controls in [-1, 1]: shoulder pan/lift, upper-arm roll, elbow flex, forearm roll,
      wrist flex/roll.

    | reward term (`metrics`) | value |
    |---|---|
    | `reward_near` | `-norm(object - tips_arm)` before the step (weighted 0.5 in the reward) |
    | `reward_dist` | `-norm(object - goal)` before the step (weight 1) |
    | `reward_ctrl` | `-sum(ctrl**2)` of the mapped control (weighted 0.1) |

    `reward = reward_dist + ctrl_cost_weight * reward_ctrl + near_cost_weight * reward_near`, weights
    (`ctrl_cost_weight`, `near_cost_weight`) default (0.1, 0.5); positions are read before the step as
    in Gym and Brax. No termination. Reset: the arm at rest at its zero pose with velocities uniform in
    [-0.005, 0.005]; the object at x uniform in [-0.3, 0), y in [-0.2, 0.2] (slide coordinates, in the
    asset's joint order), pushed out to distance 0.17 from the goal when closer (as Brax); goal at 0.
    """

    actions_scaled_to_ctrlrange = True

    def __init__(self, ctrl_cost_weight: float = 0.1, near_cost_weight: float = 0.5, n_frames: int = 5,
                 backend: str = "generalized", debug: bool = False) -> None:
        """Configure the reward weights and frames per step."""
        super().__init__(_assets.load_system("pusher"), backend=backend, n_frames=n_frames, debug=debug)
        self._ctrl_cost_weight = ctrl_cost_weight
        self._near_cost_weight = near_cost_weight
        names = self.sys.body_names
        self._tips, self._object, self._goal = (names.index(n) for n in ("tips_arm", "object", "goal"))
        self._init_q = _assets.home_qpos("pusher")

    def reset(self, rng: jax.Array) -> State:
        """Arm at rest, random object position."""
        k_x, k_y, k_qd = jax.random.split(rng, 3)
        obj = jnp.stack([jax.random.uniform(k_x, (), jnp.float32, -0.3, -1e-6),
                         jax.random.uniform(k_y, (), jnp.float32, -0.2, 0.2)])
        norm = jnp.linalg.norm(obj)
        obj = obj * jnp.where(norm < 0.17, 0.17 / norm, 1.0)
        q = self._init_q.at[-4:].set(jnp.concatenate([obj, jnp.zeros((2,), jnp.float32)]))
        qd = _assets.uniform(k_qd, self.sys.nv, 0.005).at[-4:].set(0.0)
        ps = self.pipeline_init(q, qd)
        zero = jnp.zeros((), jnp.float32)
        return State(pipeline_state=ps, obs=self._obs(ps), reward=zero, done=zero,
                     metrics={"reward_dist": zero, "reward_ctrl": zero, "reward_near": zero},
                     info={"truncation": zero})

    def step(self, state: State, action: jax.Array) -> State:
        """Map the action onto the ctrlrange and apply it for `n_frames` physics steps."""
        ctrl = _assets.scale_action(self.sys, jnp.asarray(action, jnp.float32))
        ps0 = state.pipeline_state
        pos = ps0.x.pos
        near = -jnp.linalg.norm(pos[self._object] - pos[self._tips])
        dist = -jnp.linalg.norm(pos[self._object] - pos[self._goal])
        ctrl_reward = -jnp.sum(jnp.square(ctrl))
        reward = dist + self._ctrl_cost_weight * ctrl_reward + self._near_cost_weight * near
        ps = self.pipeline_step(ps0, ctrl)
        return state.replace(pipeline_state=ps, obs=self._obs(ps), reward=reward,
                             done=jnp.zeros_like(state.done),
                             metrics={"reward_dist": dist, "reward_ctrl": ctrl_reward, "reward_near": near})

    def _obs(self, ps: brax_physics.State) -> jax.Array:
        pos = ps.x.pos
        return jnp.concatenate([ps.q[:7], ps.qd[:7], pos[self._tips], pos[self._object], pos[self._goal]])
