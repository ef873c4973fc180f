"""Tendons (MuJoCo mj_tendon and the tendon terms of mj_passive, mj_makeM and implicitfast).

A tendon's length `ten_length` and Jacobian `ten_J` (d length / d qvel) are position-stage
quantities. Fixed tendons are linear in the joint positions: length = Σ coef·qpos, J = Σ coef·e_dof.
Spatial tendons are paths through sites: each straight segment between two sites adds its length
(divided by the divisor of the pulley branch it is in) and, when its ends are on different bodies,
uᵀ(jac(p1) − jac(p0)) to J (u the unit direction p0 → p1, jac the point Jacobians), as MuJoCo
computes it. The segment decomposition is static (`layout`), so every segment of every tendon is
evaluated at once and summed into its tendon by a static 0/1 matrix.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
from brax_math import cross, normalize, safe_arccos, safe_norm
from mujoco import mjtDisableBit, mjtWrap

from brax_physics._src.com import mm
from brax_physics._src.integrator import integrate_pos
from brax_physics._src.kinematics import Frames, kinematics, mocap_bodies, site_xpos
from brax_physics._src.linalg import MINVAL
from brax_physics._src.structure import structure
from brax_physics._src.system import System


@dataclasses.dataclass(frozen=True, eq=False)
class Layout:
    """Static tendon structure (numpy, trace-time only)."""

    fixed_wrap: np.ndarray
    """(nfw,) wrap entries of fixed tendons (joint wraps)."""
    fixed_tendon: np.ndarray
    """(nfw,) their tendon."""
    fixed_qpos: np.ndarray
    """(nfw,) the qpos address of their joint."""
    fixed_dof: np.ndarray
    """(nfw,) the dof of their joint."""
    seg_tendon: np.ndarray
    """(nseg,) tendon of each straight site-to-site segment of a spatial tendon."""
    seg_site0: np.ndarray
    """(nseg,) the segment's first site."""
    seg_site1: np.ndarray
    """(nseg,) the segment's second site."""
    seg_divisor: np.ndarray
    """(nseg,) the wrap entry of the pulley whose divisor applies (-1: divisor 1)."""
    seg_geom: np.ndarray
    """(nseg,) the sphere or cylinder the segment wraps around (-1: a straight segment)."""
    seg_side: np.ndarray
    """(nseg,) the wrap's side site (-1: none)."""
    seg_cylinder: np.ndarray
    """(nseg,) bool: the wrap geom is a cylinder (else a sphere)."""
    seg_sum: np.ndarray
    """(ntendon, nseg) float32: 1 where the segment belongs to the tendon."""
    fixed_sum: np.ndarray
    """(ntendon, nfw) float32: 1 where the fixed wrap belongs to the tendon."""


def layout(sys: System) -> Layout:
    """The (cached) static tendon layout of `sys`."""
    return _layout(sys.ntendon, sys.tendon_adr, sys.tendon_num, sys.wrap_type, sys.wrap_objid,
                   sys.wrap_sidesite, sys.jnt_qposadr, sys.jnt_dofadr, sys.site_bodyid)


