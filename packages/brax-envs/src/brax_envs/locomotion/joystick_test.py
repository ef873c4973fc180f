"""The joystick task: each reward term against its formula, the robot description's errors, one rollout."""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brax_envs
from brax_envs import locomotion, testing
from brax_envs.locomotion.joystick import Joystick, RewardWeights, reward_terms

DT = 0.02
DEFAULT = np.asarray([0.0, 0.9, -1.8], np.float32)


def _readings(**changes: Any) -> dict[str, jax.Array]:
    r = {
        "lin_vel": jnp.asarray([0.5, 0.0, 0.0]),
        "ang_vel": jnp.asarray([0.0, 0.0, 0.2]),
        "gravity": jnp.asarray([0.0, 0.0, -1.0]),
        "joint_pos": jnp.asarray(DEFAULT),
        "foot_contact": jnp.asarray([True, False]),
        "foot_pos": jnp.zeros((2, 3)),
    }
    r.update({k: jnp.asarray(v) for k, v in changes.items()})
    return r


def _info(**changes: Any) -> dict[str, jax.Array]:
    info = {
        "command": jnp.asarray([0.5, 0.0, 0.2]),
        "last_contact": jnp.asarray([True, False]),
        "feet_air_time": jnp.asarray([0.0, 0.3]),
        "foot_pos": jnp.zeros((2, 3)),
        "last_action": jnp.zeros(3),
    }
    info.update({k: jnp.asarray(v) for k, v in changes.items()})
    return info


def _terms(r: dict[str, jax.Array] | None = None, info: dict[str, jax.Array] | None = None,
           action: Any = (0.0, 0.0, 0.0), force: Any = (0.0, 0.0, 0.0)) -> dict[str, float]:
    terms, _, _ = reward_terms(_readings() if r is None else r, _info() if info is None else info,
                               jnp.asarray(action), jnp.asarray(force), dt=DT, default=DEFAULT, sigma=0.25,
                               air_time_target=0.1)
    return {k: float(v) for k, v in terms.items()}


def test_tracking_terms_are_one_on_command_and_decay_as_gaussians() -> None:
    assert _terms()["tracking_lin_vel"] == pytest.approx(1.0)
    assert _terms()["tracking_ang_vel"] == pytest.approx(1.0)
    off = _terms(_readings(lin_vel=[0.0, 0.3, 0.0], ang_vel=[0.0, 0.0, -0.3]))
    assert off["tracking_lin_vel"] == pytest.approx(math.exp(-(0.25 + 0.09) / 0.25), rel=1e-6)
    assert off["tracking_ang_vel"] == pytest.approx(math.exp(-0.25 / 0.25), rel=1e-6)


def test_penalty_terms() -> None:
    t = _terms(_readings(lin_vel=[0.5, 0.0, 0.3], ang_vel=[0.1, -0.2, 0.2], gravity=[0.6, 0.0, -0.8],
                         joint_pos=DEFAULT + np.asarray([0.1, 0.0, -0.2], np.float32)),
               _info(last_action=[0.5, 0.0, 0.0]), action=[0.0, 1.0, 0.0], force=[3.0, -4.0, 0.0])
    assert t["lin_vel_z"] == pytest.approx(0.09, rel=1e-6)
    assert t["ang_vel_xy"] == pytest.approx(0.05, rel=1e-6)
    assert t["orientation"] == pytest.approx(0.36, rel=1e-6)
    assert t["torques"] == pytest.approx(25.0, rel=1e-6)
    assert t["action_rate"] == pytest.approx(1.25, rel=1e-6)
    assert t["pose"] == pytest.approx(0.05, rel=1e-5)


