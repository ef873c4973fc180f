"""Constraints and solver vs MuJoCo C: rows (efc_J, R, D, aref), forces, and 2 s trajectories."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import brax_physics as bp
from brax_physics._src import com, constraint, kinematics, tendon
from brax_physics._src import models_testutil as tm
from brax_physics._src.collision.contact import collide

SECONDS = 2.0
# free bodies of CONTACT_SCENE in body order: qpos 7*i, dofs 6*i; then the hinge
BOX, BALL, PILL, SLIDER, HOLD, SLIDE = range(6)
HINGE_Q, HINGE_V = 42, 36
SLIDER_V0 = 2.0
CTRL = 3.0


@functools.cache
def _scene() -> tuple[bp.System, Any]:
    return bp.load_mjcf(tm.CONTACT_SCENE), mujoco.MjModel.from_xml_string(tm.CONTACT_SCENE)


def _initial(m: Any) -> tuple[np.ndarray, np.ndarray]:
    qd = np.zeros(m.nv)
    qd[6 * SLIDER] = SLIDER_V0  # pushed along +x
    return m.qpos0.copy(), qd


def _rollout(sys: bp.System, state: bp.State, act: jax.Array, n: int) -> tuple[bp.State, jax.Array]:
    def body(s: bp.State, _: None) -> tuple[bp.State, jax.Array]:
        s = bp.step(sys, s, act)
        return s, s.q

    return jax.lax.scan(body, state, None, length=n)


init_jit = jax.jit(bp.init)
rollout_jit = jax.jit(_rollout, static_argnums=3)


@pytest.fixture(scope="module")
def trajectories() -> dict[str, np.ndarray]:
    sys, m = _scene()
    n = round(SECONDS / m.opt.timestep)
    q0, qd0 = _initial(m)
    ctrl = np.array([CTRL])
    s0 = init_jit(sys, jnp.asarray(q0, jnp.float32), jnp.asarray(qd0, jnp.float32),
                  jnp.asarray(ctrl, jnp.float32))
    s, qs = rollout_jit(sys, s0, jnp.asarray(ctrl, jnp.float32), n)
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:], d.ctrl[:] = q0, qd0, ctrl
    mq, mqd = [], []
    for _ in range(n):
        mujoco.mj_step(m, d)
        mq.append(d.qpos.copy())
        mqd.append(d.qvel.copy())
    return {"q": np.asarray(qs, np.float64), "qd": np.asarray(s.qd, np.float64),
            "mj_q": np.array(mq), "mj_qd": np.array(mqd)}


def _pos(q: np.ndarray, body: int) -> np.ndarray:
    return q[..., 7 * body : 7 * body + 3]


def _vel(qd: np.ndarray, body: int) -> np.ndarray:
    return qd[..., 6 * body : 6 * body + 6]


@pytest.mark.parametrize("body", [BOX, BALL, PILL])
def test_drop_rests_at_mujoco_height(trajectories: dict[str, np.ndarray], body: int) -> None:
    z, z_mj = _pos(trajectories["q"][-1], body)[2], _pos(trajectories["mj_q"][-1], body)[2]
    assert abs(z - z_mj) < 5e-3, (z, z_mj)
    assert np.max(np.abs(_vel(trajectories["qd"], body))) < 1e-2  # settled
    assert np.max(np.abs(_vel(trajectories["mj_qd"][-1], body))) < 1e-2


def test_pushed_box_stops_at_mujoco_distance(trajectories: dict[str, np.ndarray]) -> None:
    x0 = _pos(trajectories["mj_q"][0], SLIDER)[0]
    dist = _pos(trajectories["q"][-1], SLIDER)[0] - x0
    dist_mj = _pos(trajectories["mj_q"][-1], SLIDER)[0] - x0
    assert dist_mj > 0.1
    assert abs(dist - dist_mj) < 0.05 * dist_mj, (dist, dist_mj)
    assert np.max(np.abs(_vel(trajectories["qd"], SLIDER))) < 1e-2


def test_incline_holds_below_and_slides_above_friction_angle(trajectories: dict[str, np.ndarray]) -> None:
    q, mq = trajectories["q"], trajectories["mj_q"]
    hold = np.linalg.norm(_pos(q[-1], HOLD) - _pos(q[0], HOLD))
    assert hold < 1e-2, hold  # tan 20° < 0.5
    slide = np.linalg.norm(_pos(q[-1], SLIDE) - _pos(q[0], SLIDE))
    slide_mj = np.linalg.norm(_pos(mq[-1], SLIDE) - _pos(mq[0], SLIDE))
    assert slide > 1.0  # tan 35° > 0.5
    assert abs(slide - slide_mj) < 0.05 * slide_mj, (slide, slide_mj)


def test_joint_limit_holds_a_motor_at_mujoco_penetration(trajectories: dict[str, np.ndarray]) -> None:
    _, m = _scene()
    upper = m.jnt_range[0, 1]
    angle, angle_mj = trajectories["q"][-1, HINGE_Q], trajectories["mj_q"][-1, HINGE_Q]
    assert angle_mj > upper  # the soft limit yields a little under the motor
    assert abs(angle - angle_mj) <= 0.01
    assert abs(trajectories["qd"][HINGE_V]) < 1e-3


def _mujoco_at(m: Any, seconds: float) -> Any:
    d = mujoco.MjData(m)
    q0, qd0 = _initial(m)
    d.qpos[:], d.qvel[:], d.ctrl[:] = q0, qd0, [CTRL]
    for _ in range(round(seconds / m.opt.timestep)):
        mujoco.mj_step(m, d)
    mujoco.mj_forward(m, d)
    return d


def test_single_step_forces_match_mujoco() -> None:
    """At a MuJoCo state with resting and sliding contacts, a limit and friction loss (iterations=100)."""
    sys, m = _scene()
    d = _mujoco_at(m, 0.5)
    s = init_jit(sys, jnp.asarray(d.qpos, jnp.float32), jnp.asarray(d.qvel, jnp.float32),
                 jnp.asarray(d.ctrl, jnp.float32))
    full_m = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, full_m)
    scale = np.max(np.abs(d.qfrc_constraint))
    np.testing.assert_allclose(np.asarray(s.qfrc_constraint), d.qfrc_constraint, atol=2e-3 * scale)
    np.testing.assert_allclose(full_m @ np.asarray(s.qacc, np.float64), full_m @ d.qacc, atol=2e-3 * scale)
    # friction loss and limit rows come first in both
    np.testing.assert_allclose(np.asarray(s.efc_force[:2]), d.efc_force[:2], rtol=1e-3, atol=1e-4)
    # contacts: same set (matched by position), same contact-frame forces
    active = np.nonzero(np.asarray(s.contact.active))[0]
    assert len(active) == d.ncon
    for i in range(d.ncon):
        c = d.contact[i]
        want = np.zeros(6)
        mujoco.mj_contactForce(m, d, i, want)
        j = active[np.argmin(np.linalg.norm(np.asarray(s.contact.pos)[active] - c.pos, axis=1))]
        np.testing.assert_allclose(np.asarray(s.contact.force[j]), want, atol=2e-3 * max(abs(want[0]), 1.0))


_BALL_ON_PLANE = """<mujoco><option timestep="0.004"/><worldbody><geom type="plane" size="0 0 1"/>
<body pos="0 0 0.099"><freejoint/><geom size=".1"/></body></worldbody></mujoco>"""


def test_grad_through_contacts_is_finite() -> None:
    sys = bp.load_mjcf(_BALL_ON_PLANE)  # small model: the gradient of a scan is costly to compile
    act = jnp.zeros(0, jnp.float32)
    s0 = init_jit(sys, sys.qpos0, jnp.zeros(6, jnp.float32), act)  # step reads only q and qd's stages

    def final_pose(qd: jax.Array) -> jax.Array:
        s, _ = _rollout(sys, s0.replace(qd=qd), act, 10)
        return s.q[0] + s.q[2]

    qd = jnp.asarray([0.5, 0.0, -0.3, 0.0, 0.2, 0.0], jnp.float32)  # sliding, pressed into the floor
    g = np.asarray(jax.jit(jax.grad(final_pose))(qd))
    assert np.all(np.isfinite(g))
    assert g[0] > 0  # pushing harder along x ends farther along x


# Contact-parameter cases (MuJoCo documentation, Computation: Constraint model, Contact; Constraint
# solver, Parameters): one sphere per case on a shared floor (each with its own contact parameters),
# the margin/impratio case, and a hinge past either limit with friction loss.
_SPHERES = """<mujoco><option {opt}/><worldbody><geom type='plane' size='0 0 1'/>
<body pos='0 0 {z}'><freejoint/><geom size='.1' {sg}/></body>{more}</worldbody></mujoco>"""
_CASES = [  # (geom attributes, height)
    ("", 0.099),
    ("condim='1'", 0.099),
    ("condim='4'", 0.099),
    ("condim='6' friction='.8 .02 .003'", 0.099),
    ("solref='-2000 -30' solimp='.2 .8 .01 .3 3'", 0.096),  # direct solref, x < mid
    ("solref='.001 .5' solimp='.2 .8 .01 .3 3'", 0.092),  # timeconst < 2h (refsafe), x > mid
    ("solimp='.2 .8 .01 .3 1'", 0.095),  # power 1
    ("priority='1' solimp='.2 .8 0 .3 2'", 0.097),  # zero width: flat, mean of dmin and dmax
]
_MORE = "".join(f"<body pos='{i} 0 {z}'><freejoint/><geom size='.1' {sg}/></body>"
                for i, (sg, z) in enumerate(_CASES) if i)
_MANY = _SPHERES.format(opt="", z=_CASES[0][1], sg=_CASES[0][0], more=_MORE)
_HINGE = """<mujoco><worldbody><body><joint type='hinge' axis='0 1 0' range='-30 45' margin='0.01'
 solreflimit='0.05 0.8' solimplimit='0.5 0.99 0.02 0.4 2' frictionloss='0.3'
 solreffriction='0.03 1' solimpfriction='0.7 0.9 0.001 0.5 2'/>
