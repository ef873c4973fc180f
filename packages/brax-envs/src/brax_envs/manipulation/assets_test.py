"""The arm and its pick scene, checked with MuJoCo C, and brax-physics against MuJoCo C on the scene."""

from __future__ import annotations

import functools
import math
import pathlib

import brax_physics as bp
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from brax_envs.manipulation import scripted_testutil as scripted

ASSETS = pathlib.Path(__file__).parent / "assets"
ARM = [f"joint{i}" for i in range(1, 8)]
# Franka's published joint ranges (rad) and torque limits (Nm)
RANGES = [(-2.8973, 2.8973), (-1.7628, 1.7628), (-2.8973, 2.8973), (-3.0718, -0.0698), (-2.8973, 2.8973),
          (-0.0175, 3.7525), (-2.8973, 2.8973)]
TORQUES = [87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0]
# libfranka's joint_impedance_control example gains
KP = [600.0, 600.0, 600.0, 600.0, 250.0, 150.0, 50.0]
KV = [50.0, 50.0, 50.0, 50.0, 30.0, 25.0, 15.0]
# Gaz et al. 2019: link masses (kg) and centres of mass (m, link frame)
MASSES = [4.970684, 0.646926, 3.228604, 3.587895, 1.225946, 1.666555, 0.735522]
COMS = [(3.875e-3, 2.081e-3, -4.762e-2), (-3.141e-3, -2.872e-2, 3.495e-3), (2.7518e-2, 3.9252e-2, -6.6502e-2),
        (-5.317e-2, 1.04419e-1, 2.7454e-2), (-1.1953e-2, 4.1065e-2, -3.8437e-2),
        (6.0149e-2, -1.4117e-2, -1.0517e-2), (1.0517e-2, -4.252e-3, 6.1597e-2)]
# and the diagonals of their inertias about the centre of mass (kg m^2, link frame)
INERTIA_DIAG = [(0.70337, 0.70661, 0.009117), (0.007962, 0.02811, 0.025995), (0.037242, 0.036155, 0.01083),
                (0.025853, 0.019552, 0.028323), (0.035549, 0.029474, 0.008627),
                (0.001964, 0.004354, 0.005433), (0.012516, 0.010027, 0.004815)]
# Franka's modified Denavit-Hartenberg table: (a_{i-1}, d_i, alpha_{i-1}) of joints 1-7
DH = [(0.0, 0.333, 0.0), (0.0, 0.0, -math.pi / 2), (0.0, 0.316, math.pi / 2), (0.0825, 0.0, math.pi / 2),
      (-0.0825, 0.384, -math.pi / 2), (0.0, 0.0, math.pi / 2), (0.088, 0.0, math.pi / 2)]
FLANGE = 0.107
TCP = 0.1034  # tool centre point from the flange


@functools.cache
def _model(name: str) -> mujoco.MjModel:
    """The compiled file, shared read-only by the tests."""
    return mujoco.MjModel.from_xml_path(str(ASSETS / name))


def _scene() -> mujoco.MjModel:
    return _model("arm_pick_scene.xml")


def _home(m: mujoco.MjModel) -> mujoco.MjData:
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, m.key("home").id)
    mujoco.mj_forward(m, d)
    return d


def _contacts(m: mujoco.MjModel, d: mujoco.MjData) -> set[frozenset[str]]:
    return {frozenset((m.geom(c.geom1).name, m.geom(c.geom2).name)) for c in d.contact[:d.ncon]}


def test_counts() -> None:
    """7 arm hinges and 2 finger slides with 8 servos; the scene adds a free cube and a mocap target."""
    arm, scene = _model("arm.xml"), _scene()
    assert (arm.nq, arm.nv, arm.nu, arm.njnt, arm.neq, arm.ntendon) == (9, 9, 8, 9, 1, 1)
    assert (scene.nq, scene.nv, scene.nu, scene.nmocap) == (16, 15, 8, 1)
    hinge, slide = mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE
    assert list(scene.jnt_type) == [hinge] * 7 + [slide] * 2 + [mujoco.mjtJoint.mjJNT_FREE]
    assert [scene.actuator(i).name for i in range(scene.nu)] == [*ARM, "gripper"]


def test_options() -> None:
    """0.005 s steps, 5 Newton iterations, 8 line-search steps, implicitfast, elliptic cones."""
    o = _scene().opt
    assert (o.timestep, o.iterations, o.ls_iterations, o.impratio) == (0.005, 5, 8, 1.0)
    assert o.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    assert o.cone == mujoco.mjtCone.mjCONE_ELLIPTIC
    assert o.solver == mujoco.mjtSolver.mjSOL_NEWTON


def test_published_joint_ranges_torque_limits_and_gains() -> None:
    m = _scene()
    for i, name in enumerate(ARM):
        j, a = m.joint(name), m.actuator(name)
        assert j.limited[0] and j.range == pytest.approx(RANGES[i], abs=1e-9), name
        assert a.trnid[0] == j.id and a.ctrlrange == pytest.approx(RANGES[i], abs=1e-9), name
        assert a.forcelimited[0] and a.forcerange == pytest.approx((-TORQUES[i], TORQUES[i])), name
        # MJCF <position>: gain kp, bias -kp q - kv qdot
        assert a.gainprm[0] == KP[i] and a.biasprm[:3] == pytest.approx([0.0, -KP[i], -KV[i]]), name


