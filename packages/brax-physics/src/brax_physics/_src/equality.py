"""Equality constraint rows (MuJoCo mj_instantiateEquality, with the equality cases of mj_diagApprox,
mj_makeImpedance and mj_referenceConstraint's mj_Jdotv).

Kinds and rows, in MuJoCo's order (by equality id, each equality's rows together):
- connect (3 rows): the anchor points of body1 and body2 coincide, `efc_pos = p1 − p2`; anchors are
  `eq_data[0:3]` in body1 and `eq_data[3:6]` in body2, or the two sites' positions.
- weld (6 rows): the position rows of connect (anchors: `eq_data[3:6]` in body1, `eq_data[0:3]` in
  body2, or the sites), then the orientation error `torquescale · vec(q2⁻¹ ⊗ q1 ⊗ relpose)`
  (`relpose = eq_data[6:10]`; with sites, q1 and q2 are the sites' orientations and no relpose).
- joint (1 row): `q1 − q1ref − poly(q2 − q2ref)` with `poly(x) = Σ_k eq_data[k] x^k` (k = 0..4), or
  `q1 − q1ref − eq_data[0]` without joint2 (ref = qpos0).
- tendon (1 row): as joint, on tendon lengths (`ten_length`, ref = `tendon_length0`, J from `ten_J`).
Rows are bilateral (the solver's cost is ½ D jar² on both sides). A connect's or weld's rows share one
impedance, read at the norm of its `efc_pos`; A (mj_diagApprox) is the bodies' translational
invweight0 for position rows and rotational for orientation rows, the dofs' (tendons') invweight0 for
joint (tendon) rows.
The reference acceleration of connect and weld rows also subtracts J̇·qd (`jdotv`), as MuJoCo 4 does.
Every equality always has its rows (static shapes); `State.eq_active` switches them on and off.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Final, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from brax_math import cross, motion_cross, quat_conj, quat_mul, rotate, safe_norm
from mujoco import mjtDisableBit, mjtEq, mjtJoint, mjtObj

from brax_physics._src import kinematics
from brax_physics._src.com import mm
from brax_physics._src.structure import structure
from brax_physics._src.system import System

SUPPORTED: Final = (int(mjtEq.mjEQ_CONNECT), int(mjtEq.mjEQ_WELD), int(mjtEq.mjEQ_JOINT),
                    int(mjtEq.mjEQ_TENDON))
"""`mujoco.mjtEq` codes of the equality kinds built here (the loader refuses the others)."""

_NROW: Final = {int(mjtEq.mjEQ_CONNECT): 3, int(mjtEq.mjEQ_WELD): 6, int(mjtEq.mjEQ_JOINT): 1,
         int(mjtEq.mjEQ_TENDON): 1}


@dataclasses.dataclass(frozen=True, eq=False)
class Layout:
    """Static equality row layout (numpy, trace-time only)."""

    connect: np.ndarray
    """(nconnect,) equality ids of the connect constraints."""
    weld: np.ndarray
    """(nweld,) equality ids of the weld constraints."""
    joint: np.ndarray
    """(njoint,) equality ids of the joint constraints."""
    tendon: np.ndarray
    """(ntendon_eq,) equality ids of the tendon constraints."""
    order: np.ndarray
    """(nrow,) for every row in MuJoCo's order, its index in the kind-blocked rows (connect rows,
    weld rows, joint rows, tendon rows, each equality's rows together)."""
    row_eq: np.ndarray
    """(nrow,) equality id of every row, in MuJoCo's order."""

    @property
    def nrow(self) -> int:
        """Number of equality rows."""
        return int(self.row_eq.shape[0])


def layout(sys: System) -> Layout:
    """The (cached) static equality row layout of `sys` (no rows when equalities are disabled)."""
    return _layout(sys.eq_type, sys.opt.disableflags)


@functools.lru_cache(maxsize=64)
def _layout(eq_type: tuple[int, ...], disableflags: int) -> Layout:
    off = disableflags & (mjtDisableBit.mjDSBL_CONSTRAINT | mjtDisableBit.mjDSBL_EQUALITY)
    types = np.zeros(0, np.int32) if off else np.asarray(eq_type, np.int32).reshape(-1)
    kinds = [np.flatnonzero(types == t).astype(np.int32) for t in SUPPORTED]
    blocked: dict[tuple[int, int], int] = {}
    for ids in kinds:
        for i in ids:
            for k in range(_NROW[int(types[i])]):
                blocked[(int(i), k)] = len(blocked)
    order = [blocked[(i, k)] for i in range(types.size) if int(types[i]) in _NROW
             for k in range(_NROW[int(types[i])])]
    row_eq = [i for i in range(types.size) if int(types[i]) in _NROW for _ in range(_NROW[int(types[i])])]
    return Layout(connect=kinds[0], weld=kinds[1], joint=kinds[2], tendon=kinds[3],
                  order=np.asarray(order, np.int32),
                  row_eq=np.asarray(row_eq, np.int32))