def test_feet_air_time_pays_at_touchdown_under_a_moving_command() -> None:
    # foot 1 was in the air 0.3 s and lands now: (0.3 + dt - 0.1) paid; foot 0 never left
    landing = _readings(foot_contact=[True, True])
    assert _terms(landing)["feet_air_time"] == pytest.approx(0.3 + DT - 0.1, rel=1e-6)
    assert _terms(_readings())["feet_air_time"] == 0.0  # still in the air
    assert _terms(landing, _info(command=[0.0, 0.0, 0.0]))["feet_air_time"] == 0.0  # standing command
    _, air, contact = reward_terms(landing, _info(), jnp.zeros(3), jnp.zeros(3), dt=DT, default=DEFAULT,
                                   sigma=0.25, air_time_target=0.1)
    np.testing.assert_allclose(np.asarray(jnp.where(contact, 0.0, air)), [0.0, 0.0])


def test_foot_slip_counts_feet_on_the_ground_only() -> None:
    moved = _readings(foot_pos=[[0.006, 0.008, 0.0], [1.0, 0.0, 0.0]])  # foot 0: 0.5 m/s; foot 1 in the air
    assert _terms(moved)["foot_slip"] == pytest.approx(0.25, rel=1e-5)


QUADRUPED_SCENE = locomotion.asset("quadruped_scene_flat.xml")


@pytest.mark.parametrize(("field", "changes", "match"), [
    ("torso", {"torso": "body"}, r"LeggedRobot.torso: the model has no body named 'body'; bodies: \["),
    ("feet", {"feet": ("FR_foot", "paw")}, r"LeggedRobot.feet: the model has no geom named 'paw'"),
    ("keyframe", {"keyframe": "crouch"}, r"LeggedRobot.keyframe: the model has no keyframe named 'crouch'"),
    ("torso", {"torso": "FR_calf"}, r"LeggedRobot.torso: 'FR_calf' must carry the model's first joint"),
])
def test_description_errors_name_the_missing_element(field: str, changes: dict[str, Any], match: str) -> None:
    robot = dataclasses.replace(locomotion.QUADRUPED, **changes)
    with pytest.raises(ValueError, match=match):
        Joystick(QUADRUPED_SCENE, robot)


def test_unknown_reward_weight_is_named() -> None:
    with pytest.raises(ValueError, match=r"unknown reward terms \['speed'\]"):
        Joystick(QUADRUPED_SCENE, locomotion.QUADRUPED, weights={"speed": 1.0})
    env = Joystick(QUADRUPED_SCENE, locomotion.QUADRUPED, weights={"torques": -1.0})
    assert env.weights == RewardWeights(torques=-1.0)


@functools.cache
def _quadruped() -> Joystick:
    env = brax_envs.get_environment("locomotion/quadruped-joystick-flat")
    assert isinstance(env, Joystick)
    return env


def test_quadruped_stands_at_reset_and_follows_the_contract() -> None:
    env = _quadruped()
    check = testing.check_env(env, num_steps=2)
    state = check.reset(jax.random.PRNGKey(4))
    obs = state.obs
    nu = env.action_size
    assert nu == 12 and obs["state"].shape == (9 + 3 * nu,)
    np.testing.assert_allclose(obs["state"][3:6], [0.0, 0.0, -1.0], atol=1e-6)  # upright at any heading
    assert bool(jnp.all(state.info["last_contact"]))  # the keyframe stands on its four feet
    assert env.observation_size == {"state": (9 + 3 * nu,), "privileged_state": (9 + 3 * nu + 4 + 2 * 4,)}
    # a full step at rest holds the pose: no fall, and the tracking terms read the command
    nxt = check.step(state, jnp.zeros(nu))
    assert float(nxt.done) == 0.0
    assert 0.0 < float(nxt.metrics["reward/tracking_lin_vel"]) <= 1.0


def test_actions_are_normalized_offsets() -> None:
    # a Gymnasium user samples [-1, 1], not the servos' joint ranges
    from brax_envs.wrappers.gymnasium import action_space

    space = action_space(Joystick(QUADRUPED_SCENE, locomotion.QUADRUPED))
    np.testing.assert_array_equal(space.low, -np.ones(12))
    np.testing.assert_array_equal(space.high, np.ones(12))