@functools.lru_cache(maxsize=64)
def _layout(
    ntendon: int,
    tendon_adr: tuple[int, ...],
    tendon_num: tuple[int, ...],
    wrap_type: tuple[int, ...],
    wrap_objid: tuple[int, ...],
    wrap_sidesite: tuple[int, ...],
    jnt_qposadr: tuple[int, ...],
    jnt_dofadr: tuple[int, ...],
    site_bodyid: tuple[int, ...],
) -> Layout:
    fw: list[int] = []
    ft: list[int] = []
    seg: list[tuple[int, int, int, int, int, int, int]] = []
    joint, pulley, site = int(mjtWrap.mjWRAP_JOINT), int(mjtWrap.mjWRAP_PULLEY), int(mjtWrap.mjWRAP_SITE)
    geoms = (int(mjtWrap.mjWRAP_SPHERE), int(mjtWrap.mjWRAP_CYLINDER))
    for i in range(ntendon):
        adr, num = tendon_adr[i], tendon_num[i]
        if wrap_type[adr] == joint:
            fw += range(adr, adr + num)
            ft += [i] * num
            continue
        # walk the path as mj_tendon does: a pulley starts a branch with its own divisor
        divisor = -1
        for j in range(num - 1):
            t0, t1 = wrap_type[adr + j], wrap_type[adr + j + 1]
            if t0 == pulley:
                divisor = adr + j
            if t0 == pulley or t1 == pulley or t0 in geoms:
                continue  # a geom is handled with the site before it
            if t1 in geoms:  # site - geom - site
                seg.append((i, wrap_objid[adr + j], wrap_objid[adr + j + 2], divisor, wrap_objid[adr + j + 1],
                            wrap_sidesite[adr + j + 1], int(t1 == mjtWrap.mjWRAP_CYLINDER)))
            else:
                assert t0 == site and t1 == site
                seg.append((i, wrap_objid[adr + j], wrap_objid[adr + j + 1], divisor, -1, -1, 0))
    fwa = np.asarray(fw, np.int32)
    fjnt = np.asarray(wrap_objid, np.int32)[fwa] if fwa.size else np.zeros(0, np.int32)
    segs = np.asarray(seg, np.int32).reshape(-1, 7)
    s0, s1 = segs[:, 1], segs[:, 2]
    seg_sum = np.zeros((ntendon, segs.shape[0]), np.float32)
    seg_sum[segs[:, 0], np.arange(segs.shape[0])] = 1.0
    fixed_sum = np.zeros((ntendon, fwa.size), np.float32)
    fixed_sum[np.asarray(ft, np.int32), np.arange(fwa.size)] = 1.0
    return Layout(
        fixed_wrap=fwa, fixed_tendon=np.asarray(ft, np.int32),
        fixed_qpos=np.asarray(jnt_qposadr, np.int32)[fjnt] if fjnt.size else np.zeros(0, np.int32),
        fixed_dof=np.asarray(jnt_dofadr, np.int32)[fjnt] if fjnt.size else np.zeros(0, np.int32),
        seg_tendon=segs[:, 0], seg_site0=s0, seg_site1=s1, seg_divisor=segs[:, 3],
        seg_geom=segs[:, 4], seg_side=segs[:, 5], seg_cylinder=segs[:, 6] > 0,
        seg_sum=seg_sum, fixed_sum=fixed_sum,
    )


def _point_jac_dot(sys: System, body: np.ndarray, pos: jax.Array, u: jax.Array, cdof: jax.Array,
                   subtree_com: jax.Array) -> jax.Array:
    """(n, nv) uᵀ·jacp: the velocity along `u` (n, 3) of the point `pos` (n, 3) fixed to each `body`.

    With c the tree's com, a dof's velocity of a body-fixed point p is v_c + ω × (p − c), so its
    component along u is v_c·u + ω·((p − c) × u).
    """
    st = structure(sys)
    arm = pos - subtree_com[st.root[body]]
    w = jnp.concatenate([cross(arm, u), u], axis=-1)  # (n, 6) [angular; linear] weights
    return mm(w, cdof.T) * jnp.asarray(st.body_dof[body])


def _intersect(p1: jax.Array, p2: jax.Array, p3: jax.Array, p4: jax.Array) -> jax.Array:
    """Whether 2D segments p1-p2 and p3-p4 intersect (MuJoCo's is_intersect; parallel: no)."""
    det = ((p4[..., 1] - p3[..., 1]) * (p2[..., 0] - p1[..., 0])
           - (p4[..., 0] - p3[..., 0]) * (p2[..., 1] - p1[..., 1]))
    ok = jnp.abs(det) >= MINVAL
    sdet = jnp.where(ok, det, 1.0)
    a = ((p4[..., 0] - p3[..., 0]) * (p1[..., 1] - p3[..., 1])
         - (p4[..., 1] - p3[..., 1]) * (p1[..., 0] - p3[..., 0])) / sdet
    b = ((p2[..., 0] - p1[..., 0]) * (p1[..., 1] - p3[..., 1])
         - (p2[..., 1] - p1[..., 1]) * (p1[..., 0] - p3[..., 0])) / sdet
    return ok & (a >= 0) & (a <= 1) & (b >= 0) & (b <= 1)