<geom type='capsule' fromto='0 0 0 .3 0 0' size='.03'/></body></worldbody></mujoco>"""
# Limits ordered by joint id whatever the type: hinge, ball (with margin and its own solref/solimp),
# slide, then a second ball whose quaternion has w < 0 (the rotation is taken the short way round).
_BALLS = """<mujoco><option><flag contact='disable'/></option><worldbody>
<body><joint type='hinge' axis='0 1 0' range='-30 45'/><geom type='capsule' fromto='0 0 0 .3 0 0' size='.03'/>
  <body pos='.3 0 0'><joint type='ball' range='0 40' margin='0.02' solreflimit='0.03 0.9'
    solimplimit='0.8 0.95 0.01 0.5 2'/><geom type='capsule' fromto='0 0 0 .2 0 0' size='.03'/>
    <body pos='.2 0 0'><joint type='slide' axis='1 0 0' range='-0.1 0.1'/><geom size='.04'/></body>
  </body>
</body>
<body pos='1 0 0'><joint type='ball' range='0 60'/>
  <geom type='capsule' fromto='0 0 0 0 .1 -.3' size='.03'/></body>
</worldbody></mujoco>"""


def _axis_angle(axis: tuple[float, float, float], degrees: float) -> list[float]:
    a = np.asarray(axis) / np.linalg.norm(axis)
    h = np.deg2rad(degrees) / 2
    return [np.cos(h), *(np.sin(h) * a)]


_BALL_QPOS = [np.deg2rad(46), *_axis_angle((1, 2, -0.5), 39.5), 0.11,
              *(-np.asarray(_axis_angle((-0.3, 1, 0.2), 61)))]
_ROW_CASES = {
    "spheres": (_MANY, None),
    "margin_impratio": (
        _SPHERES.format(opt='impratio="3"', sg='friction=".7 .01 .001" margin=".01"', z=0.1005, more=""), None
    ),
    "limit_upper": (_HINGE, [np.deg2rad(45.5)]),
    "limit_lower": (_HINGE, [np.deg2rad(-30.3)]),
    "limit_ball": (_BALLS, _BALL_QPOS),
    # a sphere on a static box (MuJoCo orders a pair's geoms by type, so the box on the body
    # without dofs is the contact's second geom); a sphere resting on another: both bodies move
    "static_second_body": ("""<mujoco><worldbody><body pos='0 0 .099'><freejoint/><geom size='.1'/></body>
