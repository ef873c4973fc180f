"""Actuators against MuJoCo C: activation dynamics, gain and bias types, transmissions, joint force limits,
actuator damping and armature, stage by stage and over trajectories for each integrator."""

from __future__ import annotations

import importlib.util
import os
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import brax_physics as bp

# Every dyntype (filter, filterexact, integrator with actrange and actearly, muscle with the length
# range the compiler computes), gain and bias type (fixed, affine, muscle), and every transmission
# but tendon: hinge/slide joint, ball joint and jointinparent, site with and without refsite (a
# refsite on another branch, so the common dof chain is dropped), slider-crank. The elbow inherits
# damping and armature from its actuator; the shoulder's total actuator force is clamped.
ACTUATORS = """
<mujoco model="actuators">
  <option timestep="0.004"/>
  <worldbody>
    <body name="upper" pos="0 0 1">
      <joint name="shoulder" type="hinge" axis="0 1 0" damping="0.1" range="-100 100"
             actuatorfrcrange="-1.2 1.2"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      <site name="tip" pos="0.3 0 0"/>
      <body name="lower" pos="0.3 0 0">
        <joint name="elbow" type="hinge" axis="0 1 0" range="-120 120"/>
        <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.025"/>
        <site name="hand" pos="0.2 0.01 0" euler="10 20 30"/>
      </body>
      <body name="side" pos="0 0.1 0">
        <joint name="side" type="hinge" axis="1 0 0"/>
        <geom type="capsule" fromto="0 0 0 0 0.2 0" size="0.02"/>
        <site name="side_tip" pos="0 0.2 0.02" euler="0 30 0"/>
      </body>
    </body>
    <body name="carriage" pos="1 0 1">
      <joint name="rail" type="slide" axis="1 0 0" damping="0.5"/>
      <geom type="box" size=".05 .05 .05"/>
      <site name="slider" pos="0 0 0" euler="0 90 0"/>
      <body name="crank" pos="0.1 0 0">
        <joint name="crank" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.1 0 0" size="0.02"/>
        <site name="crankpin" pos="0.1 0 0"/>
      </body>
    </body>
    <body name="pendulum" pos="2 0 1">
      <joint name="ball" type="ball" damping="0.05"/>
      <geom type="capsule" fromto="0 0 0 0 0.2 -0.2" size="0.03"/>
    </body>
  </worldbody>
  <actuator>
    <general name="filter" joint="shoulder" dyntype="filter" dynprm="0.05" gainprm="2"/>
    <general name="exact" joint="elbow" dyntype="filterexact" dynprm="0.03" gaintype="affine"
             gainprm="1 0.5 0.2" biastype="affine" biasprm="0 -1 -0.2" damping="0.3" armature="0.02"/>
    <general name="integrator" joint="rail" dyntype="integrator" actlimited="true" actrange="-0.3 0.3"
             gainprm="5" biastype="affine" biasprm="0 -5 -1" actearly="true"/>
    <motor name="site" site="hand" gear="0.1 0.3 0.2 0.2 0.1 -0.3"/>
    <motor name="refsite" site="side_tip" refsite="hand" gear="0.3 0.2 0.1 0.2 -0.1 0.4"/>
    <general name="crank" cranksite="crankpin" slidersite="slider" cranklength="0.15" gainprm="1"/>
    <motor name="ball" joint="ball" gear="0.2 0.3 0.1"/>
    <general name="ball_parent" jointinparent="ball" gear="0.1 -0.2 0.3" dyntype="filter" dynprm="0.02"/>
    <muscle name="muscle" joint="shoulder" ctrlrange="0 1"/>
    <muscle name="muscle_smooth" joint="elbow" ctrlrange="0 1" tausmooth="0.3" force="20"/>
  </actuator>
  <sensor>
    <actuatorpos actuator="refsite"/>
    <actuatorvel actuator="crank"/>
    <actuatorfrc actuator="muscle"/>
    <jointactuatorfrc joint="shoulder"/>
  </sensor>
</mujoco>
"""

_INTEGRATORS = {"Euler": int(mujoco.mjtIntegrator.mjINT_EULER), "RK4": int(mujoco.mjtIntegrator.mjINT_RK4),
                "implicitfast": int(mujoco.mjtIntegrator.mjINT_IMPLICITFAST)}
