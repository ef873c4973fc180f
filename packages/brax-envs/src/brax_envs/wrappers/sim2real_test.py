"""Sim-to-real wrappers: draws against their ranges, forces and velocities against analytic values."""

from __future__ import annotations

import functools
from typing import Any

import brax_physics
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brax_envs
from brax_envs import testing
from brax_envs.base import Env, PipelineEnv, State
from brax_envs.wrappers import training
from brax_envs.wrappers.sim2real import (
    LEGGED,
    ActionDelayWrapper,
    ObservationNoiseWrapper,
    PrivilegedObservationWrapper,
    PushWrapper,
    Randomization,
)

# A floating base with a position servo and a motor on two hinged legs, 1 m above the floor.
_XML = """
<mujoco model="sim2real_probe">
  <option timestep="0.01"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="base" pos="0 0 1">
      <freejoint name="root"/>
      <geom name="torso" type="box" size="0.2 0.1 0.05" mass="2"/>
      <body name="leg1" pos="0.15 0 -0.05">
        <joint name="hip1" axis="0 1 0" damping="0.5" armature="0.01" frictionloss="0.1"/>
        <geom name="shin1" type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03" mass="0.3"/>
      </body>
      <body name="leg2" pos="-0.15 0 -0.05">
        <joint name="hip2" axis="0 1 0" damping="0.5" armature="0.01"/>
        <geom name="shin2" type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03" mass="0.3"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <position name="servo" joint="hip1" kp="30" kv="2" ctrlrange="-1 1"/>
    <motor name="motor" joint="hip2" gear="5" ctrlrange="-1 1"/>
  </actuator>
</mujoco>
"""
KV = 2.0


class _Probe(PipelineEnv):
    """The floating probe; observation `[q, qd]`, reward 0."""

    def __init__(self) -> None:
        super().__init__(brax_physics.load_mjcf(_XML), n_frames=2)

    def reset(self, rng: jax.Array) -> State:
        qd = jax.random.uniform(rng, (self.sys.nv,), jnp.float32, -0.1, 0.1)
        ps = self.pipeline_init(self.sys.qpos0, qd)
        zero = jnp.zeros((), jnp.float32)
        return State(pipeline_state=ps, obs=jnp.concatenate([ps.q, ps.qd]), reward=zero, done=zero)

    def step(self, state: State, action: jax.Array) -> State:
        ps = self.pipeline_step(state.pipeline_state, action)
        return state.replace(pipeline_state=ps, obs=jnp.concatenate([ps.q, ps.qd]))


class _Echo(Env):
    """No physics: the observation is the action the last step received."""

    def reset(self, rng: jax.Array) -> State:
        zero = jnp.zeros((), jnp.float32)
        return State(pipeline_state=None, obs=jnp.zeros(2, jnp.float32), reward=zero, done=zero)

    def step(self, state: State, action: jax.Array) -> State:
        return state.replace(obs=action)

    @property
    def action_size(self) -> int:
        return 2


@functools.cache
def _probe() -> _Probe:
    return _Probe()


KEYS = jax.random.split(jax.random.PRNGKey(3), 64)


def test_draws_stay_in_their_ranges_and_keep_the_rest() -> None:
    sys = _probe().sys
    sys_v, in_axes = LEGGED(sys, rng=KEYS)
    f = np.asarray(sys_v.geom_friction)
    ratio = f[..., 0] / np.asarray(sys.geom_friction)[None, :, 0]
    assert ratio.min() >= 0.4 - 1e-6 and ratio.max() <= 1.25 + 1e-6 and ratio.std() > 0.1
    rest = np.asarray(sys.geom_friction)[:, 1:]
    np.testing.assert_array_equal(f[..., 1:], np.broadcast_to(rest, f[..., 1:].shape))
    mass = np.asarray(sys_v.body_mass)[:, 1:] / np.asarray(sys.body_mass)[1:]
    inertia = np.asarray(sys_v.body_inertia)[:, 1:] / np.asarray(sys.body_inertia)[1:]
    np.testing.assert_allclose(inertia, np.repeat(mass[..., None], 3, -1), rtol=1e-6)  # density scales
    assert mass.min() >= 0.9 - 1e-6 and mass.max() <= 1.1 + 1e-6
    off = np.asarray(sys_v.body_ipos) - np.asarray(sys.body_ipos)
    assert np.abs(off).max() <= 0.02 + 1e-6 and np.abs(off).max() > 0.01
    np.testing.assert_array_equal(off[:, 0], 0.0)  # the world body
    nominal = np.asarray(sys.dof_damping)
    damping = np.asarray(sys_v.dof_damping) / np.where(nominal > 0, nominal, 1)
    assert damping[:, 6:].min() >= 0.8 - 1e-6 and damping[:, 6:].max() <= 1.2 + 1e-6
    assert in_axes.body_mass == 0 and in_axes.geom_friction == 0 and in_axes.qpos0 is None
    assert training._randomized_batch_size(sys, sys_v, in_axes) == len(KEYS)


