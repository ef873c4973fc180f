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
from brax_math import normalize, safe_norm
from mujoco import mjtDisableBit, mjtWrap

from brax_physics._src.com import mm
from brax_physics._src.kinematics import Frames, site_xpos
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
    seg_moves: np.ndarray
    """(nseg,) bool: its sites are on different bodies (MuJoCo adds the segment's Jacobian only then)."""
    seg_sum: np.ndarray
    """(ntendon, nseg) float32: 1 where the segment belongs to the tendon."""
    fixed_sum: np.ndarray
    """(ntendon, nfw) float32: 1 where the fixed wrap belongs to the tendon."""


def layout(sys: System) -> Layout:
    """The (cached) static tendon layout of `sys`."""
    return _layout(sys.ntendon, sys.tendon_adr, sys.tendon_num, sys.wrap_type, sys.wrap_objid,
                   sys.jnt_qposadr, sys.jnt_dofadr, sys.site_bodyid)


@functools.lru_cache(maxsize=64)
def _layout(
    ntendon: int,
    tendon_adr: tuple[int, ...],
    tendon_num: tuple[int, ...],
    wrap_type: tuple[int, ...],
    wrap_objid: tuple[int, ...],
    jnt_qposadr: tuple[int, ...],
    jnt_dofadr: tuple[int, ...],
    site_bodyid: tuple[int, ...],
) -> Layout:
    fw: list[int] = []
    ft: list[int] = []
    seg: list[tuple[int, int, int, int]] = []
    joint, pulley, site = int(mjtWrap.mjWRAP_JOINT), int(mjtWrap.mjWRAP_PULLEY), int(mjtWrap.mjWRAP_SITE)
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
            if t0 == pulley or t1 == pulley:
                continue
            if t0 != site or t1 != site:
                # geom wrapping is refused by the loader
                raise ValueError(f"tendon {i}: only site-to-site spatial segments are supported")
            seg.append((i, wrap_objid[adr + j], wrap_objid[adr + j + 1], divisor))
    fwa = np.asarray(fw, np.int32)
    fjnt = np.asarray(wrap_objid, np.int32)[fwa] if fwa.size else np.zeros(0, np.int32)
    segs = np.asarray(seg, np.int32).reshape(-1, 4)
    body = np.asarray(site_bodyid, np.int32)
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
        seg_moves=body[s0] != body[s1] if segs.size else np.zeros(0, bool),
        seg_sum=seg_sum, fixed_sum=fixed_sum,
    )


def _point_jac_dot(sys: System, sites: np.ndarray, pos: jax.Array, u: jax.Array, cdof: jax.Array,
                   subtree_com: jax.Array) -> jax.Array:
    """(n, nv) uᵀ·jacp: the velocity along `u` (n, 3) of the point `pos` (n, 3) fixed to each site's body.

    With c the tree's com, a dof's velocity of a body-fixed point p is v_c + ω × (p − c), so its
    component along u is v_c·u + ω·((p − c) × u).
    """
    st = structure(sys)
    body = np.asarray(sys.site_bodyid, np.int32)[sites]
    arm = pos - subtree_com[st.root[body]]
    w = jnp.concatenate([jnp.cross(arm, u), u], axis=-1)  # (n, 6) [angular; linear] weights
    return mm(w, cdof.T) * jnp.asarray(st.body_dof[body])


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
        dif = p1 - p0
        seg_len = safe_norm(dif)
        u = normalize(dif)
        div = jnp.ones(lay.seg_tendon.shape, dtype)
        has_div = lay.seg_divisor >= 0
        if has_div.any():
            div = jnp.where(jnp.asarray(has_div), sys.wrap_prm[np.maximum(lay.seg_divisor, 0)], div)
        seg_j = (_point_jac_dot(sys, lay.seg_site1, p1, u, cdof, subtree_com)
                 - _point_jac_dot(sys, lay.seg_site0, p0, u, cdof, subtree_com))
        seg_j = jnp.where(jnp.asarray(lay.seg_moves)[:, None], seg_j, 0.0) / div[:, None]
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
