"""Friction cones vs MuJoCo C: elliptic rows and forces, and condim 3/4/6 motion for both cones."""

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
from brax_physics._src.collision.contact import collide

# One sphere per condim resting on the floor with a random velocity (some cones in each zone), one
# through an explicit <pair> with solreffriction, one lifted into the margin band; impratio 3.
_ROWS = """<mujoco><option cone="elliptic" impratio="3"/><worldbody>
<geom name="floor" type="plane" size="0 0 1"/>
<body pos="0 0 0.099"><freejoint/><geom size=".1" condim="3"/></body>
<body pos="1 0 0.098"><freejoint/><geom size=".1" condim="4" friction="1.2 .02 .003"/></body>
<body pos="2 0 0.097"><freejoint/><geom size=".1" condim="6" friction="1.5 .03 .004"/></body>
<body pos="3 0 0.099"><freejoint/><geom size=".1" condim="1" priority="1"/></body>
<body pos="4 0 0.0995"><freejoint/><geom name="p" size=".1" contype="0" conaffinity="0"/></body>
<body pos="5 0 0.1005"><freejoint/><geom size=".1" condim="6" margin=".01"/></body>
</worldbody><contact><pair geom1="floor" geom2="p" condim="4" friction=".6 .9 .01 .001 .001"
solref=".03 .8" solreffriction=".05 .3"/></contact></mujoco>"""


@jax.jit
def _rows_jit(sys: bp.System, q: jax.Array, qd: jax.Array) -> tuple[constraint.Rows, jax.Array, jax.Array]:
    fr = kinematics.kinematics(sys, q)
    sub = com.subtree_com(sys, fr.xipos)
    cdof = com.cdof(sys, fr, sub)
    con = collide(sys, fr.geom_xpos, fr.geom_xmat)
    ten_length, ten_J = tendon.tendon(sys, q, fr, sub, cdof)
    rows = constraint.make_rows(sys, q, cdof, sub, con, ten_length, ten_J)
    return rows, constraint.reference_acceleration(rows, qd), con.geom2


@functools.cache
def _rows_case() -> tuple[Any, Any, bp.System, bp.State, tuple[constraint.Rows, jax.Array, jax.Array]]:
    m = mujoco.MjModel.from_xml_string(_ROWS)
    d = mujoco.MjData(m)
    d.qvel[:] = np.random.default_rng(0).normal(size=m.nv)
    mujoco.mj_forward(m, d)
    sys = bp.from_mjmodel(m)
    q, qd = jnp.asarray(d.qpos, jnp.float32), jnp.asarray(d.qvel, jnp.float32)
    return m, d, sys, jax.jit(bp.init)(sys, q, qd), _rows_jit(sys, q, qd)


def _mujoco_order(sys: bp.System, d: Any, geom2: jax.Array) -> np.ndarray:
    """Our row of every MuJoCo efc row (contacts matched by geom2: one contact per geom here)."""
    lay = constraint.layout(sys)
    first = lay.nefc - lay.row_con.size
    order: list[int] = []
    for i in range(d.ncon):
        slot = int(np.nonzero(np.asarray(geom2) == d.contact[i].geom[1])[0][0])
        order += list(first + np.nonzero(lay.row_con == slot)[0])
    return np.asarray(order)