class Rows(NamedTuple):
    """Equality rows at one position, in MuJoCo's order (nrow each; J is (nrow, nv))."""

    J: jax.Array
    """(nrow, nv) Jacobian (MuJoCo efc_J)."""
    pos: jax.Array
    """(nrow,) constraint violation (MuJoCo efc_pos)."""
    imp_pos: jax.Array
    """(nrow,) the violation the impedance reads: the norm of a connect's or weld's rows."""
    A: jax.Array
    """(nrow,) diagonal inverse-inertia approximation (mj_diagApprox)."""
    solref: jax.Array
    """(nrow, 2) the equality's solref."""
    solimp: jax.Array
    """(nrow, 5) the equality's solimp."""
    active: jax.Array
    """(nrow,) bool: the equality is active (`State.eq_active`)."""


class _Anchors(NamedTuple):
    body1: np.ndarray  # (n,) static
    body2: np.ndarray
    p1: jax.Array  # (n, 3) world anchor points
    p2: jax.Array
    q1: jax.Array  # (n, 4) orientation of object 1 (body: xquat ⊗ relpose; site: xquat ⊗ site_quat)
    q2: jax.Array  # (n, 4) orientation of object 2 (body: xquat; site: xquat ⊗ site_quat)
    site: np.ndarray  # (n,) static bool: site semantics


def _anchors(sys: System, xpos: jax.Array, xquat: jax.Array, xipos: jax.Array, ximat: jax.Array,
             eqs: np.ndarray, weld: bool) -> _Anchors:
    """Anchor points and orientations of connect (`weld` False) or weld constraints `eqs`
    (MuJoCo mj_equalityAnchors)."""
    o1 = np.asarray(sys.eq_obj1id, np.int32)[eqs]
    o2 = np.asarray(sys.eq_obj2id, np.int32)[eqs]
    site = np.asarray(sys.eq_objtype, np.int32)[eqs] == mjtObj.mjOBJ_SITE
    site_body = np.asarray(sys.site_bodyid, np.int32).reshape(-1)
    b1 = np.where(site, site_body[np.where(site, o1, 0)] if site_body.size else 0, o1).astype(np.int32)
    b2 = np.where(site, site_body[np.where(site, o2, 0)] if site_body.size else 0, o2).astype(np.int32)
    data = sys.eq_data[eqs]
    # weld anchors: relpose position on body1, anchor on body2 (connect: anchor on each)
    off1, off2 = (data[:, 3:6], data[:, 0:3]) if weld else (data[:, 0:3], data[:, 3:6])
    p1 = xpos[b1] + rotate(off1, xquat[b1])
    p2 = xpos[b2] + rotate(off2, xquat[b2])
    q1 = quat_mul(xquat[b1], data[:, 6:10])
    q2 = xquat[b2]
    if site.any():
        s1, s2 = np.where(site, o1, 0), np.where(site, o2, 0)
        sp1, _ = kinematics.site_frames_at(sys, xpos, xquat, xipos, ximat, s1)
        sp2, _ = kinematics.site_frames_at(sys, xpos, xquat, xipos, ximat, s2)
        col = jnp.asarray(site)[:, None]
        p1, p2 = jnp.where(col, sp1, p1), jnp.where(col, sp2, p2)
        q1 = jnp.where(col, quat_mul(xquat[b1], sys.site_quat[s1]), q1)
        q2 = jnp.where(col, quat_mul(xquat[b2], sys.site_quat[s2]), q2)
    return _Anchors(b1, b2, p1, p2, q1, q2, site)