def test_denavit_hartenberg_kinematics() -> None:
    """Body frames follow Franka's table; at q = 0 the flange is at (0.088, 0, 0.926) facing down."""
    m = _model("arm.xml")
    for i, (a, d, alpha) in enumerate(DH):
        body = m.body(f"link{i + 1}")
        # modified DH: translate a along x, turn alpha about x, then translate d along the new z
        pos = np.asarray([a, -math.sin(alpha) * d, math.cos(alpha) * d])
        np.testing.assert_allclose(body.pos, pos, atol=1e-9, err_msg=body.name)
        np.testing.assert_allclose(body.quat, [math.cos(alpha / 2), math.sin(alpha / 2), 0, 0], atol=1e-7,
                                   err_msg=body.name)
    data = mujoco.MjData(m)
    mujoco.mj_kinematics(m, data)
    wrist = 0.333 + 0.316 + 0.384  # joints 5-7 sit this high at q = 0
    np.testing.assert_allclose(data.body("hand").xpos, [0.088, 0.0, wrist - FLANGE], atol=1e-9)
    np.testing.assert_allclose(data.site("grip_site").xpos, [0.088, 0.0, wrist - FLANGE - TCP], atol=1e-9)
    np.testing.assert_allclose(data.body("hand").xmat.reshape(3, 3)[:, 2], [0, 0, -1], atol=1e-9)
    # the hand is mounted turned -45 degrees about the flange axis
    np.testing.assert_allclose(m.body("hand").quat, [math.cos(math.pi / 8), 0, 0, -math.sin(math.pi / 8)],
                               atol=1e-8)
    for finger in ("left_finger", "right_finger"):
        np.testing.assert_allclose(m.body(finger).pos, [0, 0, 0.0584])


def test_identified_inertials() -> None:
    """Link masses and centres of mass of Gaz et al. 2019; the hand and fingers weigh 0.73 kg."""
    m = _model("arm.xml")
    for i in range(7):
        body = m.body(f"link{i + 1}")
        assert body.mass[0] == pytest.approx(MASSES[i]), body.name
        # MuJoCo diagonalizes the inertia: compare the centre of mass and the trace (invariant)
        np.testing.assert_allclose(body.ipos, COMS[i], atol=1e-9, err_msg=body.name)
        assert body.inertia.sum() == pytest.approx(sum(INERTIA_DIAG[i]), rel=1e-6), body.name
    hand = m.body_subtreemass[m.body("hand").id]
    assert hand == pytest.approx(0.73)
    assert np.all(m.body_gravcomp[m.body("link1").id:] == 1.0)  # the controller carries the robot's weight


def test_gripper_is_one_servo_on_coupled_fingers() -> None:
    m = _scene()
    for finger in ("left_finger", "right_finger"):
        j = m.joint(finger)
        assert j.type[0] == mujoco.mjtJoint.mjJNT_SLIDE and j.range == pytest.approx((0.0, 0.04))
    eq = m.equality("finger_coupling")
    assert eq.type[0] == mujoco.mjtEq.mjEQ_JOINT
    assert {eq.obj1id[0], eq.obj2id[0]} == {m.joint("left_finger").id, m.joint("right_finger").id}
    np.testing.assert_array_equal(eq.data[:5], [0, 1, 0, 0, 0])  # left = right
    t = m.tendon("grip")
    wraps = slice(m.tendon_adr[t.id], m.tendon_adr[t.id] + m.tendon_num[t.id])
    assert list(m.wrap_objid[wraps]) == [m.joint("left_finger").id, m.joint("right_finger").id]
    np.testing.assert_array_equal(m.wrap_prm[wraps], [1.0, 1.0])  # the pads' gap
    g = m.actuator("gripper")
    assert g.trntype[0] == mujoco.mjtTrn.mjTRN_TENDON and g.trnid[0] == t.id
    assert g.ctrlrange == pytest.approx((0.0, 0.08)) and g.forcerange == pytest.approx((-70.0, 70.0))
    assert m.exclude_signature.size == 1
    # driven to a 3 cm gap with nothing between them, the fingers close evenly onto it
    d = _home(m)
    d.ctrl[7] = 0.03
    for _ in range(200):
        mujoco.mj_step(m, d)
    assert d.qpos[7] == pytest.approx(0.015, abs=5e-4) and d.qpos[8] == pytest.approx(d.qpos[7], abs=1e-4)
    np.testing.assert_allclose(d.geom("left_pad").xpos - d.geom("right_pad").xpos,
                               d.site("grip_site").xmat.reshape(3, 3)[:, 1] * (0.03 + 0.01), atol=5e-4)


