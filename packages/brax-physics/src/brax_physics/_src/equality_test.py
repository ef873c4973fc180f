"""Equality constraints vs MuJoCo C: rows (efc_J, pos, type, R, D, aref), forces, trajectories, eq_active."""

from __future__ import annotations

import functools
import importlib.util
import os
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import brax_physics as bp
from brax_physics._src import com, constraint, equality, kinematics, tendon
from brax_physics._src.collision.contact import collide

# Every kind and semantics at random poses: connect by bodies and by sites, weld between a ball-jointed
# body and a free body (relpose, anchor, torquescale, own solref/solimp), weld by sites (direct
# solref), weld of a free body to the world, joint coupling with a quartic polycoef, a fixed slide,
# a fixed tendon coupled to a spatial one by a polycoef and a spatial tendon held at its length.
ROWS_MODEL = """<mujoco>
<default><geom contype="0" conaffinity="0"/></default>
<worldbody>
<body name="a" pos="0 0 1"><joint name="j1" axis="0 1 0"/>
  <geom type="capsule" fromto="0 0 0 .5 0 0" size=".05"/>
 <body name="b" pos=".5 0 0"><joint name="j2" axis="0 1 .3"/>
  <geom type="capsule" fromto="0 0 0 .5 0 0" size=".05"/>
  <site name="sb" pos=".4 .05 0" quat="0.9 0.1 0.3 0.2"/></body>
</body>
<body name="c" pos="1 0 1"><joint name="j3" axis="0 1 0"/><joint name="j3b" type="slide" axis="1 0 0"/>
 <geom type="capsule" fromto="0 0 0 0 0 -.5" size=".05"/><site name="sc" pos="0 0 -.1"/></body>
<body name="f" pos="0 2 1" euler="10 20 30"><freejoint/><geom type="box" size=".1 .2 .3"/>
 <body name="g" pos=".2 0 0"><joint type="ball"/><geom type="capsule" fromto="0 0 0 .3 0 0" size=".05"/>
  <site name="sg" pos=".3 0 0" quat="0.7 0.7 0 0"/></body></body>
<body name="h" pos="1 2 1"><freejoint/><geom type="sphere" size=".1" pos=".05 0 0"/></body>
</worldbody>
<tendon>
<fixed name="tf"><joint joint="j1" coef="1"/><joint joint="j3" coef="-0.5"/></fixed>
<spatial name="ts"><site site="sb"/><site site="sc"/></spatial>
</tendon>
<equality>
<connect body1="b" body2="c" anchor=".5 0 0"/>
<tendon tendon1="tf" tendon2="ts" polycoef="0.1 0.4 0.2 0.1 0"/>
<weld body1="g" body2="h" relpose=".1 .2 .3 .9 .1 .2 .3" anchor=".05 .1 0" torquescale="3" solref="0.05 0.7"
      solimp="0.8 0.9 0.01 0.3 3"/>
<joint joint1="j1" joint2="j3" polycoef="0.1 0.5 -0.3 0.2 0.1"/>
<connect site1="sb" site2="sg"/>
<weld site1="sg" site2="sc" solref="-1000 -20"/>
<joint joint1="j3b" polycoef=".05 0 0 0 0"/>
<tendon tendon1="ts" polycoef="0.02 0 0 0 0" solref="0.03 0.8"/>
<weld body1="h"/>
</equality>
</mujoco>"""


@functools.cache
def _rows_model() -> tuple[bp.System, Any]:
    m = mujoco.MjModel.from_xml_string(ROWS_MODEL)
    return bp.from_mjmodel(m), m


@jax.jit
def _rows(sys: bp.System, q: jax.Array, qd: jax.Array,
          active: jax.Array) -> tuple[constraint.Rows, equality.Rows, jax.Array]:
    fr = kinematics.kinematics(sys, q)
    sub = com.subtree_com(sys, fr.xipos)
    cdof = com.cdof(sys, fr, sub)
    cvel, cdof_dot = com.com_vel(sys, cdof, qd)
    con = collide(sys, fr.geom_xpos, fr.geom_xmat)
    ten_length, ten_J = tendon.tendon(sys, q, fr, sub, cdof)
    eq = equality.rows(sys, q, fr, cdof, sub, active, ten_length, ten_J)
    rows = constraint.make_rows(sys, q, cdof, sub, con, ten_length, ten_J, eq)
    jdotv = equality.jdotv(sys, fr, cdof, sub, cvel, cdof_dot, qd)
    return rows, eq, constraint.reference_acceleration(rows, qd, jdotv)