def _point_jacobians(sys: System, cdof: jax.Array, subtree_com: jax.Array, body: np.ndarray,
                     point: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(n, 3, nv) translational and rotational Jacobians of world points `point` (n, 3) on `body` (mj_jac)."""
    st = structure(sys)
    off = point - subtree_com[st.root[body]]
    mask = jnp.asarray(st.body_dof[body])[:, :, None]  # (n, nv, 1)
    ang = cdof[None, :, :3]
    jacp = (cdof[None, :, 3:] + cross(ang, off[:, None, :])) * mask
    jacr = ang * mask
    return jnp.swapaxes(jacp, 1, 2), jnp.swapaxes(jacr, 1, 2)


def _pure(v: jax.Array) -> jax.Array:
    """(..., 4) the pure quaternion (0, v) of (..., 3) vectors."""
    return jnp.concatenate([jnp.zeros_like(v[..., :1]), v], axis=-1)


def _pair(sys: System, eqs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Objects 1 and 2 of joint/tendon equalities `eqs` and whether object 2 exists (if not, object 1
    stands in for it, so gathers stay in range; `_coupling` ignores it)."""
    o1 = np.asarray(sys.eq_obj1id, np.int32)[eqs]
    o2 = np.asarray(sys.eq_obj2id, np.int32)[eqs]
    has2 = o2 >= 0
    return o1, np.where(has2, o2, o1).astype(np.int32), has2


def _coupling(coef: jax.Array, x1: jax.Array, x2: jax.Array, has2: np.ndarray, J1: jax.Array,
              J2: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(n,) violation x1 − poly(x2) and (n, nv) Jacobian J1 − poly'(x2) J2 of joint/tendon couplings
    (coefficients `coef` (n, 5); without object 2: x1 − coef[0] and J1)."""
    x2 = jnp.where(jnp.asarray(has2), x2, 0.0)
    c0, c1, c2, c3, c4 = (coef[:, k] for k in range(5))  # Horner forms: safe gradients at x2 = 0
    poly = c0 + x2 * (c1 + x2 * (c2 + x2 * (c3 + x2 * c4)))
    deriv = jnp.where(jnp.asarray(has2), c1 + x2 * (2 * c2 + x2 * (3 * c3 + x2 * 4 * c4)), 0.0)
    return x1 - poly, J1 - deriv[:, None] * J2


def rows(sys: System, q: jax.Array, frames: kinematics.Frames, cdof: jax.Array, subtree_com: jax.Array,
         eq_active: jax.Array, ten_length: jax.Array | None = None, ten_J: jax.Array | None = None) -> Rows:
    """Equality rows at positions `q` with the position stage `frames`, `cdof`, `subtree_com` and (for
    tendon equalities) the tendons' `ten_length` (ntendon,) and `ten_J` (ntendon, nv)."""
    lay = layout(sys)
    dtype = cdof.dtype
    nv = sys.nv
    xpos, xquat, xipos, ximat = frames.xpos, frames.xquat, frames.xipos, frames.ximat
    inv = sys.body_invweight0
    Js, poss, imps, As = [], [], [], []

    if lay.connect.size:
        a = _anchors(sys, xpos, xquat, xipos, ximat, lay.connect, weld=False)
        jp1, _ = _point_jacobians(sys, cdof, subtree_com, a.body1, a.p1)
        jp2, _ = _point_jacobians(sys, cdof, subtree_com, a.body2, a.p2)
        pos = a.p1 - a.p2
        Js.append((jp1 - jp2).reshape(-1, nv))
        poss.append(pos.reshape(-1))
        imps.append(jnp.repeat(safe_norm(pos), 3))
        As.append(jnp.repeat(inv[a.body1, 0] + inv[a.body2, 0], 3))

    if lay.weld.size:
        a = _anchors(sys, xpos, xquat, xipos, ximat, lay.weld, weld=True)
        jp1, jr1 = _point_jacobians(sys, cdof, subtree_com, a.body1, a.p1)
        jp2, jr2 = _point_jacobians(sys, cdof, subtree_com, a.body2, a.p2)
        ts = sys.eq_data[lay.weld, 10]
        neg2 = quat_conj(a.q2)
        rot_err = ts[:, None] * quat_mul(neg2, a.q1)[:, 1:]
        # d/dt vec(q2⁻¹ ⊗ q1) = ½ vec(q2⁻¹ ⊗ (ω1 − ω2) ⊗ q1): a linear map of the angular velocities
        basis = _pure(jnp.eye(3, dtype=dtype))  # (3, 4)
        lin = quat_mul(quat_mul(neg2[:, None, :], basis[None]), a.q1[:, None, :])[..., 1:]  # (n, axis, out)
        jrot = 0.5 * ts[:, None, None] * jnp.einsum("nko,nkv->nov", lin, jr1 - jr2,
                                                    precision=jax.lax.Precision.HIGHEST)
        pos = jnp.concatenate([a.p1 - a.p2, rot_err], axis=-1)  # (n, 6)
        Js.append(jnp.concatenate([jp1 - jp2, jrot], axis=1).reshape(-1, nv))
        poss.append(pos.reshape(-1))
        imps.append(jnp.repeat(safe_norm(pos), 6))
        tran = inv[a.body1, 0] + inv[a.body2, 0]
        rot = inv[a.body1, 1] + inv[a.body2, 1]
        As.append(jnp.stack([tran] * 3 + [rot] * 3, axis=-1).reshape(-1))

    if lay.joint.size:
        e = lay.joint
        j1, j2, has2 = _pair(sys, e)
        qadr, dofadr = np.asarray(sys.jnt_qposadr, np.int32), np.asarray(sys.jnt_dofadr, np.int32)
        eye = np.eye(nv, dtype=np.float32)
        pos, J = _coupling(sys.eq_data[e, :5], q[qadr[j1]] - sys.qpos0[qadr[j1]],
                           q[qadr[j2]] - sys.qpos0[qadr[j2]], has2, jnp.asarray(eye[dofadr[j1]], dtype),
                           jnp.asarray(eye[dofadr[j2]], dtype))
        Js.append(J)
        poss.append(pos)
        imps.append(pos)
        w = sys.dof_invweight0
        As.append(w[dofadr[j1]] + jnp.where(jnp.asarray(has2), w[dofadr[j2]], 0.0))

    if lay.tendon.size:
        if ten_length is None or ten_J is None:
            raise ValueError("equality.rows: the model has tendon equalities: pass ten_length and ten_J")
        e = lay.tendon
        t1, t2, has2 = _pair(sys, e)
        length0 = sys.tendon_length0
        pos, J = _coupling(sys.eq_data[e, :5], ten_length[t1] - length0[t1], ten_length[t2] - length0[t2],
                           has2, ten_J[t1], ten_J[t2])
        Js.append(J)
        poss.append(pos)
        imps.append(pos)
        w = sys.tendon_invweight0
        As.append(w[t1] + jnp.where(jnp.asarray(has2), w[t2], 0.0))

    def ordered(xs: list[jax.Array]) -> jax.Array:
        return jnp.concatenate(xs)[lay.order]

    row_eq = lay.row_eq
    return Rows(J=ordered(Js), pos=ordered(poss), imp_pos=ordered(imps), A=ordered(As),
                solref=sys.eq_solref[row_eq], solimp=sys.eq_solimp[row_eq],
                active=jnp.asarray(eq_active)[row_eq].astype(bool))


def _quat_dofs(sys: System) -> np.ndarray:
    """(nv,) bool: rotational dofs of ball and free joints (their axes turn with the body)."""
    out = np.zeros(sys.nv, bool)
    for j, t in enumerate(sys.jnt_type):
        a = sys.jnt_dofadr[j]
        if t == mjtJoint.mjJNT_BALL:
            out[a : a + 3] = True
        elif t == mjtJoint.mjJNT_FREE:
            out[a + 3 : a + 6] = True
    return out


def jdotv(sys: System, frames: kinematics.Frames, cdof: jax.Array, subtree_com: jax.Array, cvel: jax.Array,
          cdof_dot: jax.Array, qd: jax.Array) -> jax.Array:
    """(nrow,) J̇·qd of every equality row (zero on joint and tendon rows), MuJoCo's mj_Jdotv.

    Point Jacobian derivatives are MuJoCo's mj_jacDot (cdof_dot of ball and free rotational dofs taken
    with the body's whole velocity); a weld's orientation rows differentiate ½ q2⁻¹ ⊗ (J1 − J2)qd ⊗ q1.
    """
    lay = layout(sys)
    st = structure(sys)
    dtype = qd.dtype
    xpos, xquat, xipos, ximat = frames.xpos, frames.xquat, frames.xipos, frames.ximat
    quat = _quat_dofs(sys)
    cdd = cdof_dot
    if quat.any():
        whole = motion_cross(cvel[jnp.asarray(st.dof_body)], cdof)
        cdd = jnp.where(jnp.asarray(quat)[:, None], whole, cdof_dot)
    vel_dot = cdd * qd[:, None]  # (nv, 6)
    vel = cdof[:, :3] * qd[:, None]  # (nv, 3)

    def point(body: np.ndarray, p: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(n, 3) translational and rotational J̇·qd of points `p` on `body`."""
        off = p - subtree_com[st.root[body]]
        cv = cvel[body]
        pvel = cv[:, 3:] + cross(cv[:, :3], off)
        mask = jnp.asarray(st.body_dof[body])
        acc = mm(mask, vel_dot)  # (n, 6)
        ang = mm(mask, vel)  # (n, 3)
        return acc[:, 3:] + cross(acc[:, :3], off) + cross(ang, pvel), acc[:, :3]

    parts = []
    for eqs, weld in ((lay.connect, False), (lay.weld, True)):
        if not eqs.size:
            continue
        a = _anchors(sys, xpos, xquat, xipos, ximat, eqs, weld)
        t1, r1 = point(a.body1, a.p1)
        t2, r2 = point(a.body2, a.p2)
        if not weld:
            parts.append((t1 - t2).reshape(-1))
            continue
        ts = sys.eq_data[eqs, 10]
        w1, w2 = cvel[a.body1, :3], cvel[a.body2, :3]
        dw = _pure(w1 - w2)
        neg2 = quat_conj(a.q2)
        # d/dt of q1 = (xquat1 ⊗ relpose or site quat) and of q2⁻¹, with world angular velocities
        q1_dot = 0.5 * quat_mul(_pure(w1), a.q1)
        neg2_dot = quat_conj(0.5 * quat_mul(_pure(w2), a.q2))
        rot = (quat_mul(quat_mul(neg2_dot, dw), a.q1) + quat_mul(quat_mul(neg2, _pure(r1 - r2)), a.q1)
               + quat_mul(quat_mul(neg2, dw), q1_dot))[:, 1:]
        parts.append(jnp.concatenate([t1 - t2, 0.5 * ts[:, None] * rot], axis=-1).reshape(-1))
    if lay.joint.size + lay.tendon.size:
        parts.append(jnp.zeros(lay.joint.size + lay.tendon.size, dtype))
    return jnp.concatenate(parts)[lay.order]


def cfrc_ext(sys: System, xpos: jax.Array, xquat: jax.Array, subtree_com: jax.Array,
             efc_force: jax.Array) -> jax.Array:
    """(nbody, 6) com-based wrenches of the connect and weld forces on their bodies (MuJoCo's
    mj_rnePostConstraint adds them to cfrc_ext; zero for the world and for joint equalities).

    As MuJoCo: a row triple's force acts at each anchor (`eq_data` point or site position in its body),
    +force on body1 and −force on body2; a weld's orientation rows are applied as a torque unmapped.
    """
    lay = layout(sys)
    out = jnp.zeros((sys.nbody, 6), xpos.dtype)
    root = structure(sys).root
    for eqs, weld in ((lay.connect, False), (lay.weld, True)):
        if not eqs.size:
            continue
        first = np.asarray([np.flatnonzero(lay.row_eq == e)[0] for e in eqs], np.int32)
        force = efc_force[first[:, None] + np.arange(3)[None, :]]
        torque = efc_force[first[:, None] + np.arange(3, 6)[None, :]] if weld else jnp.zeros_like(force)
        site = np.asarray(sys.eq_objtype, np.int32)[eqs] == mjtObj.mjOBJ_SITE
        data = sys.eq_data[eqs]
        site_body = np.asarray(sys.site_bodyid, np.int32).reshape(-1)
        for k, (obj, sign) in enumerate(((sys.eq_obj1id, 1.0), (sys.eq_obj2id, -1.0))):
            o = np.asarray(obj, np.int32)[eqs]
            so = np.where(site, o, 0)
            body = np.where(site, site_body[so] if site_body.size else 0, o).astype(np.int32)
            # body1's point: connect eq_data[0:3], weld [3:6]; body2's the other one; sites: site_pos
            cols = slice(3, 6) if weld == (k == 0) else slice(0, 3)
            local = data[:, cols]
            if site.any():
                local = jnp.where(jnp.asarray(site)[:, None], sys.site_pos[so], local)
            keep = np.flatnonzero(body > 0)  # MuJoCo applies nothing to the world
            if not keep.size:
                continue
            b = body[keep]
            point = xpos[b] + rotate(local[keep], xquat[b])
            arm = point - subtree_com[root[b]]
            f = force[keep]
            wrench = jnp.concatenate([torque[keep] + cross(arm, f), f], axis=-1)
            out = out.at[b].add(sign * wrench)
    return out