def test_only_the_gripper_cube_and_table_collide() -> None:
    m = _scene()
    colliding = {m.geom(i).name for i in range(m.ngeom) if m.geom_contype[i] or m.geom_conaffinity[i]}
    assert colliding == {"hand", "left_pad", "right_pad", "cube", "table"}
    for pad in ("left_pad", "right_pad"):
        g = m.geom(pad)
        assert g.condim[0] == 4 and g.type[0] == mujoco.mjtGeom.mjGEOM_BOX and g.friction[0] == 1.0
    cube = m.geom("cube")
    assert cube.type[0] == mujoco.mjtGeom.mjGEOM_BOX and cube.size == pytest.approx([0.02] * 3)


def test_home_holds_above_the_table() -> None:
    """Franka's ready pose: the hand points down 0.47 m above the table, open; the cube rests; nothing
    moves while the servos hold the keyframe's targets."""
    m = _scene()
    d = _home(m)
    key = m.key("home")
    ready = [0, -math.pi / 4, 0, -3 * math.pi / 4, 0, math.pi / 2, math.pi / 4]
    np.testing.assert_allclose(key.qpos[:7], ready)
    np.testing.assert_allclose(key.ctrl, [*key.qpos[:7], 0.08])
    site = d.site("grip_site")
    assert site.xpos[2] > 0.4
    np.testing.assert_allclose(site.xmat.reshape(3, 3)[:, 2], [0, 0, -1], atol=1e-6)
    assert d.geom("cube").xpos[2] == pytest.approx(0.02)
    assert _contacts(m, d) == {frozenset(("cube", "table"))}
    q0 = d.qpos.copy()
    for _ in range(200):
        mujoco.mj_step(m, d)
    np.testing.assert_allclose(d.qpos[:9], q0[:9], atol=1e-3)
    np.testing.assert_allclose(d.qpos[9:12], q0[9:12], atol=2e-4)


def _mujoco_grasp(m: mujoco.MjModel) -> mujoco.MjData:
    """MuJoCo C after the scripted grasp of a turned cube, mid-lift: the cube between the pads."""
    d = _home(m)
    cube, yaw = np.asarray([0.5, 0.1, 0.02]), 0.3
    d.qpos[9:12], d.qpos[12:16] = cube, [math.cos(yaw / 2), 0, 0, math.sin(yaw / 2)]
    mujoco.mj_forward(m, d)
    plan = scripted.grasp_plan(m, d.qpos[:7], cube, yaw)
    arm, grip = scripted.plan_targets(plan, d.qpos[:7].copy(), (40, 25, 15, 30))
    for target, g in zip(arm, grip, strict=True):
        d.ctrl[:7], d.ctrl[7] = target, 0.08 if g > 0 else 0.0
        for _ in range(4):
            mujoco.mj_step(m, d)
    return d


def test_scripted_grasp_lifts_the_cube_in_mujoco() -> None:
    m = _scene()
    d = _mujoco_grasp(m)
    assert d.qpos[11] > 0.02 + 0.08
    assert {frozenset(("left_pad", "cube")), frozenset(("right_pad", "cube"))} <= _contacts(m, d)


STEPS = 20  # 0.1 s


@jax.jit
def _rollout(sys: bp.System, state: bp.State, ctrl: jax.Array) -> jax.Array:
    def body(s: bp.State, _: None) -> tuple[bp.State, jax.Array]:
        s = bp.step(sys, s, ctrl)
        return s, s.q

    return jax.lax.scan(body, state, None, length=STEPS)[1]


def _compare(m: mujoco.MjModel, sys: bp.System, qpos: np.ndarray, qvel: np.ndarray, ctrl: np.ndarray) -> None:
    """0.1 s of MuJoCo C and of brax-physics from (qpos, qvel), both from a reset warm start."""
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:], d.ctrl[:] = qpos, qvel, ctrl
    want = np.zeros((STEPS, m.nq))
    for i in range(STEPS):
        mujoco.mj_step(m, d)
        want[i] = d.qpos
    f32 = jnp.float32
    state = bp.init(sys, jnp.asarray(qpos, f32), jnp.asarray(qvel, f32))
    got = np.asarray(_rollout(sys, state, jnp.asarray(ctrl, f32)))
    # float32 against float64 on the same algorithms: far inside the 5e-3 the task needs
    np.testing.assert_allclose(got, want, atol=1e-4)


def test_brax_physics_tracks_mujoco_on_the_scene() -> None:
    """From the keyframe, the gripper closing on nothing; then with the cube grasped and lifting."""
    m = _scene()
    sys = bp.load_mjcf(ASSETS / "arm_pick_scene.xml")
    key = m.key("home")
    closing = key.ctrl.copy()
    closing[7] = 0.0
    _compare(m, sys, key.qpos, key.qvel, closing)
    d = _mujoco_grasp(m)
    _compare(m, sys, d.qpos.copy(), d.qvel.copy(), d.ctrl.copy())


def test_brax_physics_loads_the_arm() -> None:
    assert isinstance(bp.load_mjcf(ASSETS / "arm.xml"), bp.System)