def _random_state(m: Any, seed: int) -> Any:
    d = mujoco.MjData(m)
    rng = np.random.default_rng(seed)
    d.qpos[:] = m.qpos0 + 0.3 * rng.normal(size=m.nq)
    mujoco.mj_normalizeQuat(m, d.qpos)
    d.qvel[:] = rng.normal(size=m.nv)
    mujoco.mj_forward(m, d)
    return d


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rows_match_mujoco(seed: int) -> None:
    sys, m = _rows_model()
    d = _random_state(m, seed)
    rows, eq, aref = _rows(sys, jnp.asarray(d.qpos, jnp.float32), jnp.asarray(d.qvel, jnp.float32),
                           jnp.ones(sys.neq, bool))
    ne = d.ne
    assert constraint.layout(sys).neq == ne == d.nefc == 3 + 1 + 6 + 1 + 3 + 6 + 1 + 1 + 6
    assert np.all(d.efc_type == mujoco.mjtConstraint.mjCNSTR_EQUALITY)
    np.testing.assert_array_equal(constraint.layout(sys).eq.row_eq, d.efc_id)
    np.testing.assert_allclose(np.asarray(rows.J), d.efc_J.reshape(ne, m.nv), atol=2e-6)
    support = constraint.row_dofs(sys)  # static: every entry the rows can reach, and only those
    assert not np.any((np.asarray(rows.J) != 0) & ~support)
    assert support.sum() < support.size
    np.testing.assert_allclose(np.asarray(eq.pos), d.efc_pos, atol=1e-6)
    np.testing.assert_allclose(np.asarray(rows.R), d.efc_R, rtol=2e-5)
    np.testing.assert_allclose(np.asarray(rows.D), d.efc_D, rtol=2e-5)
    atol = 1e-5 * np.max(np.abs(d.efc_aref))
    np.testing.assert_allclose(np.asarray(aref), d.efc_aref, rtol=1e-4, atol=atol)


def test_forces_match_mujoco() -> None:
    sys, m = _rows_model()
    d = _random_state(m, 3)
    s = jax.jit(bp.init)(sys, jnp.asarray(d.qpos, jnp.float32), jnp.asarray(d.qvel, jnp.float32))
    scale = np.max(np.abs(d.efc_force))
    np.testing.assert_allclose(np.asarray(s.efc_force), d.efc_force, atol=1e-5 * scale)
    # float32 on a stiff problem (violated equalities, |qacc| ~ 6e3): M⁻¹ amplifies the roundoff
    np.testing.assert_allclose(np.asarray(s.qacc), d.qacc, atol=1e-4 * np.max(np.abs(d.qacc)))


