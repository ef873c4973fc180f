"""General convex collider: GJK distance and EPA penetration between support-function shapes.

MuJoCo 4.0.0 collides the pairs without a primitive routine (capsule-cylinder, cylinder-cylinder,
box-cylinder and every ellipsoid pair but plane-ellipsoid) with its native convex collision:
GJK for the distance of separated shapes, EPA for the depth of overlapping ones, both capped at
`opt.ccd_iterations` iterations with tolerance `opt.ccd_tolerance`. Spheres and capsules are
shrunk to their center point and axis segment (the "core") and inflated by their radius
afterwards, which gives the same distance, normal and witness points as the full shapes.

A pair of geoms reports one contact: `dist` the signed distance of the surfaces, `pos` midway
between the two witness points, normal from geom1 to geom2 (MuJoCo's default tangents). The
penetration path follows MuJoCo's: GJK in intersection mode on the shapes inflated by half the
margin each, its tetrahedron walk, the polytope it starts EPA from, and EPA's stopping rule, so
that an EPA cut short by the iteration cap stops near where MuJoCo's does (float32 against
float64: the paths part on near-ties). Under MuJoCo's `multiccd` (its default) the capsule-,
cylinder- and box-cylinder pairs turn this contact into several where flat faces or straight edges
touch (a cylinder standing on a box, a capsule lying on a cap): `collision.multicontact`.

The search runs on constants (`stop_gradient`); gradients come from the envelope theorem (the
signed distance is -(h1(n) + h2(-n)) with the support functions h at the found normal n) and from
the witness points carried rigidly with their geoms; the normal has no gradient.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Final, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from brax_math import cross, safe_norm
from mujoco import mjtGeom

from brax_physics._src.collision.primitives import COLLIDERS as PRIMITIVE_COLLIDERS
from brax_physics._src.collision.primitives import NO_CONTACT, Collider, make_frame
from brax_physics._src.lowering import settings

CCD_ITERATIONS: Final = 35
"""MuJoCo's default `opt.ccd_iterations`."""
CCD_TOLERANCE: Final = 1e-6
"""MuJoCo's default `opt.ccd_tolerance`."""


_SPHERE: Final = int(mjtGeom.mjGEOM_SPHERE)
_CAPSULE: Final = int(mjtGeom.mjGEOM_CAPSULE)
_ELLIPSOID: Final = int(mjtGeom.mjGEOM_ELLIPSOID)
_CYLINDER: Final = int(mjtGeom.mjGEOM_CYLINDER)
_BOX: Final = int(mjtGeom.mjGEOM_BOX)

CONVEX_TYPES: Final = (_SPHERE, _CAPSULE, _ELLIPSOID, _CYLINDER, _BOX)
"""Geom types with a support function here."""
ROUNDED_TYPES: Final = (_SPHERE, _CAPSULE)
"""Geom types searched as a core (point, segment) inflated by a radius: MuJoCo's core-distance path."""

# Below this squared length (relative to the problem's scale) a direction or a simplex is degenerate.
_TINY: Final = 1e-12


# ----------------------------------------------------------------------------------------------
# support functions


def core_radius(gtype: int, size: jax.Array) -> jax.Array:
    """Radius by which the core (point, segment or the shape itself) is inflated: sphere and
    capsule radius, zero otherwise."""
    if gtype in ROUNDED_TYPES:
        return size[0]
    return jnp.zeros((), size.dtype)


def core_support(gtype: int, mat: jax.Array, size: jax.Array, d: jax.Array) -> jax.Array:
    """Support point of a geom's core in world direction `d` (unit, (3,)), relative to its center.

    Sphere: the center; capsule: the end of the axis segment along d; ellipsoid, cylinder and
    box: the surface point with the largest projection on d (MuJoCo's choices on ties: the +
    side for a zero component, the axis point of a cylinder disk for d along the axis).
    """
    dtype = d.dtype
    if gtype == _SPHERE:
        return jnp.zeros(3, dtype)
    if gtype == _CAPSULE:
        z = mat[:, 2]
        return jnp.where(jnp.dot(z, d) >= 0, size[1], -size[1]) * z
    local = mat.T @ d
    if gtype == _ELLIPSOID:
        s = local * size
        n2 = jnp.dot(s, s)
        ok = n2 > _TINY * jnp.max(size) ** 2
        p = size * s / jnp.sqrt(jnp.where(ok, n2, 1.0))
        p = jnp.where(ok, p, jnp.array([1.0, 0.0, 0.0], dtype) * size[0])
    elif gtype == _CYLINDER:
        n2 = local[0] ** 2 + local[1] ** 2
        ok = n2 > _TINY
        scl = jnp.where(ok, size[0] / jnp.sqrt(jnp.where(ok, n2, 1.0)), 0.0)
        p = jnp.stack([scl * local[0], scl * local[1], jnp.where(local[2] >= 0, size[1], -size[1])])
    elif gtype == _BOX:
        p = jnp.where(local >= 0, size, -size)
    else:
        raise ValueError(f"no support function for geom type {gtype}")
    return mat @ p


def rbound(gtype: int, size: jax.Array) -> jax.Array:
    """MuJoCo's `geom_rbound` of a primitive: radius of the bounding sphere about the center."""
    if gtype == _SPHERE:
        return size[0]
    if gtype == _CAPSULE:
        return size[0] + size[1]
    if gtype == _ELLIPSOID:
        return jnp.max(size)
    if gtype == _CYLINDER:
        return safe_norm(size[:2])
    return safe_norm(size)


