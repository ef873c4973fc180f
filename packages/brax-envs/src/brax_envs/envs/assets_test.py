"""The standard-suite MJCF assets, checked with MuJoCo alone against the standard models' facts."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest

from brax_envs.envs import _assets


def _capsule(r: float, length: float, density: float = 1000.0) -> float:
    """Mass of a capsule of radius `r` and cylinder length `length`."""
    return density * (math.pi * r * r * length + 4.0 / 3.0 * math.pi * r**3)


# name: (nq, nv, nu, timestep, total mass or None)
_SIZES = {
    "ant": (15, 14, 8, 0.01, None),
    "halfcheetah": (9, 9, 6, 0.01, 14.0),
    "hopper": (6, 6, 3, 0.002, None),
    "humanoid": (24, 23, 17, 0.003, None),
    "humanoidstandup": (24, 23, 17, 0.003, None),
    "inverted_pendulum": (2, 2, 1, 0.02, None),
    "inverted_double_pendulum": (3, 3, 1, 0.01, None),
    "pusher": (11, 11, 7, 0.01, None),
    "reacher": (4, 4, 2, 0.01, None),
    "swimmer": (5, 5, 2, 0.01, None),
    "walker2d": (9, 9, 6, 0.002, None),
}


def _body_mass(m: mujoco.MjModel, name: str) -> float:
    return float(m.body_mass[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, name)])


def _joint(m: mujoco.MjModel, name: str) -> int:
    j = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, name)
    assert j >= 0, name
    return int(j)


@pytest.mark.parametrize("name", sorted(_SIZES))
def test_sizes_and_timestep(name: str) -> None:
    nq, nv, nu, dt, total = _SIZES[name]
    m = _assets.mj_model(name)
    assert (m.nq, m.nv, m.nu) == (nq, nv, nu)
    assert m.opt.timestep == pytest.approx(dt)
    if total is not None:
        assert m.body_mass.sum() == pytest.approx(total, rel=1e-5)
    # every actuator is a joint motor with a control range
    assert np.all(m.actuator_trntype == mujoco.mjtTrn.mjTRN_JOINT) and np.all(m.actuator_ctrllimited == 1)


def test_ant() -> None:
    m = _assets.mj_model("ant")
    assert _body_mass(m, "torso") == pytest.approx(5.0 * 4.0 / 3.0 * math.pi * 0.25**3, rel=1e-5)
    assert _body_mass(m, "aux_1") == pytest.approx(_capsule(0.08, 0.2 * math.sqrt(2), 5.0), rel=1e-5)
    foot = _capsule(0.08, 0.4 * math.sqrt(2), 5.0)
    assert _body_mass(m, "front_left_foot") == pytest.approx(foot, rel=1e-5)
    assert np.allclose(m.actuator_gear[:, 0], 150.0)
    deg = math.pi / 180
    np.testing.assert_allclose(m.jnt_range[_joint(m, "hip_1")], [-30 * deg, 30 * deg], rtol=1e-6)
    np.testing.assert_allclose(m.jnt_range[_joint(m, "ankle_1")], [30 * deg, 70 * deg], rtol=1e-6)
    np.testing.assert_allclose(m.jnt_range[_joint(m, "ankle_2")], [-70 * deg, -30 * deg], rtol=1e-6)
    # the home pose keeps every hinge inside its range
    q = _assets.home_qpos("ant")
    for j in range(1, m.njnt):
        lo, hi = m.jnt_range[j]
        assert lo <= float(q[m.jnt_qposadr[j]]) <= hi


def test_halfcheetah() -> None:
    m = _assets.mj_model("halfcheetah")
    assert _body_mass(m, "torso") == pytest.approx(6.2502, abs=2e-4)  # the standard model's torso
    np.testing.assert_allclose(m.actuator_gear[:, 0], [120, 90, 60, 120, 60, 30])
    np.testing.assert_allclose(m.jnt_stiffness[3:], [240, 180, 120, 180, 120, 60])
    np.testing.assert_allclose(m.dof_damping[3:], [6, 4.5, 3, 4.5, 3, 1.5])
    np.testing.assert_allclose(m.jnt_range[3:], [[-0.52, 1.05], [-0.785, 0.785], [-0.4, 0.785],
                                                 [-1, 0.7], [-1.2, 0.87], [-0.5, 0.5]])


@pytest.mark.parametrize("name", ["hopper", "walker2d"])
def test_hopper_walker(name: str) -> None:
    m = _assets.mj_model(name)
    assert _body_mass(m, "torso") == pytest.approx(_capsule(0.05, 0.4), rel=1e-5)
    assert _body_mass(m, "thigh") == pytest.approx(_capsule(0.05, 0.45), rel=1e-5)
    assert _body_mass(m, "leg") == pytest.approx(_capsule(0.04, 0.5), rel=1e-5)
    foot = 0.39 if name == "hopper" else 0.2
    assert _body_mass(m, "foot") == pytest.approx(_capsule(0.06, foot), rel=1e-5)
    assert np.allclose(m.actuator_gear[:, 0], 200.0 if name == "hopper" else 100.0)
    deg = math.pi / 180
    np.testing.assert_allclose(m.jnt_range[_joint(m, "thigh_joint")], [-150 * deg, 0], atol=1e-6)
    np.testing.assert_allclose(m.jnt_range[_joint(m, "foot_joint")], [-45 * deg, 45 * deg], atol=1e-6)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    assert d.xpos[1, 2] == pytest.approx(1.25)  # torso centre
    assert d.xpos[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "foot"), 2] == pytest.approx(0.1)


@pytest.mark.parametrize("name", ["humanoid", "humanoidstandup"])
def test_humanoid(name: str) -> None:
    m = _assets.mj_model(name)
    # the standard model's masses (its joint-less foot bodies are part of the shins here)
    assert _body_mass(m, "torso") == pytest.approx(8.90746, rel=1e-5)
    assert _body_mass(m, "right_shin") == pytest.approx(2.75570 + 1.76715, rel=1e-5)
    assert m.body_mass.sum() == pytest.approx(42.1162, rel=1e-5)
    gears = [100.0] * 5 + [300.0, 200.0] + [100.0] * 2 + [300.0, 200.0] + [25.0] * 6
    np.testing.assert_allclose(m.actuator_gear[:, 0], np.array(gears))
    np.testing.assert_allclose(m.actuator_ctrlrange, np.tile([-0.4, 0.4], (17, 1)))
    deg = math.pi / 180
    np.testing.assert_allclose(m.jnt_range[_joint(m, "right_knee")], [-160 * deg, -2 * deg], rtol=1e-6)
    np.testing.assert_allclose(m.jnt_range[_joint(m, "right_hip_y")], [-110 * deg, 20 * deg], rtol=1e-6)
    assert m.nbody == 12  # 11 bodies + world


def test_pendulums() -> None:
    ip = _assets.mj_model("inverted_pendulum")
    np.testing.assert_allclose(ip.body_mass[1:], [10.471976, 5.018591], rtol=1e-5)
    assert ip.actuator_gear[0, 0] == 100 and list(ip.actuator_ctrlrange[0]) == [-3, 3]
    np.testing.assert_allclose(ip.jnt_range, np.array([[-1.0, 1.0], [-math.pi / 2, math.pi / 2]]), rtol=1e-6)
    idp = _assets.mj_model("inverted_double_pendulum")
    np.testing.assert_allclose(idp.body_mass[1:], [10.471976, _capsule(0.045, 0.6), _capsule(0.045, 0.6)],
                               rtol=1e-5)
    assert idp.actuator_gear[0, 0] == 500 and list(idp.jnt_limited) == [1, 0, 0]
    np.testing.assert_allclose(idp.opt.gravity, [1e-5, 0, -9.81])


def test_reacher_pusher_swimmer() -> None:
    r = _assets.mj_model("reacher")
    np.testing.assert_allclose(r.body_mass[1:3], [_capsule(0.01, 0.1)] * 2, rtol=1e-5)
    assert list(r.jnt_limited) == [0, 1, 1, 1] and np.allclose(r.actuator_gear[:, 0], 200)
    p = _assets.mj_model("pusher")
    assert _body_mass(p, "r_shoulder_lift_link") == pytest.approx(_capsule(0.1, 0.2, 300.0), rel=1e-5)
    assert p.opt.gravity[2] == 0 and p.nbody == 13
    np.testing.assert_allclose(p.actuator_ctrlrange, [[-2, 2]] * 7)
    s = _assets.mj_model("swimmer")
    np.testing.assert_allclose(s.body_mass[1:], [_capsule(0.1, 1.0)] * 3, rtol=1e-5)
    assert s.opt.density == 4000 and s.opt.viscosity == pytest.approx(0.1)
    np.testing.assert_allclose(s.jnt_range[3:], [[-100 * math.pi / 180, 100 * math.pi / 180]] * 2, rtol=1e-6)
    assert np.allclose(s.actuator_gear[:, 0], 150)
