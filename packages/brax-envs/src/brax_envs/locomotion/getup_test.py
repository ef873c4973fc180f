"""The get-up task: reward terms and `success` from hand-made readings, errors, resets, a rollout."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from brax_envs import locomotion, testing
from brax_envs.locomotion.getup import (
    GetUp,
    GetUpWeights,
    getup_reward_terms,
    getup_success,
    humanoid_getup,
    quadruped_getup,
)

DEFAULT = np.asarray([0.0, 0.9, -1.8], np.float32)
H = 0.3
SHAPING = {"height_sigma": 0.4, "posture_sigma": 0.5, "posture_upright": 0.9}


def _readings(**changes: Any) -> dict[str, jax.Array]:
    r = {
        "up_z": jnp.asarray(1.0),
        "height": jnp.asarray(H),
        "joint_pos": jnp.asarray(DEFAULT),
        "joint_vel": jnp.zeros(3),
        "actuator_force": jnp.zeros(3),
    }
    r.update({k: jnp.asarray(v, jnp.float32) for k, v in changes.items()})
    return r


def _terms(r: dict[str, jax.Array], action: Any = (0.0, 0.0, 0.0), last_action: Any = (0.0, 0.0, 0.0)
           ) -> dict[str, float]:
    terms = getup_reward_terms(r, jnp.asarray(action), jnp.asarray(last_action), default=DEFAULT,
                               standing_height=H, force_limit=np.asarray([6.0, 8.0, 1.0], np.float32),
                               **SHAPING)
    assert set(terms) == {f.name for f in dataclasses.fields(GetUpWeights)}
    return {k: float(v) for k, v in terms.items()}


def test_upright_maps_the_up_axis_onto_zero_one() -> None:
    assert _terms(_readings(up_z=1.0))["upright"] == pytest.approx(1.0)
    assert _terms(_readings(up_z=0.0))["upright"] == pytest.approx(0.5)
    assert _terms(_readings(up_z=-1.0))["upright"] == pytest.approx(0.0)


def test_height_is_one_at_or_above_standing_and_a_gaussian_of_the_shortfall() -> None:
    assert _terms(_readings(height=H))["height"] == pytest.approx(1.0)
    assert _terms(_readings(height=1.2 * H))["height"] == pytest.approx(1.0)
    # 40% short with sigma 0.4: one sigma
    assert _terms(_readings(height=0.6 * H))["height"] == pytest.approx(math.exp(-0.5), rel=1e-5)
    assert _terms(_readings(height=0.0))["height"] == pytest.approx(math.exp(-0.5 / 0.16), rel=1e-5)


def test_posture_pays_the_keyframe_pose_only_while_upright() -> None:
    assert _terms(_readings())["posture"] == pytest.approx(1.0)
    bent = DEFAULT + np.asarray([0.1, 0.0, -0.2], np.float32)
    expected = math.exp(-(0.05 / 3) / 0.25)  # mean squared offset over sigma squared
    assert _terms(_readings(joint_pos=bent))["posture"] == pytest.approx(expected, rel=1e-5)
    assert _terms(_readings(up_z=0.85))["posture"] == 0.0  # tilted past posture_upright
    assert _terms(_readings(up_z=-1.0))["posture"] == 0.0  # on its back in the keyframe pose


def test_penalty_terms() -> None:
    t = _terms(_readings(joint_vel=[1.0, -2.0, 0.0], actuator_force=[3.0, -4.0, 0.5]),
               action=[0.0, 1.0, 0.0], last_action=[0.5, 0.0, 0.0])
    assert t["action_rate"] == pytest.approx(1.25, rel=1e-6)
    assert t["torques"] == pytest.approx(0.25 + 0.25 + 0.25, rel=1e-6)  # forces over limits 6, 8, 1
    assert t["joint_vel"] == pytest.approx(5.0, rel=1e-6)


@pytest.mark.parametrize(("up_z", "height", "expected"), [
    (0.95, 0.95 * H, 1.0), (0.95, 1.05 * H, 1.0), (1.0, 0.91 * H, 1.0),
    (0.85, H, 0.0),  # tilted
    (1.0, 0.85 * H, 0.0), (1.0, 1.15 * H, 0.0),  # crouched, jumping
    (-1.0, H, 0.0),  # upside down at standing height
])
def test_success_needs_upright_and_standing_height(up_z: float, height: float, expected: float) -> None:
    assert float(getup_success(jnp.asarray(up_z), jnp.asarray(height), H)) == expected


QUADRUPED_SCENE = locomotion.asset("quadruped_full_collision_scene_flat.xml")


@pytest.mark.parametrize(("changes", "match"), [
    ({"torso": "body"}, r"LeggedRobot.torso: the model has no body named 'body'; bodies: \["),
    ({"feet": ("FR_foot", "paw")}, r"LeggedRobot.feet: the model has no geom named 'paw'"),
    ({"keyframe": "crouch"}, r"LeggedRobot.keyframe: the model has no keyframe named 'crouch'"),
    ({"torso": "FR_calf"}, r"LeggedRobot.torso: 'FR_calf' must carry the model's first joint"),
])
def test_description_errors_name_the_missing_element(changes: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        GetUp(QUADRUPED_SCENE, dataclasses.replace(locomotion.QUADRUPED, **changes))


def test_unknown_weights_and_bad_keywords_are_named() -> None:
    with pytest.raises(ValueError, match=r"unknown reward terms \['speed'\]; terms: \['upright', 'height'"):
        GetUp(QUADRUPED_SCENE, locomotion.QUADRUPED, weights={"speed": 1.0})
    with pytest.raises(ValueError, match=r"GetUp.stand_prob: got 1.5"):
        GetUp(QUADRUPED_SCENE, locomotion.QUADRUPED, stand_prob=1.5)
    env = GetUp(QUADRUPED_SCENE, locomotion.QUADRUPED, weights={"torques": -1.0})
    assert env.weights == GetUpWeights(torques=-1.0)
    assert env.action_scale == locomotion.QUADRUPED.action_scale  # the robot's unless overridden


def test_humanoid_factory_builds_on_the_full_collision_model() -> None:
    env = humanoid_getup()
    assert env.action_size == 23 and env.robot == locomotion.HUMANOID
    assert env.standing_height == pytest.approx(0.7801, abs=1e-4)  # the keyframe's pelvis height


@pytest.fixture(scope="module")
def quadruped() -> tuple[GetUp, testing.EnvCheck]:
    # floor contacts only: the same falls at a fifth of the compile time of every link meeting every other
    env = quadruped_getup(self_collision=False)
    # the locomotion tasks' batched step is compiled and compared in joystick_test.py; traced here
    return env, testing.check_env(env, num_steps=2, vmap="trace")


@pytest.fixture(scope="module")
def resets(quadruped: tuple[GetUp, testing.EnvCheck]) -> list[Any]:
    return [quadruped[1].reset(jax.random.PRNGKey(i)) for i in range(8)]


def _up_z(state: Any) -> float:
    q = state.pipeline_state.q
    return float(1.0 - 2.0 * (q[4] ** 2 + q[5] ** 2))  # the torso's up axis' world z from its quaternion


def test_quadruped_observations_follow_the_contract(quadruped: tuple[GetUp, testing.EnvCheck]) -> None:
    env, check = quadruped
    nu = env.action_size
    assert nu == 12 and env.action_scale == 0.5
    assert env.observation_size == {"state": (6 + 3 * nu,), "privileged_state": (6 + 3 * nu + 4 + 4,)}
    assert all(float(s.done) == 0.0 for s in check.states)


def test_resets_fall_or_stand_on_the_floor(quadruped: tuple[GetUp, testing.EnvCheck],
                                                            resets: list[Any]) -> None:
    env, states = quadruped[0], resets
    fallen = [s for s in states if not bool(s.info["standing_start"])]
    standing = [s for s in states if bool(s.info["standing_start"])]
    assert len(fallen) >= 2 and len(standing) >= 2  # stand_prob 0.5
    for s in states:
        assert all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree.leaves(s.obs))
        assert float(s.pipeline_state.time) == 0.0  # the settling is not part of the episode
        assert float(jnp.max(jnp.abs(s.pipeline_state.qd))) < 10.0  # landed (some still roll), no blow-up
        assert 0.0 < float(s.pipeline_state.q[2]) < 1.2 * env.standing_height
    ups = [_up_z(s) for s in fallen]
    assert sum(u < 0.7 for u in ups) >= len(ups) - 1, ups  # most land on a side or the back
    assert sum(float(s.metrics["success"]) for s in fallen) <= 1
    for s in standing:
        assert _up_z(s) > 0.99 and float(s.metrics["success"]) == 1.0
        assert bool(jnp.all(s.obs["privileged_state"][-4:] == 1.0))  # on its four feet


def test_holding_the_keyframe_from_a_standing_start_stays_up(quadruped: tuple[GetUp, testing.EnvCheck],
                                                             resets: list[Any]) -> None:
    env, check = quadruped
    state = next(s for s in resets if bool(s.info["standing_start"]))
    hold = jnp.zeros(env.action_size)
    names = [f.name for f in dataclasses.fields(GetUpWeights)]
    for _ in range(25):
        state = check.step(state, hold)
        assert float(state.metrics["success"]) == 1.0 and float(state.done) == 0.0
        weighted = sum(getattr(env.weights, k) * float(state.metrics[f"reward/{k}"]) for k in names)
        assert float(state.reward) == pytest.approx(float(env.dt) * weighted, rel=1e-5)
    assert float(state.metrics["reward/upright"]) > 0.99 and float(state.metrics["reward/posture"]) > 0.9