def test_elliptic_rows_match_mujoco() -> None:
    """efc_type, efc_J, efc_R, efc_D, efc_aref and the regularized cone coefficient (contact.mu)."""
    m, d, sys, _, (rows, aref, geom2) = _rows_case()
    idx = _mujoco_order(sys, d, geom2)
    dims = [int(c.dim) for c in d.contact]
    assert sorted(dims) == [1, 3, 4, 4, 6, 6] and len(idx) == d.nefc == sum(dims)
    types = np.asarray(d.efc_type)
    want = [mujoco.mjtConstraint.mjCNSTR_CONTACT_FRICTIONLESS if n == 1
            else mujoco.mjtConstraint.mjCNSTR_CONTACT_ELLIPTIC for n in dims for _ in range(n)]
    np.testing.assert_array_equal(types, want)
    act = np.asarray(rows.active)
    assert act.sum() == d.nefc and act[idx].all()
    np.testing.assert_allclose(np.asarray(rows.J)[idx], d.efc_J.reshape(d.nefc, m.nv), atol=2e-5)
    np.testing.assert_allclose(np.asarray(rows.R)[idx], d.efc_R, rtol=2e-4)
    np.testing.assert_allclose(np.asarray(rows.D)[idx], d.efc_D, rtol=2e-4)
    atol = 1e-4 * np.max(np.abs(d.efc_aref))
    np.testing.assert_allclose(np.asarray(aref)[idx], d.efc_aref, rtol=2e-4, atol=atol)
    assert rows.mu is not None
    normals = np.cumsum([0, *dims[:-1]])
    cone = np.asarray(dims) > 1
    mu_mj = np.asarray([c.mu for c in d.contact])[cone]
    np.testing.assert_allclose(np.asarray(rows.mu)[idx[normals[cone]]], mu_mj, rtol=1e-5)
    # the pair's friction rows take its solreffriction: damping 2/(dmax·0.05), not the solref's
    p = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "p")
    pair = next(i for i in range(d.ncon) if d.contact[i].geom[1] == p)
    assert d.contact[pair].solreffriction[0] == pytest.approx(0.05)


def test_elliptic_forces_match_mujoco() -> None:
    """efc_force (every zone of the cone among the contacts), qacc and contact-frame forces."""
    m, d, sys, s, (_, _, geom2) = _rows_case()
    idx = _mujoco_order(sys, d, geom2)
    scale = np.max(np.abs(d.efc_force))
    np.testing.assert_allclose(np.asarray(s.efc_force)[idx], d.efc_force, atol=1e-4 * scale)
    full_m = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, full_m)
    np.testing.assert_allclose(full_m @ np.asarray(s.qacc, np.float64), full_m @ d.qacc, atol=1e-4 * scale)
    for i in range(d.ncon):
        want = np.zeros(6)
        mujoco.mj_contactForce(m, d, i, want)
        slot = int(np.nonzero(np.asarray(geom2) == d.contact[i].geom[1])[0][0])
        np.testing.assert_allclose(np.asarray(s.contact.force[slot]), want, atol=1e-4 * scale)
    # the state has cones in all three zones (separating, sliding, sticking)
    f = [np.asarray(d.efc_force[d.contact[i].efc_address:][: d.contact[i].dim]) for i in range(d.ncon)]
    fric = [x for x in f if len(x) > 1]
    assert any(np.all(x == 0) for x in fric)
    mu = {i: d.contact[i].friction for i in range(d.ncon)}
    ratio = [np.linalg.norm(x[1:] / mu[i][: len(x) - 1]) / x[0]
             for i, x in enumerate(f) if len(x) > 1 and x[0] > 0]
    assert any(abs(r - 1) < 1e-6 for r in ratio) and any(r < 1 - 1e-3 for r in ratio), ratio


# Motion: boxes on a 20° incline (their own plane, via contype/conaffinity): friction 0.5 holds
# (tan 20° = 0.36), 0.25 slides (the incline's own friction is lower: pairs take the maximum), for
# condim 3, 4 and 6; a sphere rolling on the flat floor against rolling friction (condim 6) and one
# spinning about the normal against torsional friction (condim 4).
_MOTION = """<mujoco><option cone="{cone}" timestep="0.002"/><worldbody>
<geom type="plane" size="0 0 1" contype="0" conaffinity="1"/>
<geom type="plane" size="0 0 1" pos="0 5 0" euler="0 20 0" contype="0" conaffinity="2"
 friction=".1 .001 .0001"/>
{boxes}
<body pos="0 -2 0.1"><freejoint/>
 <geom size=".1" condim="6" friction="1 .01 .02" contype="1" conaffinity="0"/></body>
<body pos="1 -2 0.1"><freejoint/>
 <geom size=".1" condim="4" friction="1 .05 .001" contype="1" conaffinity="0"/></body>
</worldbody></mujoco>"""
_BOX = ('<body pos="{x} {y} {z}" euler="0 20 0"><freejoint/><geom type="box" size=".1 .08 .05" '
        'condim="{dim}" friction="{mu} .02 .002" contype="2" conaffinity="0"/></body>')
_CONDIMS = (3, 4, 6)
_FRICTIONS = (0.5, 0.25)
_SECONDS = 0.5