# Independent mechanisms, one compile: a four-bar closed by a connect, a free box welded to the world
# (relpose, torquescale), a free load welded to a swinging arm (own solref/solimp), two hinges coupled
# by a polycoef, a pendulum tip held on a site of a free body by a site connect, a knee that follows its
# hip through a fixed tendon held at its length (as dm_control's quadruped), two hinges whose fixed
# tendons are coupled by a polycoef. Force and torque
# sensors on bodies the connect and weld forces act on (MuJoCo adds those forces to cfrc_ext).
SCENE = """<mujoco><option timestep="0.002"/>
<default><geom contype="0" conaffinity="0"/><joint axis="0 1 0"/></default>
<worldbody>
<body name="crank" pos="0 0 1"><joint name="crank" damping="0.05"/>
  <geom type="capsule" fromto="0 0 0 0 0 .3" size=".02"/>
 <body name="coupler" pos="0 0 .3"><joint name="coupler"/>
  <geom type="capsule" fromto="0 0 0 1 0 0" size=".02"/>
 </body></body>
<body name="rocker" pos="1 0 1"><joint name="rocker"/><site name="rocker_s" pos="0 0 .1"/>
  <geom type="capsule" fromto="0 0 0 0 0 .3" size=".02"/></body>
<body name="box" pos="0 1 1" euler="10 20 30"><freejoint name="box"/>
  <geom type="box" size=".1 .05 .03"/></body>
<body name="arm" pos="0 2 1"><joint name="arm" axis="1 0 0"/>
  <geom type="capsule" fromto="0 0 0 0 .4 0" size=".02"/>
</body>
<body name="load" pos="0 2.45 1" euler="0 0 20"><freejoint name="load"/>
  <geom type="sphere" size=".05" pos=".02 0 0"/><site name="load_s" pos=".01 .02 0"/>
</body>
<body name="p1" pos="0 3 1"><joint name="p1"/><geom type="capsule" fromto="0 0 0 .3 0 0" size=".02"/></body>
<body name="p2" pos="0 3.5 1"><joint name="p2"/><geom type="capsule" fromto="0 0 0 .3 0 0" size=".02"/></body>
<body name="pend" pos="0 4 1"><joint name="pend" axis="1 0 0"/>
  <geom type="capsule" fromto="0 0 0 0 0 -.3" size=".02"/>
 <site name="tip" pos="0 0 -.3"/></body>
<body name="float" pos="0 4 .6"><freejoint name="float"/>
  <geom type="box" size=".05 .05 .05"/><site name="hook" pos="0 0 .1"/>
</body>
<body name="hip" pos="0 5 1"><joint name="hip"/><geom type="capsule" fromto="0 0 0 .3 0 0" size=".02"/>
 <body name="knee" pos=".3 0 0"><joint name="knee"/>
  <geom type="capsule" fromto="0 0 0 .3 0 0" size=".02"/></body>
</body>
<body name="p3" pos="0 6 1"><joint name="p3"/><geom type="capsule" fromto="0 0 0 .3 0 0" size=".02"/></body>
<body name="p4" pos="0 6.5 1"><joint name="p4"/><geom type="capsule" fromto="0 0 0 .3 0 0" size=".02"/></body>
</worldbody>
<tendon>
<fixed name="leg"><joint joint="hip" coef="1"/><joint joint="knee" coef="0.5"/></fixed>
<fixed name="t3"><joint joint="p3" coef="0.5"/></fixed>
<fixed name="t4"><joint joint="p4" coef="2"/></fixed>
</tendon>
<equality>
<connect name="fourbar" body1="coupler" body2="rocker" anchor="1 0 0"/>
<weld name="box_world" body1="box" relpose="0 1 1.05 0.95 0.1 0.2 0" torquescale="0.5"/>
<weld name="arm_load" body1="arm" body2="load" torquescale="2"
      solref="0.01 0.5" solimp="0.8 0.95 0.002 0.4 3"/>
<joint name="couple" joint1="p2" joint2="p1" polycoef="0.1 -0.8 0.3 0 0"/>
<connect name="hang" site1="tip" site2="hook"/>
<tendon name="leg" tendon1="leg" solref="0.005 0.5" solimp="0.95 0.99 0.01"/>
<tendon name="t34" tendon1="t4" tendon2="t3" polycoef="0 -1.2 0.5 0 0"/>
</equality>
<sensor>
<force site="load_s"/><torque site="load_s"/><accelerometer site="load_s"/>
<force site="rocker_s"/><torque site="rocker_s"/><force site="hook"/><torque site="hook"/>
</sensor>
</mujoco>"""
QVEL0 = {"crank": 2.0, "arm": 1.5, "p1": -2.0, "pend": 1.0, "hip": 2.0, "p3": 1.5}
CHUNK = 25  # steps per compiled rollout (one compile for every test)


@functools.cache
def _scene() -> tuple[bp.System, Any]:
    m = mujoco.MjModel.from_xml_string(SCENE)
    return bp.from_mjmodel(m), m


def _qvel0(m: Any) -> np.ndarray:
    qd = np.zeros(m.nv)
    for name, v in QVEL0.items():
        qd[m.jnt_dofadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, name)]] = v
    return qd


@jax.jit
def _rollout(sys: bp.System, state: bp.State) -> tuple[bp.State, jax.Array, jax.Array, jax.Array]:
    def body(s: bp.State, _: None) -> tuple[bp.State, tuple[jax.Array, jax.Array, jax.Array]]:
        s = bp.step(sys, s, jnp.zeros(0, s.qd.dtype))
        return s, (s.q, s.qd, s.sensordata)

    s, (q, qd, data) = jax.lax.scan(body, state, None, length=CHUNK)
    return s, q, qd, data