STEPS = 40


def _mjmodel(integrator: str = "Euler") -> Any:
    m = mujoco.MjModel.from_xml_string(ACTUATORS)
    m.opt.integrator = _INTEGRATORS[integrator]
    return m


def _ctrl(m: Any, t: float) -> np.ndarray:
    """Sinusoidal controls, out of ctrlrange at times (the muscles' [0, 1])."""
    k = np.arange(m.nu)
    return 0.8 * np.sin(7.0 * t + k) + 0.3


def _random_state(m: Any, seed: int = 0) -> Any:
    rng = np.random.default_rng(seed)
    d = mujoco.MjData(m)
    d.qpos[:] = m.qpos0 + 0.3 * rng.standard_normal(m.nq)
    ball = m.jnt_qposadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, "ball")]
    d.qpos[ball : ball + 4] /= np.linalg.norm(d.qpos[ball : ball + 4])
    d.qvel[:] = rng.standard_normal(m.nv)
    d.act[:] = 0.3 * rng.standard_normal(m.na)
    d.ctrl[:] = _ctrl(m, 0.3)
    return d


def _f32(x: Any) -> jax.Array:
    return jnp.asarray(np.asarray(x), jnp.float32)


def _moment(m: Any, d: Any) -> np.ndarray:
    out = np.zeros((m.nu, m.nv))
    mujoco.mju_sparse2dense(out, d.actuator_moment, d.moment_rownnz, d.moment_rowadr, d.moment_colind)
    return out


def _close(ours: Any, theirs: Any) -> None:
    np.testing.assert_allclose(np.asarray(ours), theirs, rtol=1e-5, atol=1e-5)


def test_loads_every_supported_type() -> None:
    m = _mjmodel()
    sys = bp.from_mjmodel(m)
    assert sys.na == m.na == 6
    assert set(sys.actuator_dyntype) == {0, 1, 2, 3, 4}  # none, integrator, filter, filterexact, muscle
    assert sys.jnt_actfrclimited[0] and sys.jnt_actuatorid[1] >= 0


@pytest.fixture(scope="module")
def init_jit() -> Any:
    return jax.jit(bp.init)


def test_stage_quantities_match_mujoco(init_jit: Any) -> None:
    m = _mjmodel()
    d = _random_state(m)
    sys = bp.from_mjmodel(m)
    s = init_jit(sys, _f32(d.qpos), _f32(d.qvel), _f32(d.ctrl), _f32(d.act))
    mujoco.mj_forward(m, d)
    _close(s.actuator_length, d.actuator_length)
    _close(s.actuator_moment, _moment(m, d))
    _close(s.actuator_velocity, d.actuator_velocity)
    _close(s.act, d.act)
    np.testing.assert_allclose(s.act_dot, d.act_dot, rtol=1e-5, atol=1e-4)
    _close(s.actuator_force, d.actuator_force)
    _close(s.qfrc_actuator, d.qfrc_actuator)
    assert abs(d.qfrc_actuator[0]) == pytest.approx(1.2)  # the shoulder's actuatorfrcrange clamps
    _close(s.qfrc_passive, d.qfrc_passive)  # inherited actuator damping
    full = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, full)
    _close(s.mass_matrix, full)  # inherited actuator armature
    _close(s.sensordata, d.sensordata)