def _motion_xml(cone: str) -> str:
    n = np.array([np.sin(np.deg2rad(20)), 0.0, np.cos(np.deg2rad(20))])
    boxes = []
    for i, dim in enumerate(_CONDIMS):
        for j, mu in enumerate(_FRICTIONS):
            along = np.array([np.cos(np.deg2rad(20)), 0.0, -np.sin(np.deg2rad(20))]) * (0.5 * i - 0.5)
            p = along + np.array([0.0, 5.0 + 0.5 * j, 0.0]) + n * 0.0495
            boxes.append(_BOX.format(x=p[0], y=p[1], z=p[2], dim=dim, mu=mu))
    return _MOTION.format(cone=cone, boxes="\n".join(boxes))


_NBOX = len(_CONDIMS) * len(_FRICTIONS)
ROLL, SPIN = _NBOX, _NBOX + 1  # free bodies after the boxes


def _initial(m: Any) -> np.ndarray:
    qd = np.zeros(m.nv)
    qd[6 * ROLL] = 1.0  # rolling along +x
    qd[6 * ROLL + 4] = 10.0  # ω_y = v/r
    qd[6 * SPIN + 5] = 20.0  # spinning about z
    return qd


def _rollout(sys: bp.System, state: bp.State, n: int) -> tuple[jax.Array, jax.Array]:
    def body(s: bp.State, _: None) -> tuple[bp.State, tuple[jax.Array, jax.Array]]:
        s = bp.step(sys, s, jnp.zeros(0, jnp.float32))
        return s, (s.q, s.qd)

    return jax.lax.scan(body, state, None, length=n)[1]


rollout_jit = jax.jit(_rollout, static_argnums=2)


def _mujoco(m: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
    d = mujoco.MjData(m)
    d.qvel[:] = _initial(m)
    qs, qds = [], []
    for _ in range(n):
        mujoco.mj_step(m, d)
        qs.append(d.qpos.copy())
        qds.append(d.qvel.copy())
    return np.array(qs), np.array(qds)


@functools.cache
def _motion(cone: str, impratio: float) -> dict[str, np.ndarray]:
    m = mujoco.MjModel.from_xml_string(_motion_xml(cone))
    sys = bp.from_mjmodel(m)  # impratio is a leaf: both impratios share one compiled rollout
    m.opt.impratio = impratio
    sys = sys.replace(opt=sys.opt.replace(impratio=jnp.float32(impratio)))
    n = round(_SECONDS / m.opt.timestep)
    s0 = jax.jit(bp.init)(sys, sys.qpos0, jnp.asarray(_initial(m), jnp.float32))
    q, qd = rollout_jit(sys, s0, n)
    mq, mqd = _mujoco(m, n)
    return {"q": np.asarray(q, np.float64), "qd": np.asarray(qd, np.float64), "mj_q": mq, "mj_qd": mqd}


_RUNS = [("pyramidal", 1.0), ("elliptic", 1.0), ("elliptic", 3.0)]


@pytest.mark.parametrize(("cone", "impratio"), _RUNS)
def test_motion_matches_mujoco(cone: str, impratio: float) -> None:
    """qpos within 1e-3 of MuJoCo over 0.5 s for every body."""
    r = _motion(cone, impratio)
    err = np.abs(r["q"] - r["mj_q"])
    assert err.max() < 1e-3, (np.unravel_index(np.argmax(err), err.shape), err.max())


@pytest.mark.parametrize(("cone", "impratio"), _RUNS)
def test_boxes_hold_or_slide_and_friction_torques_act(cone: str, impratio: float) -> None:
    r = _motion(cone, impratio)
    for q in (r["q"], r["mj_q"]):
        moved = [np.linalg.norm(q[-1, 7 * b : 7 * b + 3] - q[0, 7 * b : 7 * b + 3]) for b in range(_NBOX)]
        hold, slide = moved[0::2], moved[1::2]
        assert max(hold) < 2e-3 and min(slide) > 0.05, moved
    for qd in (r["qd"], r["mj_qd"]):
        assert abs(qd[-1, 6 * SPIN + 5]) < 15.0  # torsional friction slows (or stops) the spin
        assert 0 < qd[-1, 6 * ROLL] < 0.98  # rolling friction slows the roll