<body><geom type='box' size='1 1 .1' pos='0 0 -.1'/></body></worldbody></mujoco>""", None),
    "stacked": ("""<mujoco><worldbody><geom type='plane' size='0 0 1'/>
<body pos='0 0 .099'><freejoint/><geom size='.1'/></body>
<body pos='.02 0 .29'><freejoint/><geom size='.1' condim='6'/></body></worldbody></mujoco>""", None),
    # a cone narrower than its margin: the row is active at zero rotation (axis: MuJoCo's fallback x)
    "limit_ball_at_rest": (_BALLS.replace("range='0 60'", "range='0 1' margin='0.05'"),
                           [0.0, 1, 0, 0, 0, 0.0, 1, 0, 0, 0]),
}


@jax.jit
def _rows_jit(sys: bp.System, q: jax.Array,
              qd: jax.Array) -> tuple[constraint.Rows, jax.Array, tuple[jax.Array, jax.Array]]:
    fr = kinematics.kinematics(sys, q)
    sub = com.subtree_com(sys, fr.xipos)
    cdof = com.cdof(sys, fr, sub)
    con = collide(sys, fr.geom_xpos, fr.geom_xmat)
    ten_length, ten_J = tendon.tendon(sys, q, fr, sub, cdof)
    rows = constraint.make_rows(sys, q, cdof, sub, con, ten_length, ten_J)
    return rows, constraint.reference_acceleration(rows, qd), (con.geom1, con.geom2)


@pytest.mark.parametrize("case", sorted(_ROW_CASES))
def test_rows_match_mujoco(case: str) -> None:
    """efc_J, efc_R, efc_D, efc_aref of every MuJoCo row vs ours (matched by contact geom)."""
    xml, qpos = _ROW_CASES[case]
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    if qpos is not None:
        d.qpos[:] = qpos
    d.qvel[:] = np.random.default_rng(0).normal(size=m.nv)
    mujoco.mj_forward(m, d)
    sys = bp.from_mjmodel(m)
    rows, aref, geoms = _rows_jit(sys, jnp.asarray(d.qpos, jnp.float32), jnp.asarray(d.qvel, jnp.float32))
    lay = constraint.layout(sys)
    first = lay.contact_start
    order = list(range(first))  # ours for MuJoCo's rows: friction loss and limits in the same order
    act = np.asarray(rows.active)
    order = [i for i in order if act[i]]
    for i in range(d.ncon):
        # a contact slot is a geom pair: one geom alone can sit in several slots
        pair = (np.asarray(geoms[0]) == d.contact[i].geom[0]) & (np.asarray(geoms[1]) == d.contact[i].geom[1])
        slot = int(np.nonzero(pair)[0][0])
        order += list(first + np.nonzero(lay.row_con == slot)[0])
    assert act.sum() == d.nefc == len(order)
    idx = np.asarray(order)
    np.testing.assert_allclose(np.asarray(rows.J)[idx], d.efc_J.reshape(d.nefc, m.nv), atol=2e-5)
    assert not np.any((np.asarray(rows.J) != 0) & ~constraint.row_dofs(sys))  # the static support holds
    np.testing.assert_allclose(np.asarray(rows.R)[idx], d.efc_R, rtol=2e-4)
    np.testing.assert_allclose(np.asarray(rows.D)[idx], d.efc_D, rtol=2e-4)
    atol = 1e-3 * np.max(np.abs(d.efc_aref))
    np.testing.assert_allclose(np.asarray(aref)[idx], d.efc_aref, rtol=2e-3, atol=atol)
    assert np.all(np.asarray(rows.D)[~act] == 0)


# A pendulum on a ball joint swings into its cone limit; limit sensors read its row.
_CONE = """<mujoco><option timestep='0.004'/><worldbody><body pos='0 0 1'>
<joint name='cone' type='ball' range='0 25' margin='0.01'/>
<geom type='capsule' fromto='0 0 0 .1 .05 -.3' size='.03'/></body></worldbody>
<sensor><jointlimitpos joint='cone'/><jointlimitvel joint='cone'/><jointlimitfrc joint='cone'/></sensor>
</mujoco>"""


def test_ball_limit_trajectory_and_sensors_match_mujoco() -> None:
    m = mujoco.MjModel.from_xml_string(_CONE)
    sys = bp.from_mjmodel(m)
    d = mujoco.MjData(m)
    d.qpos[:] = _axis_angle((1, 0.3, 0), 20)
    d.qvel[:] = (3.0, -1.0, 0.5)
    q0, qd0 = jnp.asarray(d.qpos, jnp.float32), jnp.asarray(d.qvel, jnp.float32)
    qs, sens = [], []
    for _ in range(60):
        mujoco.mj_step(m, d)
        qs.append(d.qpos.copy())
        sens.append(d.sensordata.copy())
    sens_mj = np.stack(sens)
    assert np.sum(sens_mj[:, 2] > 0) > 10  # the limit holds it for a while

    def body(s: bp.State, _: None) -> tuple[bp.State, tuple[jax.Array, jax.Array]]:
        s = bp.step(sys, s, jnp.zeros(0))
        return s, (s.q, s.sensordata)

    q, data = jax.jit(lambda s: jax.lax.scan(body, s, None, length=60)[1])(init_jit(sys, q0, qd0))
    got = np.asarray(q, np.float64)
    got *= np.sign(got[:, :1] * np.stack(qs)[:, :1])
    np.testing.assert_allclose(got, np.stack(qs), atol=2e-4)
    scale = np.max(np.abs(sens_mj), axis=0)
    np.testing.assert_allclose(np.asarray(data), sens_mj, atol=1e-3 * scale.max(), rtol=0)