def wrap(x0: jax.Array, x1: jax.Array, xpos: jax.Array, xmat: jax.Array, radius: jax.Array,
         cylinder: np.ndarray, side: jax.Array,
         has_side: np.ndarray) -> tuple[jax.Array, jax.Array, jax.Array]:
    """MuJoCo's mju_wrap for n segments: the path x0 -> x1 (n, 3) around spheres or cylinders.

    Returns the wrapped arc's length (n,) (-1 where the straight segment misses the geom) and the
    tangent points (n, 3) where the path meets and leaves it. In the geom's frame the problem is 2D:
    the plane through the center and both ends for a sphere, the cross-section for a cylinder (its
    height interpolated along the unrolled path). Of the two tangent paths, the one nearer the side
    site (else the shorter) is taken. Side sites inside the geom are refused by the loader.
    """
    p0 = jnp.einsum("nji,nj->ni", xmat, x0 - xpos)
    p1 = jnp.einsum("nji,nj->ni", xmat, x1 - xpos)
    far = (safe_norm(p0) >= MINVAL) & (safe_norm(p1) >= MINVAL)
    cyl = jnp.asarray(cylinder)[:, None]
    # sphere: axis0 along p0, axis1 in the p0-p1 plane (a fixed fallback when p0 and p1 are parallel)
    a0s = normalize(p0)
    normal = cross(p0, p1)
    big = jnp.argmax(jnp.abs(a0s), axis=-1)
    alt = 1.0 - jax.nn.one_hot(big, 3, dtype=p0.dtype)
    normal = jnp.where((safe_norm(normal) < MINVAL)[:, None], cross(a0s, alt), normal)
    a1s = normalize(cross(normalize(normal), a0s))
    ex = jnp.broadcast_to(jnp.asarray([1.0, 0.0, 0.0], p0.dtype), p0.shape)
    ey = jnp.broadcast_to(jnp.asarray([0.0, 1.0, 0.0], p0.dtype), p0.shape)
    a0 = jnp.where(cyl, ex, a0s)
    a1 = jnp.where(cyl, ey, a1s)
    e0 = jnp.stack([jnp.sum(p0 * a0, -1), jnp.sum(p0 * a1, -1)], -1)
    e1 = jnp.stack([jnp.sum(p1 * a0, -1), jnp.sum(p1 * a1, -1)], -1)
    sl = jnp.einsum("nji,nj->ni", xmat, side - xpos)
    sd = normalize(jnp.stack([jnp.sum(sl * a0, -1), jnp.sum(sl * a1, -1)], -1)) * radius[:, None]
    use_side = jnp.asarray(has_side)

    # 2D circle wrap (MuJoCo's wrap_circle)
    r2 = radius * radius
    sq0, sq1 = jnp.sum(e0 * e0, -1), jnp.sum(e1 * e1, -1)
    dif = e1 - e0
    dd = jnp.sum(dif * dif, -1)
    ok = far & (sq0 >= r2) & (sq1 >= r2) & (radius >= MINVAL) & (dd >= MINVAL)
    a = jnp.clip(-jnp.sum(dif * e0, -1) / jnp.where(dd >= MINVAL, dd, 1.0), 0.0, 1.0)
    near = a[:, None] * dif + e0
    miss = (jnp.sum(near * near, -1) > r2) & (~use_side | (jnp.sum(sd * near, -1) >= 0))
    ok = ok & ~miss
    s0 = jnp.sqrt(jnp.maximum(sq0 - r2, 0.0))
    s1 = jnp.sqrt(jnp.maximum(sq1 - r2, 0.0))
    q0 = jnp.where(ok, sq0, 1.0)
    q1 = jnp.where(ok, sq1, 1.0)
    rad = radius

    def solution(sgn: float) -> tuple[jax.Array, jax.Array, jax.Array]:
        t0 = jnp.stack([(e0[:, 0] * r2 + sgn * rad * e0[:, 1] * s0) / q0,
                        (e0[:, 1] * r2 - sgn * rad * e0[:, 0] * s0) / q0], -1)
        t1 = jnp.stack([(e1[:, 0] * r2 - sgn * rad * e1[:, 1] * s1) / q1,
                        (e1[:, 1] * r2 + sgn * rad * e1[:, 0] * s1) / q1], -1)
        good_side = jnp.sum(normalize(t0 + t1) * sd, -1)
        good_short = -jnp.sum((t0 - t1) ** 2, -1)
        good = jnp.where(use_side, good_side, good_short)
        good = jnp.where(_intersect(e0, t0, e1, t1), -10000.0, good)
        return t0, t1, good

    t0a, t1a, ga = solution(1.0)
    t0b, t1b, gb = solution(-1.0)
    first = ga > gb
    t0 = jnp.where(first[:, None], t0a, t0b)
    t1 = jnp.where(first[:, None], t1a, t1b)
    ok = ok & ~_intersect(e0, t0, e1, t1)
    # arc length (MuJoCo's length_circle): the angle between the tangent points, taken the long way
    # round when the chosen solution's turning direction says so
    angle = safe_arccos(jnp.clip(jnp.sum(normalize(t0) * normalize(t1), -1), -1.0, 1.0))
    turn = t0[:, 1] * t1[:, 0] - t0[:, 0] * t1[:, 1]
    flip = ((turn > 0) & ~first) | ((turn < 0) & first)
    wlen = rad * jnp.where(flip, 2 * jnp.pi - angle, angle)

    r0 = a0 * t0[:, :1] + a1 * t0[:, 1:]
    r1 = a0 * t1[:, :1] + a1 * t1[:, 1:]
    # cylinder: heights along the unrolled path, and the helix's length
    l0 = safe_norm(p0[:, :2] - r0[:, :2])
    l1 = safe_norm(p1[:, :2] - r1[:, :2])
    total = jnp.where(ok, l0 + wlen + l1, 1.0)
    z0 = p0[:, 2] + (p1[:, 2] - p0[:, 2]) * l0 / total
    z1 = p0[:, 2] + (p1[:, 2] - p0[:, 2]) * (l0 + wlen) / total
    cylv = jnp.asarray(cylinder)
    r0 = jnp.where(cylv[:, None], r0.at[:, 2].set(z0), r0)
    r1 = jnp.where(cylv[:, None], r1.at[:, 2].set(z1), r1)
    wlen = jnp.where(cylv, safe_norm(jnp.stack([wlen, z1 - z0], -1)), wlen)
    w0 = jnp.einsum("nij,nj->ni", xmat, r0) + xpos
    w1 = jnp.einsum("nij,nj->ni", xmat, r1) + xpos
    return jnp.where(ok, wlen, -1.0), w0, w1