# ----------------------------------------------------------------------------------------------
# GJK: closest point of the Minkowski difference D = A - B to the origin

# Subsets of the 4 simplex slots, by size.
_SUBSETS: Final = (
    [(i,) for i in range(4)]
    + [(i, j) for i in range(4) for j in range(i + 1, 4)]
    + [(0, 1, 2), (0, 1, 3), (0, 2, 3), (1, 2, 3), (0, 1, 2, 3)]
)


def _det3(a: jax.Array, b: jax.Array, c: jax.Array) -> jax.Array:
    return jnp.dot(a, cross(b, c))


def _subset_lambda(w: jax.Array, idx: tuple[int, ...], tiny: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Barycentric coordinates (4,) of the origin's projection on the affine hull of the simplex
    vertices `idx`, and whether they are all positive (the projection lies inside)."""
    dtype = w.dtype
    lam = jnp.zeros(4, dtype)
    if len(idx) == 1:
        return lam.at[idx[0]].set(1.0), jnp.ones((), bool)
    if len(idx) == 2:
        a, b = w[idx[0]], w[idx[1]]
        e = b - a
        ee = jnp.dot(e, e)
        ok = ee > tiny
        t = -jnp.dot(a, e) / jnp.where(ok, ee, 1.0)
        return lam.at[idx[0]].set(1 - t).at[idx[1]].set(t), ok & (t > 0) & (t < 1)
    if len(idx) == 3:
        a, b, c = w[idx[0]], w[idx[1]], w[idx[2]]
        n = cross(b - a, c - a)
        nn = jnp.dot(n, n)
        ok = nn > tiny * tiny
        nn = jnp.where(ok, nn, 1.0)
        p = n * (jnp.dot(a, n) / nn)
        la = jnp.dot(n, cross(b - p, c - p)) / nn
        lb = jnp.dot(n, cross(c - p, a - p)) / nn
        lc = 1 - la - lb
        lam = lam.at[idx[0]].set(la).at[idx[1]].set(lb).at[idx[2]].set(lc)
        return lam, ok & (la > 0) & (lb > 0) & (lc > 0)
    a, b, c, d = w[0], w[1], w[2], w[3]
    vol = _det3(b - a, c - a, d - a)
    ok = jnp.abs(vol) > tiny ** 1.5
    vol = jnp.where(ok, vol, 1.0)
    lb = _det3(-a, c - a, d - a) / vol
    lc = _det3(b - a, -a, d - a) / vol
    ld = _det3(b - a, c - a, -a) / vol
    la = 1 - lb - lc - ld
    lam = jnp.stack([la, lb, lc, ld])
    return lam, ok & jnp.all(lam > 0)


def _subdistance(w: jax.Array, mask: jax.Array, tiny: jax.Array) -> jax.Array:
    """Barycentric coordinates (4,) of the point of conv(w[mask]) closest to the origin.

    Brute force over the 15 faces of the simplex: the closest point is the smallest projection
    of the origin that falls inside its face.
    """
    lams, oks = zip(*(_subset_lambda(w, s, tiny) for s in _SUBSETS), strict=True)
    lam = jnp.stack(lams)  # (15, 4)
    member = jnp.asarray(np.array([[i in s for i in range(4)] for s in _SUBSETS]))
    ok = jnp.stack(oks) & jnp.all(~member | mask[None, :], axis=1)
    x = lam @ w
    n2 = jnp.where(ok, jnp.sum(x * x, axis=1), jnp.inf)
    return lam[jnp.argmin(n2)]


Support = Callable[[jax.Array], tuple[jax.Array, jax.Array, jax.Array]]


def _gjk(sup: Support, x0: jax.Array, iterations: int, tol: jax.Array, scale: jax.Array
         ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array, jax.Array]:
    """GJK distance: (x, lam, w, s1, s2, inside) with x the point of D closest to the origin,
    lam (4,) its barycentric coordinates on the simplex w (4, 3) (Minkowski points; s1, s2 their
    parts on each shape) and `inside` whether D contains the origin (a full simplex or |x| < tol)."""
    dtype = x0.dtype
    tiny = _TINY * scale * scale
    z43 = jnp.zeros((4, 3), dtype)

    def cond(c: tuple[jax.Array, ...]) -> jax.Array:
        return (c[0] < iterations) & ~c[1]

    def body(c: tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
        k, _, x, lam, w, s1, s2, _ = c
        xx = jnp.dot(x, x)
        touch = xx <= tol * tol
        u = -x / jnp.sqrt(jnp.where(touch, 1.0, xx))
        wn, a, b = sup(u)
        # Frank-Wolfe duality gap: |x|^2 - x.s bounds |x| (|x| - dist).
        gap = xx - jnp.dot(x, wn)
        conv = (k > 0) & ((gap <= 0.5 * tol * tol + 1e-6 * xx) | touch)
        mask = lam > 0
        slot = jnp.argmin(mask)
        w2, s12, s22 = w.at[slot].set(wn), s1.at[slot].set(a), s2.at[slot].set(b)
        mask2 = mask.at[slot].set(True)
        lam2 = _subdistance(w2, mask2, tiny)
        x2 = lam2 @ w2
        stalled = jnp.dot(x2, x2) >= xx * (1 - 1e-7)  # no progress: keep the previous simplex
        keep = conv | ((k > 0) & stalled)
        full = jnp.all(lam2 > 0) & ~keep
        new = (jnp.where(keep, x, x2), jnp.where(keep, lam, lam2), jnp.where(keep, w, w2),
               jnp.where(keep, s1, s12), jnp.where(keep, s2, s22))
        inside2 = full | touch | (jnp.dot(new[0], new[0]) <= tol * tol)
        return (k + 1, keep | inside2, *new, inside2)

    init: tuple[jax.Array, ...] = (jnp.zeros((), jnp.int32), jnp.zeros((), bool), x0, jnp.zeros(4, dtype),
                                   z43, z43, z43, jnp.zeros((), bool))
    _, _, x, lam, w, s1, s2, inside = jax.lax.while_loop(cond, body, init)
    return x, lam, w, s1, s2, inside


# ----------------------------------------------------------------------------------------------
# MuJoCo's penetration path: GJK in intersection mode, then EPA (mjc_ccd with dist_cutoff 0)

_MINVAL: Final = 1e-15  # MuJoCo's mjMINVAL


def _compact(lam: jax.Array, *arrays: jax.Array) -> tuple[jax.Array, ...]:
    """Move the simplex vertices with nonzero weight to the front, keeping their order."""
    order = jnp.argsort(lam == 0, stable=True)
    return (lam[order], *(a[order] for a in arrays))


def _gjk_intersect(sup: Support, x0: jax.Array, iterations: int, tol: jax.Array, scale: jax.Array,
                   active: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """MuJoCo's GJK in intersection mode: (mode, w, s1, s2) with mode 4 when the tetrahedron
    w (4, 3) (parts s1, s2 on each shape, in MuJoCo's vertex order) contains the origin, 2 or 3
    when the origin lies on the segment or triangle w[:mode], 0 without overlap (and where
    `active` is False, without iterating: under `vmap` a loop runs as long as its longest lane).

    GJK iterates until its simplex has 4 vertices (stopping as separated when a support plane
    separates), then the tetrahedron walk of gjkIntersect replaces the vertex opposite the face
    the origin lies beyond until the origin is inside or found outside.
    """
    dtype = x0.dtype
    tiny = _TINY * scale * scale
    z43 = jnp.zeros((4, 3), dtype)

    # phase 1: GJK; status 0 running, 1 tetrahedron ready, 2 stop (separated or inconclusive)
    def cond1(c: tuple[jax.Array, ...]) -> jax.Array:
        return (c[0] < iterations) & (c[1] == 0)

    def body1(c: tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
        k, _, n, x, xn, xn_prev, w, s1, s2 = c
        # MuJoCo's stagnation test compares with the previous simplex point (from the second
        # iteration on: the first comparison would be with the starting guess).
        stuck = (xn < tol) | ((k >= 2) & (jnp.abs(xn_prev - xn) < _MINVAL))
        wn, a, b = sup(-x / jnp.where(xn > 0, xn, 1.0))
        w_, s1_, s2_ = w.at[n].set(wn), s1.at[n].set(a), s2.at[n].set(b)
        conv = jnp.dot(x, x - wn) < 0.5 * tol * tol
        separated = jnp.dot(x, wn) > 0
        ready = n == 3
        mask = jnp.arange(4) <= n
        lam = _subdistance(w_, mask, tiny)
        lam, w2, s12, s22 = _compact(lam, w_, s1_, s2_)
        x2 = lam @ w2
        stop = stuck | conv | separated
        status = jnp.where(stop, 2, jnp.where(ready, 1, 0))
        adv = status == 0
        return (jnp.where(ready & ~stop, k, k + 1), status, jnp.where(adv, jnp.sum(lam != 0), n),
                jnp.where(adv, x2, x), jnp.where(adv, safe_norm(x2), xn), jnp.where(adv, xn, xn_prev),
                jnp.where(adv, w2, w_), jnp.where(adv, s12, s1_), jnp.where(adv, s22, s2_))

    x0n = safe_norm(x0)
    zi = jnp.zeros((), jnp.int32)
    init1: tuple[jax.Array, ...] = (zi, jnp.where(active, 0, 2), zi, x0, x0n, jnp.zeros((), dtype), z43, z43,
                                    z43)
    k, status, n1, _, xn1, _, w, s1, s2 = jax.lax.while_loop(cond1, body1, init1)
    # GJK stopped with the origin on a segment or triangle of its simplex: EPA starts from there.
    on_simplex = (status == 2) & (xn1 < tol) & (n1 >= 2)

    # phase 2: gjkIntersect on the tetrahedron (slot permutation p keeps faces oriented)
    faces = ((2, 1, 3), (0, 2, 3), (1, 0, 3), (0, 1, 2))  # face i omits vertex i

    def cond2(c: tuple[jax.Array, ...]) -> jax.Array:
        return (c[0] < iterations) & (c[1] == 1)

    def body2(c: tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
        k, _, _, p, w, s1, s2 = c
        dists, normals = [], []
        for i, j, l in faces:
            va, vb, vc = w[p[i]], w[p[j]], w[p[l]]
            nrm = cross(vc - va, vb - va)
            nn = jnp.dot(nrm, nrm)
            ok = nn > tiny * tiny
            nrm = nrm / jnp.sqrt(jnp.where(ok, nn, 1.0))
            dists.append(jnp.where(ok, jnp.dot(nrm, va), jnp.inf))
            normals.append(nrm)
        d = jnp.stack(dists)
        nrms = jnp.stack(normals)
        on_face = jnp.any(d == 0)
        lo01 = jnp.where(d[0] < d[1], 0, 1)
        lo23 = jnp.where(d[2] < d[3], 2, 3)
        idx = jnp.where(d[lo01] < d[lo23], lo01, lo23)
        inside = d[idx] > 0
        wn, a, b = sup(nrms[idx])
        out = jnp.dot(nrms[idx], wn) < 0
        slot = p[idx]
        w_, s1_, s2_ = w.at[slot].set(wn), s1.at[slot].set(a), s2.at[slot].set(b)
        i1, i2 = (idx + 1) & 3, (idx + 2) & 3
        p_ = p.at[i1].set(p[i2]).at[i2].set(p[i1])
        stop = on_face | inside | out
        adv = ~stop
        return (jnp.where(stop, k, k + 1), jnp.where(stop, 2, 1), ~on_face & inside,
                jnp.where(adv, p_, p), jnp.where(adv, w_, w), jnp.where(adv, s1_, s1),
                jnp.where(adv, s2_, s2))

    init2: tuple[jax.Array, ...] = (k, status, jnp.zeros((), bool), jnp.arange(4), w, s1, s2)
    _, _, hit, p, w2, s12, s22 = jax.lax.while_loop(cond2, body2, init2)
    mode = jnp.where(hit, 4, jnp.where(on_simplex, n1, 0))
    return mode, jnp.where(hit, w2[p], w), jnp.where(hit, s12[p], s1), jnp.where(hit, s22[p], s2)


def _rot120(axis: jax.Array) -> jax.Array:
    """Rotation by 120 degrees about `axis` (MuJoCo's rotmat)."""
    u = axis / safe_norm(axis)
    c, s = -0.5, 0.86602540378
    zero = jnp.zeros((), axis.dtype)
    k = jnp.stack([jnp.stack([zero, -u[2], u[1]]), jnp.stack([u[2], zero, -u[0]]),
                   jnp.stack([-u[1], u[0], zero])])
    return c * jnp.eye(3, dtype=axis.dtype) + s * k + (1 - c) * jnp.outer(u, u)


def _epa_start(sup: Support, mode: jax.Array, w: jax.Array, s1: jax.Array, s2: jax.Array
               ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array, jax.Array, jax.Array]:
    """MuJoCo's initial EPA polytope (polytope4, polytope2 or polytope3): vertices (5, 3) with
    their parts, faces (6, 3), face and vertex counts, and the center that orients the faces."""
    dtype = w.dtype

    def unit(d: jax.Array) -> jax.Array:
        n = safe_norm(d)
        return jnp.where(n > _MINVAL, d / jnp.where(n > _MINVAL, n, 1.0), jnp.array([1.0, 0.0, 0.0], dtype))

    # tetrahedron
    tet_f = jnp.array([[0, 1, 2], [0, 3, 1], [0, 2, 3], [3, 2, 1], [0, 0, 0], [0, 0, 0]], jnp.int32)
    # segment w0 w1: three supports 120 degrees apart around it, a hexahedron
    diff = w[1] - w[0]
    e = jnp.eye(3, dtype=dtype)[jnp.argmin(jnp.abs(diff))]
    d1 = cross(e, diff)
    rot = _rot120(diff)
    d2 = rot @ d1
    d3 = rot @ d2
    seg = [sup(unit(d)) for d in (d1, d2, d3)]
    seg_f = jnp.array([[0, 2, 3], [0, 4, 2], [0, 3, 4], [1, 3, 2], [1, 2, 4], [1, 4, 3]], jnp.int32)
    # triangle w0 w1 w2: supports along both normals, a hexahedron
    n = cross(w[1] - w[0], w[2] - w[0])
    tri = [sup(unit(-n)), sup(unit(n))]  # indices 3 (below) and 4 (above)
    tri_f = jnp.array([[4, 0, 1], [4, 2, 0], [4, 1, 2], [3, 1, 0], [3, 0, 2], [3, 2, 1]], jnp.int32)

    def verts(extra: list[tuple[jax.Array, jax.Array, jax.Array]], keep: int) -> tuple[jax.Array, ...]:
        out = []
        for part, base in enumerate((w, s1, s2)):
            rows = [base[i] for i in range(keep)] + [x[part] for x in extra]
            rows += [jnp.zeros(3, dtype)] * (5 - len(rows))
            out.append(jnp.stack(rows))
        return tuple(out)

    vt, vs, vr = verts([], 4), verts(seg, 2), verts(tri, 3)
    is_seg, is_tri = mode == 2, mode == 3

    def pick(a: jax.Array, b: jax.Array, c: jax.Array) -> jax.Array:
        return jnp.where(is_seg, b, jnp.where(is_tri, c, a))

    v, v1, v2 = (pick(a, b, c) for a, b, c in zip(vt, vs, vr, strict=True))
    faces = pick(tet_f, seg_f, tri_f)
    nface = jnp.where(is_seg | is_tri, 6, 4)
    nvert = jnp.where(is_seg | is_tri, 5, 4)
    center = pick(jnp.mean(w, axis=0), 0.5 * (w[0] + w[1]), jnp.mean(w[:3], axis=0))
    return v, v1, v2, faces, nface, nvert, center


def _epa(sup: Support, mode: jax.Array, w: jax.Array, s1: jax.Array, s2: jax.Array, iterations: int,
         tol: jax.Array, scale: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """MuJoCo's EPA from the polytope of `_epa_start`: (ok, depth, x1, x2).

    Each iteration takes the face whose plane is nearest the origin (a lower bound on the depth),
    the support point along its normal (an upper bound), stops when the best upper bound is within
    `tol` of the lower one, else adds the point and replaces the faces it sees. The result is the
    last face taken: its plane distance and the witness points of the origin's projection on it
    (x1 on shape 1, x2 on shape 2, relative to their centers). `ok` is False where MuJoCo gives up,
    and where `mode` is 0 (no overlap), which skips the loop.
    """
    dtype = w.dtype
    nv, nf = 5 + iterations, 6 + 2 * iterations
    tiny = _TINY * scale * scale
    v0, v10, v20, f0, nface, nvert, center = _epa_start(sup, mode, w, s1, s2)
    v = jnp.zeros((nv, 3), dtype).at[:5].set(v0)
    v1 = jnp.zeros((nv, 3), dtype).at[:5].set(v10)
    v2 = jnp.zeros((nv, 3), dtype).at[:5].set(v20)
    faces = jnp.zeros((nf, 3), jnp.int32).at[:6].set(f0)
    valid = jnp.arange(nf) < nface

    def planes(v: jax.Array, faces: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Projections of the origin on the face planes (F, 3), pointing away from the center."""
        a, b, c = v[faces[:, 0]], v[faces[:, 1]], v[faces[:, 2]]
        n = cross(b - a, c - a)
        nn = jnp.sum(n * n, axis=1)
        ok = nn > tiny * tiny
        proj = n * (jnp.sum(n * a, axis=1) / jnp.where(ok, nn, 1.0))[:, None]
        flip = jnp.sum(proj * (a - center[None, :]), axis=1) < 0
        proj = jnp.where(flip[:, None], -proj, proj)
        return proj, jnp.sum(proj * proj, axis=1), ok

    def cond(c: tuple[jax.Array, ...]) -> jax.Array:
        return (c[0] < iterations) & ~c[1]

    def body(c: tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
        k, _, v, v1, v2, faces, valid, upper, sel_tri, sel_v, ok, iw = c
        proj, d2, good = planes(v, faces)
        cand = valid & good
        f = jnp.argmin(jnp.where(cand, d2, jnp.inf))
        lower2 = d2[f]
        exhausted = ~jnp.any(cand) | (lower2 > upper * upper)
        on_hull = lower2 <= 0
        lower = jnp.sqrt(jnp.maximum(lower2, 0.0))
        u = jnp.where(lower > _MINVAL, proj[f] / jnp.where(lower > _MINVAL, lower, 1.0),
                      jnp.array([1.0, 0.0, 0.0], dtype))
        wn, a, b = sup(u)
        upper_ = jnp.minimum(upper, jnp.dot(proj[f], wn) / jnp.where(lower > 0, lower, 1.0))
        conv = upper_ - lower < tol
        bad_first = conv & (k == 0) & (upper_ < lower - 1e-10)
        v_, v1_, v2_ = v.at[iw].set(wn), v1.at[iw].set(a), v2.at[iw].set(b)
        vis = valid & (jnp.sum(proj * wn[None, :], axis=1) - d2 > _MINVAL)
        vis = vis.at[f].set(True)
        # Horizon: directed edges of visible faces whose reverse belongs to no visible face.
        ea = faces.reshape(-1)
        eb = jnp.roll(faces, -1, axis=1).reshape(-1)
        evis = jnp.repeat(vis, 3)
        adj = jnp.zeros((nv, nv), bool).at[ea, eb].max(evis)
        horizon = evis & ~adj[eb, ea]
        nh = jnp.sum(horizon)
        valid_ = valid & ~vis
        free = jnp.nonzero(~valid_, size=nf, fill_value=nf)[0]
        rank = jnp.cumsum(horizon) - 1
        target = jnp.where(horizon, free[jnp.clip(rank, 0, nf - 1)], nf)
        newf = jnp.stack([ea, eb, jnp.full_like(ea, iw)], axis=1)
        faces_ = faces.at[target].set(newf, mode="drop")
        valid_ = valid_.at[target].set(True, mode="drop")
        broken = (nh < 3) | (nh > jnp.sum(~(valid & ~vis)))
        stop = exhausted | on_hull | conv | broken
        expand = ~stop
        take = ~exhausted  # the face taken this iteration becomes the answer
        return (k + 1, stop, jnp.where(expand, v_, v), jnp.where(expand, v1_, v1), jnp.where(expand, v2_, v2),
                jnp.where(expand, faces_, faces), jnp.where(expand, valid_, valid),
                jnp.where(exhausted, upper, upper_), jnp.where(take, faces[f], sel_tri),
                jnp.where(take, proj[f], sel_v), ok & ~bad_first & ~(broken & ~conv & ~exhausted & ~on_hull),
                iw + 1)

    init: tuple[jax.Array, ...] = (jnp.zeros((), jnp.int32), mode <= 0, v, v1, v2, faces, valid,
            jnp.asarray(jnp.inf, dtype), jnp.zeros(3, jnp.int32), jnp.zeros(3, dtype), mode > 0, nvert)
    _, _, v, v1, v2, _, _, _, tri, p, ok, _ = jax.lax.while_loop(cond, body, init)
    a, b, c = v[tri[0]], v[tri[1]], v[tri[2]]
    n = cross(b - a, c - a)
    nn = jnp.dot(n, n)
    nn = jnp.where(nn > tiny * tiny, nn, 1.0)
    la = jnp.dot(n, cross(b - p, c - p)) / nn
    lb = jnp.dot(n, cross(c - p, a - p)) / nn
    lam = jnp.stack([la, lb, 1 - la - lb])
    return ok, safe_norm(p), lam @ v1[tri], lam @ v2[tri]


# ----------------------------------------------------------------------------------------------
# one contact


class ConvexShape(NamedTuple):
    """A convex shape as the collider sees it: a core support function and two radii."""

    support: Callable[[jax.Array], jax.Array]
    """World direction d (3,) -> the core's support point in d, relative to the center (world axes)."""
    radius: jax.Array
    """() radius by which the core is inflated (sphere and capsule radius, else 0)."""
    bound: jax.Array
    """() radius of a sphere about the center that bounds the shape (scales the tolerances)."""


ShapeFn = Callable[[jax.Array, Any], ConvexShape]
"""(mat (3, 3), data) -> ConvexShape; `data` is any pytree (a primitive's size, a mesh's vertices)."""


@functools.cache
def primitive_shape(gtype: int) -> ShapeFn:
    """ShapeFn of a primitive geom type; its data is the geom size (3,)."""

    def shape(mat: jax.Array, size: Any) -> ConvexShape:
        return ConvexShape(functools.partial(core_support, gtype, mat, size), core_radius(gtype, size),
                           rbound(gtype, size))

    return shape


@functools.cache
def union_shape(types: tuple[int, ...]) -> ShapeFn:
    """ShapeFn of a lane whose primitive type is one of `types` (static); its data is (k, size):
    the type's index k () in `types` and the geom size (3,). Every type's support is evaluated and
    the lane's selected, so that pairs of several types share one search."""
    if len(types) == 1:
        only = primitive_shape(types[0])
        return lambda mat, data: only(mat, data[1])

    def shape(mat: jax.Array, data: Any) -> ConvexShape:
        k, size = data

        def pick(values: list[jax.Array]) -> jax.Array:
            out = values[0]
            for i, v in enumerate(values[1:], 1):
                out = jnp.where(k == i, v, out)
            return out

        def support(d: jax.Array) -> jax.Array:
            return pick([core_support(t, mat, size, d) for t in types])

        return ConvexShape(support, pick([core_radius(t, size) for t in types]),
                           pick([rbound(t, size) for t in types]))

    return shape


def _search(a: ConvexShape, b: ConvexShape, rounded: bool | jax.Array, pos1: jax.Array, pos2: jax.Array,
            margin: jax.Array, iterations: int, tolerance: float
            ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """Signed distance, unit normal (shape a to shape b) and witness points on the two surfaces
    (relative to each center) of two convex shapes; constants only (no gradients).

    As MuJoCo's mjc_ccd: with a sphere or capsule (`rounded`, static or a () bool), the distance of
    the cores decides (inflated by the radii) unless the cores overlap; otherwise, and for deep
    overlaps, GJK-EPA on the shapes inflated by half the margin each. Pairs that do not overlap
    within the margin get the plain GJK distance of the shapes (or cores).
    """
    dp = pos1 - pos2
    scale = a.bound + b.bound
    tol = jnp.asarray(tolerance, pos1.dtype)
    r1, r2 = a.radius, b.radius
    half = 0.5 * margin

    def core_sup(u: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        p, q = a.support(u), b.support(-u)
        return dp + p - q, p, q

    def full_sup(u: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        p = a.support(u) + (r1 + half) * u
        q = b.support(-u) - (r2 + half) * u
        return dp + p - q, p, q

    x0 = jnp.where(jnp.dot(dp, dp) > _TINY * scale * scale, dp,
                   jnp.array([1.0, 0.0, 0.0], pos1.dtype) * scale)
    # distance of the cores (rounded pairs) or of the shapes
    x, lam, _, s1, s2, inside = _gjk(core_sup, x0, iterations, tol, scale)
    xn = safe_norm(x)
    n_sep = jnp.where(xn > 0, -x / jnp.where(xn > 0, xn, 1.0), -x0 / safe_norm(x0))
    d_sep = jnp.where(inside, 0.0, xn) - r1 - r2
    w1_sep = lam @ s1 + r1 * n_sep
    w2_sep = lam @ s2 - r2 * n_sep
    # penetration of the inflated shapes (for rounded pairs only needed where the cores overlap)
    if isinstance(rounded, bool):
        need = inside | (xn <= tol) if rounded else jnp.ones((), bool)
    else:
        need = jnp.where(rounded, inside | (xn <= tol), True)
    mode, w, e1, e2 = _gjk_intersect(full_sup, x0, iterations, tol, scale, need)
    ok, depth, w1, w2 = _epa(full_sup, mode, w, e1, e2, iterations, tol, scale)
    gap = dp + w1 - w2
    gn = safe_norm(gap)
    n_pen = jnp.where(gn > 0, gap / jnp.where(gn > 0, gn, 1.0), n_sep)
    use_pen = ok & need
    dist = jnp.where(use_pen, margin - depth, d_sep)
    n = jnp.where(use_pen, n_pen, n_sep)
    # witness points on the true surfaces (the inflated ones moved back by half the margin)
    c1 = jnp.where(use_pen, w1 - half * n, w1_sep)
    c2 = jnp.where(use_pen, w2 + half * n, w2_sep)
    return dist, n, c1, c2


def shape_contact(shape1: ShapeFn, pos1: jax.Array, mat1: jax.Array, data1: Any, shape2: ShapeFn,
                  pos2: jax.Array, mat2: jax.Array, data2: Any, margin: jax.Array, rounded: bool,
                  iterations: int = CCD_ITERATIONS, tolerance: float = CCD_TOLERANCE
                  ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """One contact (dist (), pos (3,), normal (3,), shape 1 to shape 2) between two convex shapes,
    with gradients; `rounded` when either is a sphere or capsule (MuJoCo's core-distance path)."""
    const = jax.lax.stop_gradient((pos1, mat1, data1, pos2, mat2, data2, margin))
    p1, m1, d1, p2, m2, d2, mg = const
    found = _search(shape1(m1, d1), shape2(m2, d2), rounded, p1, p2, mg, iterations, tolerance)
    return shape_envelope(shape1, pos1, mat1, data1, shape2, pos2, mat2, data2, *found)


def shape_envelope(shape1: ShapeFn, pos1: jax.Array, mat1: jax.Array, data1: Any, shape2: ShapeFn,
                   pos2: jax.Array, mat2: jax.Array, data2: Any, dist: jax.Array, n: jax.Array,
                   c1: jax.Array, c2: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """`shape_contact`'s contact from a finished search (dist, unit normal n, witness points c1, c2
    relative to the centers, all constants), with the gradients of the envelope theorem."""
    dist, c1, c2 = jax.lax.stop_gradient((dist, c1, c2))
    n = jax.lax.stop_gradient(n)
    # Envelope theorem: dist = -(h1(n) + h2(-n)) at the optimal n, differentiated at fixed n.
    a, b = shape1(mat1, data1), shape2(mat2, data2)
    env = (jnp.dot(n, pos2 - pos1) - jnp.dot(n, a.support(n)) + jnp.dot(n, b.support(-n))
           - a.radius - b.radius)
    dist = jax.lax.stop_gradient(dist) + env - jax.lax.stop_gradient(env)
    # Witness points move rigidly with their geoms.
    l1 = jax.lax.stop_gradient(mat1.T @ c1)
    l2 = jax.lax.stop_gradient(mat2.T @ c2)
    x1 = pos1 + mat1 @ l1
    x2 = pos2 + mat2 @ l2
    return dist, 0.5 * (x1 + x2), n


# ----------------------------------------------------------------------------------------------
# many pairs of one type: search only the pairs that MuJoCo's filters let through


def run_masked(fn: Callable[..., Any], mask: jax.Array, args: Any, fill: Any, chunk: int) -> Any:
    """`jax.vmap(fn)(*args)` where `mask` (n,) holds and `fill` elsewhere, computing only the masked
    lanes: they are gathered `chunk` at a time (as many rounds as there are masked lanes, under
    `vmap` the most of any batch element). For searches on constants (no reverse-mode gradients)."""
    n = mask.shape[0]
    chunk = max(1, min(chunk, n))
    rounds = -(-n // chunk)
    order = jnp.nonzero(mask, size=rounds * chunk, fill_value=n)[0]
    count = jnp.sum(mask)

    def body(c: tuple[jax.Array, Any]) -> tuple[jax.Array, Any]:
        i, out = c
        idx = jax.lax.dynamic_slice(order, (i * chunk,), (chunk,))
        take = jnp.minimum(idx, n - 1)
        res = jax.vmap(fn)(*jax.tree.map(lambda a: a[take], args))
        return i + 1, jax.tree.map(lambda o, r: o.at[idx].set(r, mode="drop"), out, res)

    def cond(c: tuple[jax.Array, Any]) -> jax.Array:
        return c[0] * chunk < count

    return jax.lax.while_loop(cond, body, (jnp.zeros((), count.dtype), fill))[1]


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3, 4), inline=True)
def _lane_search(shape1: ShapeFn, shape2: ShapeFn, flag: bool | None, iterations: int, tolerance: float,
                 p1: jax.Array, m1: jax.Array, d1: Any, p2: jax.Array, m2: jax.Array, d2: Any, mg: jax.Array,
                 rnd: jax.Array) -> tuple[jax.Array, ...]:
    """`_search` of one lane, traced once per shapes, settings and shapes of its arguments: the
    programs of a process that search the same pair kinds (a step, a reset, their batched forms)
    take its jaxpr, and its batching over the lanes, from jit's caches."""
    return _search(shape1(m1, d1), shape2(m2, d2), rnd if flag is None else flag, p1, p2, mg, iterations,
                   tolerance)


def shape_search(shape1: ShapeFn, pos1: jax.Array, mat1: jax.Array, data1: Any, shape2: ShapeFn,
                 pos2: jax.Array, mat2: jax.Array, data2: Any, margin: jax.Array, mask: jax.Array,
                 rounded: bool | np.ndarray, iterations: int = CCD_ITERATIONS,
                 tolerance: float = CCD_TOLERANCE, index2: np.ndarray | None = None
                 ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """`shape_contact`'s search (dist (n,), normal (n, 3), witnesses c1, c2 (n, 3), constants) of n
    lanes, run only where `mask` (n,) holds (elsewhere dist = NO_CONTACT), so that what MuJoCo's
    filters drop costs nothing; `shape_envelope` adds the gradients.

    Shape 1's arrays have a leading n. Shape 2's (pos2, mat2, data2 and margin) do too, unless
    `index2` (n,) is given: then lane i reads their row index2[i] (many prisms against one geom).
    `rounded` is static, for all lanes or per lane (n,). Lanes are searched `search_chunk` at a time
    (the `Lowering` settings): under `vmap` a round runs that many lanes of every environment, so
    small rounds waste the fewest lanes when environments need different numbers of rounds.
    """
    const2 = jax.lax.stop_gradient((pos2, mat2, data2, margin))
    n = mask.shape[0]
    rows = jnp.arange(n) if index2 is None else jnp.asarray(index2, jnp.int32)
    flag = None if not isinstance(rounded, bool) else rounded  # None: per lane
    lane_rounded = jnp.asarray(np.broadcast_to(np.asarray(rounded, bool), (n,)))

    def one(p1: jax.Array, m1: jax.Array, d1: Any, row: jax.Array, rnd: jax.Array) -> tuple[jax.Array, ...]:
        p2, m2, d2, mg = jax.tree.map(lambda a: a[row], const2)
        found: tuple[jax.Array, ...] = _lane_search(shape1, shape2, flag, iterations, tolerance, p1, m1, d1,
                                                    p2, m2, d2, mg, rnd)
        return found

    args = (*jax.lax.stop_gradient((pos1, mat1, data1)), rows, lane_rounded)
    dtype = pos1.dtype
    z3 = jnp.zeros((n, 3), dtype)
    fill = (jnp.full((n,), NO_CONTACT, dtype), z3.at[:, 0].set(1.0), z3, z3)
    out: tuple[jax.Array, jax.Array, jax.Array, jax.Array] = run_masked(
        one, jax.lax.stop_gradient(mask), args, fill, settings.current().search_chunk)
    return out


def primitive_search(type1: np.ndarray, pos1: jax.Array, mat1: jax.Array, size1: jax.Array,
                     type2: np.ndarray, pos2: jax.Array, mat2: jax.Array, size2: jax.Array,
                     margin: jax.Array, mask: jax.Array, iterations: int = CCD_ITERATIONS,
                     tolerance: float = CCD_TOLERANCE
                     ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """`shape_search` of n pairs of primitive geoms of static types type1[i] <= type2[i] ((n,)
    each, sizes as their data): pairs of every type share one search (one loop to compile and run;
    a round's lanes iterate as long as the slowest of them)."""
    type1, type2 = np.asarray(type1, np.int64), np.asarray(type2, np.int64)
    kinds1, kinds2 = tuple(sorted({int(t) for t in type1})), tuple(sorted({int(t) for t in type2}))
    k1 = jnp.asarray(np.searchsorted(kinds1, type1), jnp.int32)
    k2 = jnp.asarray(np.searchsorted(kinds2, type2), jnp.int32)
    rounded = np.isin(type1, ROUNDED_TYPES) | np.isin(type2, ROUNDED_TYPES)
    flag: bool | np.ndarray = bool(rounded[0]) if rounded.size and np.all(rounded == rounded[0]) else rounded
    return shape_search(union_shape(kinds1), pos1, mat1, (k1, size1), union_shape(kinds2), pos2, mat2,
                        (k2, size2), margin, mask, flag, iterations, tolerance)


@functools.cache
def convex_collider(t1: int, t2: int, iterations: int = CCD_ITERATIONS, tolerance: float = CCD_TOLERANCE
                    ) -> Collider:
    """Collider (see `primitives`) for geom types t1 <= t2 with GJK/EPA: one contact."""
    rounded = bool({t1, t2} & set(ROUNDED_TYPES))

    def collide(pos1: jax.Array, mat1: jax.Array, size1: jax.Array, pos2: jax.Array, mat2: jax.Array,
                size2: jax.Array, margin: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        dist, pos, n = shape_contact(primitive_shape(t1), pos1, mat1, size1, primitive_shape(t2), pos2,
                                     mat2, size2, margin, rounded, iterations, tolerance)
        return dist[None], pos[None], make_frame(n)[None]

    return collide


CONVEX_PAIRS: Final = tuple(
    (a, b) for a in CONVEX_TYPES for b in CONVEX_TYPES if a <= b
    and (a == _ELLIPSOID or b == _ELLIPSOID or (a, b) in ((_CAPSULE, _CYLINDER), (_CYLINDER, _CYLINDER),
                                                          (_CYLINDER, _BOX)))
)
"""(type1, type2) pairs MuJoCo collides with its general convex collider (besides meshes)."""

COLLIDERS: Final[dict[tuple[int, int], tuple[Collider, int]]] = {
    **PRIMITIVE_COLLIDERS,
    **{p: (convex_collider(*p), 1) for p in CONVEX_PAIRS},
}
"""Collider and contact count K per supported (type1, type2), type1 <= type2: MuJoCo's primitive
routines (`primitives`), the other pairs with the general convex collider under MuJoCo's default
options (`collide` rebuilds those with the model's ccd_iterations and ccd_tolerance)."""