def _mujoco(m: Any, d: Any, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    qs, qds, data = [], [], []
    for _ in range(n):
        mujoco.mj_step(m, d)
        qs.append(d.qpos.copy())
        qds.append(d.qvel.copy())
        data.append(d.sensordata.copy())
    return np.array(qs), np.array(qds), np.array(data)


def _assert_close(q: jax.Array, qd: jax.Array, mq: np.ndarray, mqd: np.ndarray) -> None:
    # float32 against float64: the largest gaps (2.2e-4; 3.2e-4 after toggles) grow with the fastest
    # link's drift since the solver follows MuJoCo's line search and islands (not yet traced further)
    np.testing.assert_allclose(np.asarray(q, np.float64), mq, atol=5e-4)
    np.testing.assert_allclose(np.asarray(qd, np.float64), mqd, atol=2e-3 * max(1.0, np.max(np.abs(mqd))))


def test_trajectory_matches_mujoco() -> None:
    sys, m = _scene()
    d = mujoco.MjData(m)
    d.qvel[:] = _qvel0(m)
    s = bp.init(sys, sys.qpos0, jnp.asarray(d.qvel, jnp.float32))
    for _ in range(2):
        s, q, qd, data = _rollout(sys, s)
        mq, mqd, mdata = _mujoco(m, d, CHUNK)
        _assert_close(q, qd, mq, mqd)
        np.testing.assert_allclose(np.asarray(data, np.float64), mdata, atol=2e-3 * np.max(np.abs(mdata)))
    assert np.max(np.abs(mq - m.qpos0)) > 0.05  # the mechanisms move


def test_toggling_eq_active_matches_mujoco() -> None:
    """Switch equalities off and on between steps, in ours (State.eq_active) and in MuJoCo (d.eq_active)."""
    sys, m = _scene()
    d = mujoco.MjData(m)
    d.qvel[:] = _qvel0(m)
    s = bp.init(sys, sys.qpos0, jnp.asarray(d.qvel, jnp.float32))
    assert s.eq_active.shape == (sys.neq,) and bool(np.all(s.eq_active))
    off = [sys.eq_names.index(n) for n in ("arm_load", "couple", "fourbar")]
    for inactive in ([], off, off[:1]):
        active = np.ones(sys.neq, bool)
        active[inactive] = False
        s = s.replace(eq_active=jnp.asarray(active))
        d.eq_active[:] = active
        s, q, qd, _ = _rollout(sys, s)
        mq, mqd, _ = _mujoco(m, d, CHUNK)
        _assert_close(q, qd, mq, mqd)
    row_eq = constraint.layout(sys).eq.row_eq
    force = np.asarray(s.efc_force)[: row_eq.size]
    assert np.all(force[row_eq == off[0]] == 0)  # the inactive weld
    assert np.all(np.abs(force[row_eq == sys.eq_names.index("box_world")]) > 0)


# Equality rows come first: friction loss, limit and contact rows (and contact_force, the limit
# sensor) must read theirs after them.
MIXED = """<mujoco><option timestep="0.004"/>
<worldbody><geom type="plane" size="0 0 1"/>
<body name="arm" pos="0 0 .5"><joint name="hinge" axis="0 1 0" range="-10 10" frictionloss="0.2"/>
  <geom type="capsule" fromto="0 0 0 .3 0 0" size=".02" contype="0" conaffinity="0"/></body>
<body name="ball" pos=".3 0 .099"><freejoint/><geom size=".1"/></body>
</worldbody>
<equality><connect body1="arm" body2="ball" anchor=".3 0 0" solref="0.05 1"/></equality>
<sensor><jointlimitfrc joint="hinge"/></sensor>
</mujoco>"""


def test_rows_after_equalities_keep_their_offsets() -> None:
    m = mujoco.MjModel.from_xml_string(MIXED)
    d = mujoco.MjData(m)
    d.qpos[m.jnt_qposadr[0]] = np.deg2rad(10.2)  # past the upper limit
    d.qvel[:] = 0.3 * np.random.default_rng(0).normal(size=m.nv)
    d.qvel[m.jnt_dofadr[0]] = 3.0  # into the limit
    mujoco.mj_forward(m, d)
    sys = bp.from_mjmodel(m)
    s = jax.jit(bp.init)(sys, jnp.asarray(d.qpos, jnp.float32), jnp.asarray(d.qvel, jnp.float32))
    lay = constraint.layout(sys)
    assert (lay.neq, lay.nfloss, lay.nlimit, d.ne, d.nf, d.nl) == (3, 1, 1, 3, 1, 1)
    assert d.ncon == 1
    n = lay.contact_start
    active = np.asarray(s.contact.active)
    ours = np.concatenate([np.asarray(s.efc_force)[:n],
                           np.asarray(s.efc_force)[n:][np.repeat(active, 4)]])
    scale = np.max(np.abs(d.efc_force))
    np.testing.assert_allclose(ours, d.efc_force, atol=1e-4 * scale)
    want = np.zeros(6)
    mujoco.mj_contactForce(m, d, 0, want)
    np.testing.assert_allclose(np.asarray(s.contact.force)[active][0], want, atol=1e-4 * scale)
    np.testing.assert_allclose(np.asarray(s.sensordata), d.sensordata, atol=1e-4 * scale)
    assert abs(d.sensordata[0]) > 0


def test_disabled_equalities_have_no_rows() -> None:
    flag = '<option timestep="0.002"><flag equality="disable"/></option>'
    xml = SCENE.replace('<option timestep="0.002"/>', flag)
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    sys = bp.from_mjmodel(m)
    assert d.nefc == constraint.layout(sys).nefc == 0


def test_gradient_through_satisfied_connect_is_finite() -> None:
    """At qpos0 the connect's violation is exactly zero: the impedance's norm must not give NaN."""
    xml = """<mujoco><worldbody>
    <body name="b1" pos="0 0 1"><joint axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".02"/></body>
    <body name="b2" pos=".3 0 1"><joint axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 -.3" size=".02"/></body>
    </worldbody><equality><connect body1="b1" body2="b2" anchor=".3 0 0"/></equality></mujoco>"""
    sys = bp.load_mjcf(xml)
    s0 = bp.init(sys)

    def final(qd: jax.Array) -> jax.Array:
        s = bp.step(sys, s0.replace(qd=qd), jnp.zeros(0, jnp.float32))
        return jnp.sum(s.q)

    g = np.asarray(jax.jit(jax.grad(final))(jnp.zeros(sys.nv, jnp.float32)))
    assert np.all(np.isfinite(g)) and np.any(g != 0)


def test_dm_control_quadruped_tendon_couplings_match_mujoco() -> None:
    """dm_control's quadruped (4 tendon equalities couple each leg's joints) with zero control, its
    actuators and sensors removed, geoms colliding only with the floor (the pairs we collide)."""
    found = importlib.util.find_spec("dm_control")  # not imported: its renderer would bind PyOpenGL
    assert found is not None and found.origin is not None, "dm_control (a test oracle) is not installed"
    spec = mujoco.MjSpec.from_file(os.path.join(os.path.dirname(found.origin), "suite", "quadruped.xml"))
    for element in [*spec.actuators, *spec.sensors]:
        spec.delete(element)
    for g in list(spec.geoms):
        if g.type in (mujoco.mjtGeom.mjGEOM_HFIELD, mujoco.mjtGeom.mjGEOM_CYLINDER):
            spec.delete(g)
        else:
            floor = g.type == mujoco.mjtGeom.mjGEOM_PLANE
            g.contype, g.conaffinity = (0, 1) if floor else (1, 0)
    m = spec.compile()
    assert m.neq == 4 and set(m.eq_type.tolist()) == {int(mujoco.mjtEq.mjEQ_TENDON)}
    sys = bp.from_mjmodel(m)
    d = mujoco.MjData(m)
    d.qvel[:] = 0.3 * np.random.default_rng(0).normal(size=m.nv)
    s = bp.init(sys, jnp.asarray(d.qpos, jnp.float32), jnp.asarray(d.qvel, jnp.float32))
    step = jax.jit(lambda s: bp.step(sys, s, jnp.zeros(0, jnp.float32)))
    for _ in range(50):
        mujoco.mj_step(m, d)
        s = step(s)
    assert d.ne == 4
    np.testing.assert_allclose(np.asarray(s.q, np.float64), d.qpos, atol=1e-5)
    np.testing.assert_allclose(np.asarray(s.qd, np.float64), d.qvel, atol=1e-3)