def test_muscle_curves_tendon_and_free_joint_transmissions(init_jit: Any) -> None:
    # muscles across their length and velocity ranges, fixed and spatial tendons, and a free body's
    # wrench in both frames
    xml = """
    <mujoco><worldbody>
      <site name="anchor" pos="0.2 0 1.3"/>
      <body name="arm" pos="0 0 1"><joint name="j" type="hinge" axis="0 1 0" range="-90 90"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/><site name="pin" pos="0.3 0 0"/></body>
      <body name="box" pos="1 0 1"><freejoint name="free"/><geom type="box" size=".1 .05 .02"/></body>
    </worldbody>
    <tendon><fixed name="fixed"><joint joint="j" coef="0.5"/></fixed>
      <spatial name="cord"><site site="anchor"/><site site="pin"/></spatial></tendon>
    <actuator>
      <general name="t1" tendon="fixed" gainprm="2" biastype="affine" biasprm="0 -1 -0.5"/>
      <general name="t2" tendon="cord" dyntype="filter" dynprm="0.05" gainprm="3" gear="2"/>
      <muscle name="m1" joint="j" lengthrange="-1 1" ctrlrange="0 1" fpmax="1.5" vmax="2"/>
      <muscle name="m2" joint="j" gear="-1" lengthrange="-1.2 0.8" ctrlrange="0 1" lmin="0.3" lmax="1.8"
              range="0.6 1.4"/>
      <motor name="f1" joint="free" gear="0.1 0.2 0.3 0.4 0.5 0.6"/>
      <general name="f2" jointinparent="free" gear="0.3 -0.2 0.1 -0.4 0.5 0.2"/>
    </actuator></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    sys = bp.from_mjmodel(m)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(1)
    for q, v in ((-0.9, -3.0), (-0.2, 0.5), (0.4, 1.5), (0.9, -0.2), (0.7, 4.0)):
        d.qpos[:] = m.qpos0
        d.qpos[0] = q
        d.qpos[4:8] = rng.standard_normal(4) / 2
        d.qvel[:] = rng.standard_normal(m.nv)
        d.qvel[0] = v
        d.act[:] = rng.uniform(0, 1, m.na)
        d.ctrl[:] = rng.uniform(0, 1, m.nu)
        s = init_jit(sys, _f32(d.qpos), _f32(d.qvel), _f32(d.ctrl), _f32(d.act))
        mujoco.mj_forward(m, d)
        np.testing.assert_allclose(s.actuator_force, d.actuator_force, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(s.act_dot, d.act_dot, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(s.actuator_moment, _moment(m, d), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(s.qfrc_actuator, d.qfrc_actuator, rtol=1e-5, atol=1e-5)


def _rollout(integrator: str) -> tuple[np.ndarray, ...]:
    m = _mjmodel(integrator)
    d = _random_state(m)
    sys = bp.from_mjmodel(m)
    ctrls = np.stack([_ctrl(m, m.opt.timestep * i) for i in range(STEPS)])

    def body(s: bp.State, u: jax.Array) -> tuple[bp.State, tuple[jax.Array, ...]]:
        s = bp.step(sys, s, u)
        return s, (s.q, s.qd, s.act, s.sensordata)

    s0 = bp.init(sys, _f32(d.qpos), _f32(d.qvel), _f32(ctrls[0]), _f32(d.act))
    _, ours = jax.jit(lambda s, u: jax.lax.scan(body, s, u))(s0, _f32(ctrls))
    theirs: list[list[np.ndarray]] = [[], [], [], []]
    for u in ctrls:
        d.ctrl[:] = u
        mujoco.mj_step(m, d)
        for k, x in enumerate((d.qpos, d.qvel, d.act, d.sensordata)):
            theirs[k].append(x.copy())
    return tuple(np.asarray(o, np.float64) for o in ours) + tuple(np.stack(t) for t in theirs)


@pytest.mark.parametrize("integrator", list(_INTEGRATORS))
def test_trajectory_matches_mujoco(integrator: str) -> None:
    q, qd, act, data, mq, mqd, mact, mdata = _rollout(integrator)
    # quaternion sign is free; the ball's is continuous from the same start here
    np.testing.assert_allclose(q, mq, atol=2e-4)
    np.testing.assert_allclose(qd, mqd, atol=2e-3, rtol=1e-3)
    np.testing.assert_allclose(act, mact, atol=1e-4)
    np.testing.assert_allclose(data, mdata, atol=2e-3, rtol=1e-3)
    assert np.ptp(np.delete(mact, 2, axis=1), axis=0).min() > 1e-2  # the activations move
    assert mact[:, 2].max() == pytest.approx(0.3)  # the integrator's, held by its actrange


def _suite_xml(name: str) -> str:
    """Path of a dm_control suite XML, found without importing dm_control.

    Importing dm_control.suite loads its renderer, which binds PyOpenGL to EGL for the whole test
    process and breaks brax_io.image's OSMesa default in whichever test runs next in that worker.
    """
    spec = importlib.util.find_spec("dm_control")
    assert spec is not None and spec.origin is not None, "dm_control (a test oracle) is not installed"
    return os.path.join(os.path.dirname(spec.origin), "suite", f"{name}.xml")


def _quadruped() -> Any:
    """dm_control's quadruped as its suite builds it (floor 2 m, no walls, ball, target, terrain or
    rangefinders), with floor contacts only.

    Its tendon equalities are removed and its body parts only touch the floor (the self pairs need
    colliders we lack); both engines get the same model.
    """
    spec = mujoco.MjSpec.from_file(_suite_xml("quadruped"))
    spec.geom("floor").size = [2, 2, 0.5]
    for name in ("wall_px", "wall_py", "wall_nx", "wall_ny", "terrain"):
        spec.delete(spec.geom(name))
    spec.delete(spec.body("ball"))
    spec.delete(spec.site("target"))
    rangefinders = [s for s in spec.sensors if s.type == mujoco.mjtSensor.mjSENS_RANGEFINDER]
    for element in [*rangefinders, *spec.equalities]:
        spec.delete(element)
    m = spec.compile()
    m.geom_conaffinity[m.geom_type != mujoco.mjtGeom.mjGEOM_PLANE] = 0
    return m


def test_dm_control_quadruped_tracks_mujoco() -> None:
    m = _quadruped()
    assert set(m.actuator_dyntype.tolist()) == {int(mujoco.mjtDyn.mjDYN_FILTER)}
    assert int(mujoco.mjtTrn.mjTRN_TENDON) in m.actuator_trntype.tolist()
    d = mujoco.MjData(m)
    d.qpos[2] = 0.35  # its feet reach the floor within the rollout
    sys = bp.from_mjmodel(m)
    steps = round(0.1 / m.opt.timestep)
    ctrls = np.stack([np.sin(40 * m.opt.timestep * i + np.arange(m.nu)) for i in range(steps)])

    def body(s: bp.State, u: jax.Array) -> tuple[bp.State, tuple[jax.Array, jax.Array]]:
        s = bp.step(sys, s, u)
        return s, (s.q, s.act)

    s0 = bp.init(sys, _f32(d.qpos), _f32(d.qvel))
    q, act = jax.jit(lambda s, u: jax.lax.scan(body, s, u)[1])(s0, _f32(ctrls))
    mq, mact, ncon = [], [], 0
    for u in ctrls:
        d.ctrl[:] = u
        mujoco.mj_step(m, d)
        mq.append(d.qpos.copy())
        mact.append(d.act.copy())
        ncon = max(ncon, d.ncon)
    assert ncon > 0
    np.testing.assert_allclose(np.asarray(q), np.stack(mq), atol=5e-3)
    np.testing.assert_allclose(np.asarray(act), np.stack(mact), atol=1e-4)
    assert np.ptp(np.stack(mact), axis=0).min() > 0.05


def test_dm_control_dog_acts_match_mujoco() -> None:
    # 38 filter actuators on joints and tendons; contacts off (its meshes lack colliders here) and
    # noslip off (not supported), in both engines
    m = mujoco.MjModel.from_xml_path(_suite_xml("dog"))
    m.opt.noslip_iterations = 0
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    d = mujoco.MjData(m)
    sys = bp.from_mjmodel(m)
    ctrls = np.stack([0.5 * np.sin(40 * m.opt.timestep * i + np.arange(m.nu)) for i in range(20)])

    def body(s: bp.State, u: jax.Array) -> tuple[bp.State, tuple[jax.Array, jax.Array]]:
        s = bp.step(sys, s, u)
        return s, (s.q, s.act)

    s0 = bp.init(sys, _f32(d.qpos), _f32(d.qvel))
    q, act = jax.jit(lambda s, u: jax.lax.scan(body, s, u)[1])(s0, _f32(ctrls))
    mq, mact = [], []
    for u in ctrls:
        d.ctrl[:] = u
        mujoco.mj_step(m, d)
        mq.append(d.qpos.copy())
        mact.append(d.act.copy())
    np.testing.assert_allclose(np.asarray(act), np.stack(mact), atol=1e-5)
    np.testing.assert_allclose(np.asarray(q), np.stack(mq), atol=1e-4)
    assert np.ptp(np.stack(mact), axis=0).min() > 0.05
