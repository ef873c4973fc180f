"""The pick task: each reward term against its formula, the scene's errors, resets, and a scripted grasp."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from brax_envs import manipulation, testing
from brax_envs.manipulation import scripted_testutil as scripted
from brax_envs.manipulation.pick import PickCube, RewardWeights, pick_reward_terms

REST = 0.02
NU = 8
SCENE = manipulation.asset("arm_pick_scene.xml")


def _terms(gripper: Any = (0.5, 0.0, 0.12), cube: Any = (0.5, 0.0, REST), target: Any = (0.5, 0.0, 0.22),
           contact: Any = (False, False), action: Any = None, last: Any = None) -> dict[str, float]:
    f32 = np.float32
    terms = pick_reward_terms(
        jnp.asarray(gripper, f32), jnp.asarray(cube, f32), jnp.asarray(target, f32), jnp.asarray(contact),
        jnp.asarray(np.zeros(NU) if action is None else action, f32),
        jnp.asarray(np.zeros(NU) if last is None else last, f32), rest_height=REST)
    for k, v in terms.items():
        assert v.shape == () and v.dtype == jnp.float32, k
    return {k: float(v) for k, v in terms.items()}


def test_terms_are_the_weights_fields() -> None:
    assert set(_terms()) == {f.name for f in dataclasses.fields(RewardWeights)}


def test_reach_is_tanh_shaped_in_the_gripper_to_cube_distance() -> None:
    assert _terms(gripper=(0.5, 0.0, REST))["reach"] == pytest.approx(1.0)
    assert _terms()["reach"] == pytest.approx(1.0 - math.tanh(0.1 / 0.1), rel=1e-6)
    assert _terms(gripper=(0.8, 0.4, REST))["reach"] == pytest.approx(1.0 - math.tanh(5.0), abs=1e-6)


def test_grasp_needs_both_pads_on_the_cube() -> None:
    assert _terms(contact=(True, True))["grasp"] == 1.0
    assert _terms(contact=(True, False))["grasp"] == 0.0
    assert _terms(contact=(False, True))["grasp"] == 0.0


def test_lift_is_the_fraction_of_the_target_height() -> None:
    assert _terms()["lift"] == 0.0
    assert _terms(cube=(0.5, 0.0, REST + 0.05))["lift"] == pytest.approx(0.25, rel=1e-5)
    assert _terms(cube=(0.5, 0.0, 0.5))["lift"] == 1.0  # above the target: clipped
    assert _terms(cube=(0.5, 0.0, 0.0))["lift"] == 0.0  # pressed into the table: clipped


def test_place_is_tanh_shaped_and_gated_on_grasp_or_lift() -> None:
    # on the table and not grasped: nothing, however close the target
    assert _terms(target=(0.5, 0.0, REST + 0.005))["place"] == 0.0
    held = _terms(contact=(True, True))
    assert held["place"] == pytest.approx(1.0 - math.tanh(0.2 / 0.1), rel=1e-6)
    # off the table by more than 1 cm counts without contacts (a grasp that flickers)
    up = _terms(cube=(0.5, 0.0, 0.17))
    assert up["place"] == pytest.approx(1.0 - math.tanh(0.05 / 0.1), rel=1e-5)
    assert _terms(cube=(0.5, 0.0, REST + 0.005))["place"] == 0.0


def test_action_rate_and_success() -> None:
    a, last = np.zeros(NU), np.zeros(NU)
    a[0], a[7], last[7] = 0.5, -1.0, 1.0
    assert _terms(action=a, last=last)["action_rate"] == pytest.approx(4.25, rel=1e-6)
    assert _terms(cube=(0.5, 0.01, 0.2))["success"] == 1.0  # 2.2 cm from the target
    assert _terms(cube=(0.5, 0.03, 0.2))["success"] == 0.0  # 3.6 cm


@pytest.mark.parametrize(("changes", "match"), [
    ({"cube": "box"}, r"PickScene.cube: the model has no body named 'box'; bodies: \["),
    ({"target": "goal"}, r"PickScene.target: the model has no body named 'goal'"),
    ({"gripper_site": "tcp"},
     r"PickScene.gripper_site: the model has no site named 'tcp'; sites: \['grip_site'"),
    ({"left_pad": "pad"}, r"PickScene.left_pad: the model has no geom named 'pad'"),
    ({"gripper_actuator": "hand"}, r"PickScene.gripper_actuator: the model has no actuator named 'hand'"),
    ({"keyframe": "ready"}, r"PickScene.keyframe: the model has no keyframe named 'ready'"),
    ({"cube": "hand"}, r"PickScene.cube: body 'hand' must have one joint, a free joint"),
    ({"target": "cube"}, r"PickScene.target: body 'cube' must be a mocap body"),
])
def test_scene_errors_name_the_missing_element(changes: dict[str, str], match: str) -> None:
    scene = dataclasses.replace(manipulation.ARM_PICK_SCENE, **changes)
    with pytest.raises(ValueError, match=match):
        PickCube(SCENE, scene)


def test_unknown_reward_weight_is_named() -> None:
    with pytest.raises(ValueError, match=r"unknown reward terms \['lift_bonus'\]"):
        PickCube(SCENE, weights={"lift_bonus": 1.0})


@pytest.fixture(scope="module")
def env() -> PickCube:
    return manipulation.arm_pick_cube()


@pytest.fixture(scope="module")
def check(env: PickCube) -> testing.EnvCheck:
    return testing.check_env(env, num_steps=2)


def test_contract_and_sizes(env: PickCube, check: testing.EnvCheck) -> None:
    assert env.action_size == NU
    n = 7 + 7 + 1 + 3 + 3 + 6 + 3 + 3 + NU
    assert env.observation_size == {"state": (n,), "privileged_state": (n + 6 + 2,)}
    assert float(env.dt) == pytest.approx(0.02)


def test_actions_are_normalized() -> None:
    # a Gymnasium user samples [-1, 1], not the servos' joint ranges
    from brax_envs.wrappers.gymnasium import action_space

    assert PickCube.actions_scaled_to_ctrlrange
    space = action_space(manipulation.arm_pick_cube())
    np.testing.assert_array_equal(space.low, -np.ones(NU))
    np.testing.assert_array_equal(space.high, np.ones(NU))


def test_reset_distribution(env: PickCube, check: testing.EnvCheck) -> None:
    """Cubes rest on the table within reach at any yaw; targets 10-30 cm above the table; arm near home."""
    m = mujoco.MjModel.from_xml_path(str(SCENE))
    home = m.key("home").qpos[:7]
    yaws = []
    for seed in range(12):
        s = check.reset(jax.random.PRNGKey(seed))
        q = np.asarray(s.pipeline_state.q)
        cube, target = q[9:12], np.asarray(s.info["target"])
        assert 0.35 <= cube[0] <= 0.65 and -0.2 <= cube[1] <= 0.2
        assert cube[2] == pytest.approx(REST)
        assert 0.1 <= target[2] - REST <= 0.3 and 0.35 <= target[0] <= 0.65 and -0.2 <= target[1] <= 0.2
        np.testing.assert_allclose(np.asarray(s.pipeline_state.mocap_pos[0]), target)
        assert np.max(np.abs(q[:7] - home)) <= 0.02 + 1e-6
        np.testing.assert_allclose(np.asarray(s.info["ctrl"][:7]), q[:7], atol=1e-6)
        assert float(s.info["ctrl"][7]) == pytest.approx(0.08)  # open
        w, z = q[12], q[15]
        assert abs(q[13]) < 1e-6 and abs(q[14]) < 1e-6  # yaw only: the cube lies flat
        yaws.append(2 * math.atan2(z, w))
        # the cube rests on the table: only its own table contacts, no penetration past round-off
        contact = s.pipeline_state.contact
        active = np.asarray(contact.active)
        pairs = {tuple(sorted((m.geom(int(a)).name, m.geom(int(b)).name)))
                 for a, b in zip(np.asarray(contact.geom1)[active], np.asarray(contact.geom2)[active],
                                 strict=True)}
        assert pairs <= {("cube", "table")}
    assert np.ptp(yaws) > math.pi  # yaws spread over the circle


def test_cube_positions_are_reachable_top_down() -> None:
    """Every corner of the cube's region has a top-down grasp pose within the joint ranges."""
    m = mujoco.MjModel.from_xml_path(str(SCENE))
    d = mujoco.MjData(m)
    home = m.key("home").qpos[:7]
    for x in (0.35, 0.65):
        for y in (-0.2, 0.2):
            for yaw in (0.0, math.pi / 4):
                cube = np.asarray([x, y, REST])
                plan = scripted.grasp_plan(m, home, cube, yaw)
                d.qpos[:7] = plan.grasp
                mujoco.mj_kinematics(m, d)
                np.testing.assert_allclose(d.site("grip_site").xpos, cube, atol=1e-3)