def test_actuator_forces_scale_as_drawn() -> None:
    # strength s, stiffness p and damping d draws: the servo's force is s*(p*kp*(ctrl - q) - d*kv*qd)
    # and the motor's s*ctrl (the gear then maps it onto the joint), at the step's starting state
    env = _probe()
    sys = env.sys
    rand = Randomization(friction=None, mass=None, com=None, damping=None, armature=None,
                         strength=(0.5, 1.5), kp=(0.5, 1.5), kd=(0.5, 1.5))
    sys_v, _ = rand(sys, rng=KEYS[:4])
    ps0 = env.reset(jax.random.PRNGKey(0)).pipeline_state
    ctrl = jnp.asarray([0.7, -0.4], jnp.float32)

    def force(gain: jax.Array, bias: jax.Array) -> jax.Array:
        member = sys.replace(actuator_gainprm=gain, actuator_biasprm=bias)
        return brax_physics.step(member, ps0, ctrl).actuator_force

    forces = jax.jit(jax.vmap(force))(sys_v.actuator_gainprm, sys_v.actuator_biasprm)
    gain = np.asarray(sys_v.actuator_gainprm)
    bias = np.asarray(sys_v.actuator_biasprm)
    s_motor = gain[:, 1, 0]  # a motor's nominal gain is 1 (its gear is apart)
    kp = gain[:, 0, 0]
    np.testing.assert_allclose(-bias[:, 0, 1], kp, rtol=1e-6)  # the servo's stiffness pair moves together
    q, qd = float(ps0.q[7]), float(ps0.qd[6])
    want_servo = kp * (0.7 - q) + bias[:, 0, 2] * qd
    np.testing.assert_allclose(np.asarray(forces)[:, 0], want_servo, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(forces)[:, 1], s_motor * -0.4, rtol=1e-5)  # before the gear
    assert np.ptp(kp) > 0.1 and np.all((s_motor >= 0.5) & (s_motor <= 1.5))
    # kd scales only the servo's velocity term: the motor has no bias to scale
    assert np.all(bias[:, 1] == 0.0) and np.all(-bias[:, 0, 2] <= KV * 1.5 * 1.5 + 1e-5)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"mass": (1.2, 0.8)}, r"Randomization.mass = \(1.2, 0.8\): low must not exceed high"),
    ({"friction": (-0.1, 1.0)}, r"Randomization.friction .* must not be negative"),
    ({"kp": 2.0}, r"Randomization.kp must be a \(low, high\) pair"),
    ({"com": -0.01}, r"Randomization.com must be a non-negative number"),
])
def test_bad_ranges_name_the_field(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Randomization(**kwargs)


def test_action_delay_applies_the_action_of_d_steps_ago() -> None:
    env = ActionDelayWrapper(_Echo(), max_delay=3, min_delay=1)
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    delays = [int(reset(k).info["action_delay"]) for k in KEYS[:32]]
    assert set(delays) == {1, 2, 3}
    for key in KEYS[:6]:
        state = reset(key)
        d = int(state.info["action_delay"])
        seen = []
        for t in range(1, 7):
            state = step(state, jnp.full((2,), float(t)))
            seen.append(float(state.obs[0]))
        assert seen == [0.0] * d + [float(t) for t in range(1, 7 - d)], (d, seen)


def test_observation_noise_is_bounded_fresh_and_leaves_the_critic_clean() -> None:
    env = ObservationNoiseWrapper(PrivilegedObservationWrapper(_probe()), 0.05)
    check = testing.check_env(env, num_steps=3)
    state = check.reset(jax.random.PRNGKey(1))
    ps = state.pipeline_state
    truth = np.concatenate([ps.q, ps.qd])
    noise = np.asarray(state.obs["state"]) - truth
    assert 0.01 < np.abs(noise).max() <= 0.05 + 1e-6
    np.testing.assert_array_equal(state.obs["privileged_state"], np.concatenate([truth, truth]))
    nxt = check.step(state, jnp.zeros(2))
    noise2 = np.asarray(nxt.obs["state"]) - np.concatenate([nxt.pipeline_state.q, nxt.pipeline_state.qd])
    assert not np.allclose(noise, noise2)
    assert env.observation_size == {"state": (17,), "privileged_state": (34,)}


def test_observation_noise_errors_name_the_key_and_shape() -> None:
    with pytest.raises(ValueError, match=r"no observation key 'vision'"):
        ObservationNoiseWrapper(PrivilegedObservationWrapper(_probe()), {"vision": 0.1})
    with pytest.raises(ValueError, match=r"shape \(4,\), which does not broadcast to the observation's"):
        ObservationNoiseWrapper(_probe(), jnp.ones(4))


def test_push_adds_the_drawn_horizontal_velocity() -> None:
    # in the air a uniform translation changes no acceleration (Galilean invariance): the pushed
    # base moves with exactly the kick added to its linear velocity
    probe = _probe()
    env = PushWrapper(probe, magnitude=(0.5, 1.0), interval=(0.04, 0.04))  # every step (dt 0.02)
    assert env._steps == (2, 2)
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    plain = jax.jit(probe.step)
    state = reset(jax.random.PRNGKey(2))
    ref = state
    kicks = []
    for _ in range(4):
        state, ref = step(state, jnp.zeros(2)), plain(ref, jnp.zeros(2))
        kicks.append(np.asarray(state.info["push"]))
    total = sum(kicks)
    assert [bool(np.any(k)) for k in kicks] == [False, True, False, True]
    assert all(0.5 - 1e-6 <= np.linalg.norm(k) <= 1.0 + 1e-6 for k in kicks if np.any(k))
    dqd = np.asarray(state.pipeline_state.qd - ref.pipeline_state.qd)
    np.testing.assert_allclose(dqd[:2], total, atol=1e-5)
    np.testing.assert_allclose(dqd[2:], 0.0, atol=1e-5)


def test_push_needs_a_free_joint() -> None:
    with pytest.raises(ValueError, match=r"PushWrapper: InvertedPendulum's model has no free joint"):
        PushWrapper(brax_envs.get_environment("inverted_pendulum"))


def test_per_episode_stack_trains_shapes_and_draws() -> None:
    noisy = ObservationNoiseWrapper(PrivilegedObservationWrapper(_probe()), 0.01)
    env = ActionDelayWrapper(noisy, max_delay=2)
    batched = training.wrap_for_training(env, episode_length=3, randomization_fn=LEGGED,
                                         randomize_per_episode=True)
    reset, step = jax.jit(batched.reset), jax.jit(batched.step)
    state = reset(KEYS[:4])
    drawn = state.info[training.RANDOMIZED_SYS_KEY]
    assert drawn["actuator_gainprm"].shape == (4, 2, 10)
    first = np.asarray(drawn["geom_friction"])
    for _ in range(3):
        state = step(state, jnp.zeros((4, 2)))
    assert state.obs["state"].shape == (4, 17) and state.obs["privileged_state"].shape == (4, 34)
    # every episode ended at step 3: each member drew new parameters
    assert not np.any(np.isclose(np.asarray(state.info[training.RANDOMIZED_SYS_KEY]["geom_friction"])[..., 0],
                                 first[..., 0]))