def tendon(sys: System, q: jax.Array, fr: Frames, subtree_com: jax.Array,
           cdof: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(ntendon,) lengths `ten_length` and (ntendon, nv) Jacobians `ten_J` at positions `q` (frames `fr`)."""
    lay = layout(sys)
    dtype = cdof.dtype
    length = jnp.zeros(sys.ntendon, dtype)
    jac = jnp.zeros((sys.ntendon, sys.nv), dtype)
    if lay.fixed_wrap.size:
        coef = sys.wrap_prm[lay.fixed_wrap]
        length = length + mm(jnp.asarray(lay.fixed_sum), coef * q[lay.fixed_qpos])
        jac = jac.at[lay.fixed_tendon, lay.fixed_dof].add(coef)
    if lay.seg_tendon.size:
        p0 = site_xpos(sys, fr, lay.seg_site0)
        p1 = site_xpos(sys, fr, lay.seg_site1)
        sbody = np.asarray(sys.site_bodyid, np.int32)
        b0, b1 = sbody[lay.seg_site0], sbody[lay.seg_site1]
        div = jnp.ones(lay.seg_tendon.shape, dtype)
        has_div = lay.seg_divisor >= 0
        if has_div.any():
            div = jnp.where(jnp.asarray(has_div), sys.wrap_prm[np.maximum(lay.seg_divisor, 0)], div)

        def piece(ba: np.ndarray, pa: jax.Array, bb: np.ndarray,
                  pb: jax.Array) -> tuple[jax.Array, jax.Array]:
            """Length and Jacobian row of the straight piece pa -> pb (points fixed to bodies ba, bb)."""
            dif = pb - pa
            u = normalize(dif)
            j = (_point_jac_dot(sys, bb, pb, u, cdof, subtree_com)
                 - _point_jac_dot(sys, ba, pa, u, cdof, subtree_com))
            return safe_norm(dif), jnp.where(jnp.asarray(ba != bb)[:, None], j, 0.0)

        seg_len, seg_j = piece(b0, p0, b1, p1)
        wraps = np.flatnonzero(lay.seg_geom >= 0)
        if wraps.size:
            g = lay.seg_geom[wraps]
            gb = np.asarray(sys.geom_bodyid, np.int32)[g]
            side = lay.seg_side[wraps]
            side_pos = site_xpos(sys, fr, np.maximum(side, 0))
            wlen, w0, w1 = wrap(p0[wraps], p1[wraps], fr.geom_xpos[g], fr.geom_xmat[g], sys.geom_size[g, 0],
                                lay.seg_cylinder[wraps], side_pos, side >= 0)
            l0, j0 = piece(b0[wraps], p0[wraps], gb, w0)
            l2, j2 = piece(gb, w1, b1[wraps], p1[wraps])
            on = wlen >= 0
            seg_len = seg_len.at[wraps].set(jnp.where(on, l0 + wlen + l2, seg_len[wraps]))
            seg_j = seg_j.at[wraps].set(jnp.where(on[:, None], j0 + j2, seg_j[wraps]))
        seg_j = seg_j / div[:, None]
        ssum = jnp.asarray(lay.seg_sum)
        length = length + mm(ssum, seg_len / div)
        jac = jac + mm(ssum, seg_j)
    return length, jac


def passive(sys: System, ten_length: jax.Array, ten_J: jax.Array, ten_velocity: jax.Array) -> jax.Array:
    """(nv,) tendon spring and damper forces (MuJoCo mj_passive's tendon terms).

    The spring acts only outside the dead band `tendon_lengthspring` [lower, upper]:
    f = −stiffness·(length − upper) above it, −stiffness·(length − lower) below it; the damper is
    −damping·ten_velocity; both act along the tendon, Jᵀ f.
    """
    dflags = sys.opt.disableflags
    frc = jnp.zeros(sys.ntendon, ten_J.dtype)
    if not dflags & mjtDisableBit.mjDSBL_SPRING:
        lo, hi = sys.tendon_lengthspring[:, 0], sys.tendon_lengthspring[:, 1]
        x = jnp.where(ten_length > hi, ten_length - hi, jnp.where(ten_length < lo, ten_length - lo, 0.0))
        frc = frc - sys.tendon_stiffness * x
    if not dflags & mjtDisableBit.mjDSBL_DAMPER:
        frc = frc - sys.tendon_damping * ten_velocity
    return mm(ten_J.T, frc)


def _m_pattern(sys: System) -> np.ndarray:
    """(nv, nv) bool: MuJoCo's sparsity of M (both triangles), in which it keeps tendon couplings.

    A dof and its ancestors, except that the rows of "simple" dofs (`dof_simplenum`) hold only
    their diagonal: couplings between dofs of different branches, or to a simple dof, are dropped.
    """
    anc = structure(sys).dof_anc
    simple = np.asarray(sys.dof_simplenum, np.int32).reshape(-1) > 0
    low = anc & ~simple[:, None] | np.eye(sys.nv, dtype=bool)
    out: np.ndarray = low | low.T
    return out


def armature(sys: System, ten_J: jax.Array) -> jax.Array:
    """(nv, nv) tendon armature inertia Σ armature·JᵀJ on M's sparsity (MuJoCo mj_tendonArmature)."""
    full = mm(ten_J.T, sys.tendon_armature[:, None] * ten_J)
    return jnp.where(jnp.asarray(_m_pattern(sys)), full, 0.0)


def damping_derivative(sys: System, ten_J: jax.Array) -> jax.Array:
    """(nv, nv) −Σ damping·JᵀJ: the tendon dampers' d qfrc_passive / d qvel, kept on M's sparsity
    as MuJoCo's implicitfast keeps it (qDeriv gathered into qH)."""
    full = mm(ten_J.T, sys.tendon_damping[:, None] * ten_J)
    return jnp.where(jnp.asarray(_m_pattern(sys)), -full, 0.0)


def armature_bias(sys: System, q: jax.Array, qd: jax.Array, fr: Frames, subtree_com: jax.Array,
                  cdof: jax.Array, ten_J: jax.Array) -> jax.Array:
    """(nv,) the tendon armature's bias force Σ armature·(J̇·qvel)·Jᵀ (MuJoCo mj_tendonBias).

    J̇·qvel is the length's second time derivative along q(t) = q ⊕ t·qvel (constant qvel, so
    qacc = 0), taken by forward-mode differentiation through the kinematics; fixed tendons are
    linear in qpos, so theirs is zero. Mocap bodies stay where `fr` has them.
    """
    mocap = mocap_bodies(sys)
    mpos, mquat = (fr.xpos[mocap], fr.xquat[mocap]) if sys.nmocap else (None, None)

    def length(t: jax.Array) -> jax.Array:
        qt = integrate_pos(sys, q, qd, t)
        return tendon(sys, qt, kinematics(sys, qt, mpos, mquat), subtree_com, cdof)[0]

    def rate(t: jax.Array) -> jax.Array:
        out: jax.Array = jax.jvp(length, (t,), (jnp.ones_like(t),))[1]
        return out

    zero = jnp.zeros((), qd.dtype)
    jdot_qvel = jax.jvp(rate, (zero,), (jnp.ones_like(zero),))[1]
    return mm(ten_J.T, sys.tendon_armature * jdot_qvel)