def test_holding_still_keeps_the_arm_and_cube_in_place(env: PickCube, check: testing.EnvCheck) -> None:
    s = check.reset(jax.random.PRNGKey(3))
    q0 = np.asarray(s.pipeline_state.q)
    hold = jnp.zeros(NU).at[7].set(1.0)  # zero steps, gripper open
    for _ in range(10):
        s = check.step(s, hold)
    q = np.asarray(s.pipeline_state.q)
    assert float(s.done) == 0.0
    np.testing.assert_allclose(q[:7], q0[:7], atol=0.01)
    np.testing.assert_allclose(q[9:12], q0[9:12], atol=1e-3)
    assert float(s.metrics["reward/grasp"]) == 0.0 and float(s.metrics["reward/lift"]) == 0.0


def test_scripted_grasp_lifts_the_cube(env: PickCube, check: testing.EnvCheck) -> None:
    """Open-loop plan, closed on the env's own targets: above, descend, close, lift: the cube rises > 5 cm."""
    m = mujoco.MjModel.from_xml_path(str(SCENE))
    s = check.reset(jax.random.PRNGKey(7))
    q = np.asarray(s.pipeline_state.q, np.float64)
    cube0 = q[9:12].copy()
    yaw = 2 * math.atan2(q[15], q[12])
    plan = scripted.grasp_plan(m, q[:7], cube0, yaw)
    arm, grip = scripted.plan_targets(plan, q[:7], (40, 25, 15, 40))
    scale = 0.04  # PickCube's default action_scale (rad per step)
    grasped = []
    for target, g in zip(arm, grip, strict=True):
        delta = (target - np.asarray(s.info["ctrl"][:7])) / scale
        action = jnp.asarray(np.append(np.clip(delta, -1.0, 1.0), g), jnp.float32)
        s = check.step(s, action)
        grasped.append(float(s.metrics["reward/grasp"]))
    for _ in range(15):  # hold the lifted pose
        s = check.step(s, jnp.asarray(np.append(np.zeros(7), -1.0), jnp.float32))
    cube = np.asarray(s.pipeline_state.q[9:12])
    assert float(s.done) == 0.0
    assert cube[2] - cube0[2] > 0.05, cube
    assert float(s.metrics["reward/grasp"]) == 1.0 and all(grasped[-40:])  # held throughout the lift
    assert float(s.metrics["reward/lift"]) > 0.0 and float(s.metrics["reward/place"]) > 0.0
    # the cube stayed between the pads: its centre is within a centimetre of the gripper site
    grip_pos = s.obs["state"][15:18]
    assert np.linalg.norm(np.asarray(grip_pos) - cube) < 0.01
