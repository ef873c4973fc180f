"""Ray casting against geoms (MuJoCo mj_ray and mju_rayGeom, engine_ray.c).

A ray is `pnt + x vec` for x >= 0; its distance to a geom is the smallest such x on the geom's
surface (in units of |vec|), -1 where it misses. A ray starting inside a solid geom meets the
surface on its way out; planes are hit only from their front (+z) side, within `size[:2]` where
those are positive. Geoms are handled by type, all geoms of a type together (their types are
static), and the nearest hit wins, the lowest geom id on ties, as in MuJoCo's loop.
Which geoms a ray considers follows MuJoCo's ray_eliminate (`candidates`). Meshes are hit on
their triangles (`mesh_face`, both sides, as MuJoCo's mj_rayMesh; not their convex hull): every
triangle of every mesh geom a ray can see is tested (MuJoCo walks its bounding-volume tree; the
nearest hit is the same). Height fields are cast against in `collision.hfield.ray_local`. SDFs are
not supported: rays that could hit one raise ValueError at trace time (the loader refuses
rangefinders that could).
Gradients are finite everywhere: roots and quotients are guarded where a ray misses, grazes a
surface or runs parallel to a face.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from brax_math import cross, normalize
from mujoco import mjtGeom

from brax_physics._src.collision import hfield
from brax_physics._src.linalg import MINVAL
from brax_physics._src.mjenum import keyword
from brax_physics._src.state import State
from brax_physics._src.system import System

PRIMITIVES: Final = (mjtGeom.mjGEOM_PLANE, mjtGeom.mjGEOM_SPHERE, mjtGeom.mjGEOM_CAPSULE,
                     mjtGeom.mjGEOM_ELLIPSOID, mjtGeom.mjGEOM_CYLINDER, mjtGeom.mjGEOM_BOX)
"""Primitive geom types (MuJoCo's mju_rayGeom types)."""
TYPES: Final = (*PRIMITIVES, mjtGeom.mjGEOM_HFIELD, mjtGeom.mjGEOM_MESH)
"""Geom types rays can hit here (height fields as mj_rayHfield, meshes as mj_rayMesh)."""
NGROUP: Final = 6
"""Number of geom groups a `geomgroup` mask covers (MuJoCo's mjNGROUP)."""


class Hit(NamedTuple):
    """The nearest surface a ray meets (MuJoCo mj_ray's result, geomid and normal)."""

    dist: jax.Array
    """(...) distance along the ray in units of |vec|; -1 where nothing is hit."""
    geomid: jax.Array
    """(...) int32 id of the geom hit; -1 where nothing is hit."""
    normal: jax.Array
    """(..., 3) unit surface normal at the hit in the world frame; zero where nothing is hit."""


def candidates(sys: System, geomgroup: tuple[int, ...] | None = None, flg_static: bool = True,
               bodyexclude: int = -1) -> np.ndarray:
    """(ngeom,) bool: the geoms a ray considers (MuJoCo ray_eliminate, negated).

    A geom is skipped when it belongs to `bodyexclude`, when it is invisible (`sys.geom_visible`:
    alpha 0 at load), when it is static (its body welded to the world) and `flg_static` is false,
    or when `geomgroup` (MuJoCo's mjvOption mask, `NGROUP` flags; None: every group) excludes
    its group (groups outside 0..5 count as the nearest of them).
    """
    body = np.asarray(sys.geom_bodyid, np.int32)
    return keep(body, np.asarray(sys.geom_visible, bool), np.asarray(sys.body_weldid, np.int32)[body],
                np.asarray(sys.geom_group, np.int32), geomgroup, flg_static, bodyexclude)


def keep(geom_bodyid: np.ndarray, geom_visible: np.ndarray, geom_weldid: np.ndarray, geom_group: np.ndarray,
         geomgroup: tuple[int, ...] | None, flg_static: bool, bodyexclude: int) -> np.ndarray:
    """`candidates` from per-geom numpy arrays (body, visibility, weld of the body, group)."""
    out: np.ndarray = (geom_bodyid != bodyexclude) & geom_visible
    if not flg_static:
        out &= geom_weldid != 0
    if geomgroup is not None:
        out &= np.asarray(geomgroup, np.int32)[np.clip(geom_group, 0, NGROUP - 1)] != 0
    return out


def _quad(a: jax.Array, b: jax.Array, c: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Roots x0 <= x1 of a x² + 2 b x + c = 0, both -1 without real finite ones (MuJoCo ray_quad)."""
    det = b * b - a * c
    ok = (det >= 0) & (a >= MINVAL)
    pos = det > 0
    # double where: sqrt's infinite slope at 0 and a zero `a` stay out of the backward pass
    sq = jnp.where(pos, jnp.sqrt(jnp.where(pos, det, 1.0)), 0.0)
    a_ = jnp.where(ok, a, 1.0)
    return jnp.where(ok, (-b - sq) / a_, -1.0), jnp.where(ok, (-b + sq) / a_, -1.0)


def _first(x0: jax.Array, x1: jax.Array) -> jax.Array:
    """The smallest non-negative root, else -1 (what MuJoCo's ray_quad returns)."""
    return jnp.where(x0 >= 0, x0, jnp.where(x1 >= 0, x1, -1.0))


def _dot(x: jax.Array, y: jax.Array) -> jax.Array:
    return jnp.sum(x * y, axis=-1)


def _at(p: jax.Array, v: jax.Array, x: jax.Array) -> jax.Array:
    """Points p + x v, (..., 3)."""
    return p + x[..., None] * v


def _closer(best: tuple[jax.Array, jax.Array], x: jax.Array, ok: jax.Array,
            n: jax.Array) -> tuple[jax.Array, jax.Array]:
    """`best` (distance, normal) replaced by (x, n) where `ok` and x is nearer (or nothing yet)."""
    take = ok & (x >= 0) & ((best[0] < 0) | (x < best[0]))
    return jnp.where(take, x, best[0]), jnp.where(take[..., None], n, best[1])


def _face(v: jax.Array, axis: int) -> tuple[jax.Array, jax.Array]:
    """Whether the ray crosses planes normal to `axis` (|v_axis| > MINVAL) and a safe divisor."""
    usable = jnp.abs(v[..., axis]) > MINVAL
    return usable, jnp.where(usable, v[..., axis], 1.0)


def _unit(axis: int, sign: float, like: jax.Array) -> jax.Array:
    """sign * e_axis broadcast to `like`'s (..., 3) shape."""
    e = np.zeros(3, np.float32)
    e[axis] = sign
    return jnp.broadcast_to(jnp.asarray(e, like.dtype), like.shape)


# Local-frame intersections: size (..., 3), ray point p and direction v (..., 3) in the geom's
# frame; each returns the distance (..., -1 on a miss) and an unnormalized local normal there.
Local = Callable[[jax.Array, jax.Array, jax.Array], tuple[jax.Array, jax.Array]]


def _plane(size: jax.Array, p: jax.Array, v: jax.Array) -> tuple[jax.Array, jax.Array]:
    front = v[..., 2] < -MINVAL  # only rays heading into the front face
    x = -p[..., 2] / jnp.where(front, v[..., 2], -1.0)
    q = _at(p, v, x)
    inside = ((size[..., 0] <= 0) | (jnp.abs(q[..., 0]) <= size[..., 0])) & (
        (size[..., 1] <= 0) | (jnp.abs(q[..., 1]) <= size[..., 1]))
    hit = front & (x >= 0) & inside
    return jnp.where(hit, x, -1.0), _unit(2, 1.0, p)


def _sphere(size: jax.Array, p: jax.Array, v: jax.Array) -> tuple[jax.Array, jax.Array]:
    r = size[..., 0]
    x = _first(*_quad(_dot(v, v), _dot(v, p), _dot(p, p) - r * r))
    return x, _at(p, v, x)


def _ellipsoid(size: jax.Array, p: jax.Array, v: jax.Array) -> tuple[jax.Array, jax.Array]:
    s = 1.0 / (size * size)
    x = _first(*_quad(_dot(s * v, v), _dot(s * v, p), _dot(s * p, p) - 1.0))
    return x, s * _at(p, v, x)


def _round_side(size: jax.Array, p: jax.Array, v: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The first crossing of the infinite round side, whether it lies between the flat ends, normal."""
    r, h = size[..., 0], size[..., 1]
    x = _first(*_quad(v[..., 0] ** 2 + v[..., 1] ** 2, v[..., 0] * p[..., 0] + v[..., 1] * p[..., 1],
                      p[..., 0] ** 2 + p[..., 1] ** 2 - r * r))
    q = _at(p, v, x)
    n = jnp.concatenate([q[..., :2], jnp.zeros_like(q[..., 2:])], axis=-1)
    return x, (x >= 0) & (jnp.abs(q[..., 2]) <= h), n


def _capsule(size: jax.Array, p: jax.Array, v: jax.Array) -> tuple[jax.Array, jax.Array]:
    r, h = size[..., 0], size[..., 1]
    x, ok, n = _round_side(size, p, v)
    best = (jnp.where(ok, x, -1.0), n)
    for end in (1.0, -1.0):  # hemispherical caps, both roots (MuJoCo keeps the nearer of each)
        c = p - end * _unit(2, 1.0, p) * h[..., None]
        for xc in _quad(_dot(v, v), _dot(v, c), _dot(c, c) - r * r):
            q = _at(c, v, xc)
            best = _closer(best, xc, end * q[..., 2] >= 0, q)
    return best


def _cylinder(size: jax.Array, p: jax.Array, v: jax.Array) -> tuple[jax.Array, jax.Array]:
    r, h = size[..., 0], size[..., 1]
    best = (jnp.full(p.shape[:-1], -1.0, p.dtype), jnp.zeros_like(p))
    usable, vz = _face(v, 2)
    for side in (-1.0, 1.0):  # flat ends
        x = (side * h - p[..., 2]) / vz
        q = _at(p, v, x)
        best = _closer(best, x, usable & (q[..., 0] ** 2 + q[..., 1] ** 2 <= r * r), _unit(2, side, p))
    x, ok, n = _round_side(size, p, v)
    return _closer(best, x, ok, n)


def _box(size: jax.Array, p: jax.Array, v: jax.Array) -> tuple[jax.Array, jax.Array]:
    best = (jnp.full(p.shape[:-1], -1.0, p.dtype), jnp.zeros_like(p))
    for axis, (i, j) in enumerate(((1, 2), (0, 2), (0, 1))):
        usable, va = _face(v, axis)
        for side in (-1.0, 1.0):
            x = (side * size[..., axis] - p[..., axis]) / va
            q = _at(p, v, x)
            inside = (jnp.abs(q[..., i]) <= size[..., i]) & (jnp.abs(q[..., j]) <= size[..., j])
            best = _closer(best, x, usable & inside, _unit(axis, side, p))
    return best


_LOCAL: Final[dict[int, Local]] = {
    mjtGeom.mjGEOM_PLANE: _plane, mjtGeom.mjGEOM_SPHERE: _sphere, mjtGeom.mjGEOM_CAPSULE: _capsule,
    mjtGeom.mjGEOM_ELLIPSOID: _ellipsoid, mjtGeom.mjGEOM_CYLINDER: _cylinder, mjtGeom.mjGEOM_BOX: _box,
}


def _face_rows(sys: System, geoms: np.ndarray) -> np.ndarray:
    """(k, F, 3) `mesh_vert` rows of the triangles of mesh geoms `geoms` (k,), padded to the largest
    with degenerate triangles (one vertex three times), which no ray hits."""
    faces = [sys.meshes.face[int(sys.geom_dataid[int(g)])] for g in geoms]
    width = max(max(len(f) for f in faces), 1)
    out = np.zeros((len(faces), width, 3), np.int32)
    for i, f in enumerate(faces):
        out[i, :len(f)] = f
        out[i, len(f):] = f[0, 0] if len(f) else 0
    return out


def _mesh(tri: jax.Array, p: jax.Array, v: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Nearest hit of rays p + x v ((n, k, 3), geom frames) on the triangles tri (k, F, 3, 3) of k
    meshes: distance (n, k) (-1: miss) and the hit triangle's normal (v0 - v2) x (v1 - v2) (MuJoCo's
    ray_triangle: either side, the normal not turned towards the ray)."""
    v0, v1, v2 = tri[None, :, :, 0], tri[None, :, :, 1], tri[None, :, :, 2]  # (1, k, F, 3)
    e1, e2 = v0 - v2, v1 - v2
    vv = jnp.broadcast_to(v[:, :, None, :], jnp.broadcast_shapes(v[:, :, None, :].shape, e2.shape))
    pvec = cross(vv, e2)
    det = _dot(e1, pvec)
    ok = jnp.abs(det) >= MINVAL
    inv = 1.0 / jnp.where(ok, det, 1.0)
    tvec = p[:, :, None, :] - v2
    u = _dot(tvec, pvec) * inv  # weight of v0
    qvec = cross(tvec, e1)
    w = _dot(vv, qvec) * inv  # weight of v1
    x = _dot(e2, qvec) * inv
    hit = ok & (u >= 0) & (w >= 0) & (u + w <= 1) & (x >= 0)
    x = jnp.where(hit, x, jnp.inf)
    j = jnp.argmin(x, axis=-1)
    best = jnp.take_along_axis(x, j[..., None], axis=-1)[..., 0]
    nrm = cross(e1, e2)[0]  # (k, F, 3)
    n = nrm[jnp.arange(nrm.shape[0])[None, :], j]
    return jnp.where(jnp.isfinite(best), best, -1.0), n


def local_distance(geom_type: int, size: jax.Array, p: jax.Array, v: jax.Array) -> jax.Array:
    """(...) distance along the ray p + x v to a primitive of `geom_type` in its own frame, -1: miss.

    `size` (..., 3) is the geom's (or site's) size; `p`, `v` (..., 3) are in its frame. This is
    MuJoCo's mju_rayGeom (without its bounding-sphere early exits, which change no result).
    """
    if geom_type not in _LOCAL:
        raise ValueError(f"no ray intersection for mjtGeom type {keyword(mjtGeom, geom_type)}")
    return _LOCAL[geom_type](size, p, v)[0]


def _hfields(sys: System, geoms: np.ndarray, lp: jax.Array, lv: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Distances and local normals (n, k) of rays lp, lv (n, k, 3) to the height-field geoms (k,)."""
    out = []
    for j, g in enumerate(geoms):
        h = int(sys.geom_dataid[int(g)])
        out.append(hfield.ray_local(sys.hfield_size[h], sys.hfield_data, int(sys.hfield_adr[h]),
                                    int(sys.hfield_nrow[h]), int(sys.hfield_ncol[h]), lp[:, j], lv[:, j]))
    return jnp.stack([x for x, _ in out], axis=1), jnp.stack([n for _, n in out], axis=1)


def cast(sys: System, geom_xpos: jax.Array, geom_xmat: jax.Array, pnt: jax.Array, vec: jax.Array,
         seen: np.ndarray, normals: bool = True) -> Hit:
    """The nearest hit of each of n rays `pnt + x vec` ((n, 3) each) among the geoms it sees.

    `seen` (n, ngeom) is a static bool mask (rows of `candidates`); geom frames are
    `geom_xpos` (ngeom, 3) and `geom_xmat` (ngeom, 3, 3) as in `State`. Without `normals` the
    hit's normal is left zero (and not computed).
    """
    n = pnt.shape[0]
    cols = np.flatnonzero(np.asarray(seen, bool).any(axis=0)).astype(np.int32)
    if not cols.size:
        return Hit(jnp.full(n, -1.0, pnt.dtype), jnp.full(n, -1, jnp.int32), jnp.zeros_like(pnt))
    types = np.asarray(sys.geom_type, np.int32)[cols]
    bad = [int(g) for g in cols if int(sys.geom_type[g]) not in TYPES]
    if bad:
        g = bad[0]
        raise ValueError(f"rays cannot hit geom '{sys.geom_names[g] or g}' of type "
                         f"{keyword(mjtGeom, int(sys.geom_type[g]))}: rays support only "
                         f"{', '.join(keyword(mjtGeom, int(t)) for t in TYPES)} geoms")
    dists, normal_list, order = [], [], []
    for t in np.unique(types):
        g = cols[types == t]
        mat = geom_xmat[g]  # (k, 3, 3)
        rel = pnt[:, None, :] - geom_xpos[g][None, :, :]  # (n, k, 3)
        lp = jnp.einsum("kji,nkj->nki", mat, rel)  # matᵀ (pnt - pos): the ray in the geom's frame
        lv = jnp.einsum("kji,nj->nki", mat, vec)
        if t == mjtGeom.mjGEOM_MESH:
            x, nl = _mesh(sys.mesh_vert[_face_rows(sys, g)], lp, lv)
        elif t == mjtGeom.mjGEOM_HFIELD:
            x, nl = _hfields(sys, g, lp, lv)
        else:
            size = jnp.broadcast_to(sys.geom_size[g][None, :, :], lp.shape)
            x, nl = _LOCAL[int(t)](size, lp, lv)
        dists.append(x)
        normal_list.append(jnp.einsum("kij,nkj->nki", mat, normalize(nl)) if normals else jnp.zeros_like(lp))
        order.append(np.flatnonzero(types == t))
    perm = np.argsort(np.concatenate(order))  # back to geom id order, so ties go to the lowest id
    dist = jnp.concatenate(dists, axis=1)[:, perm]
    normal = jnp.concatenate(normal_list, axis=1)[:, perm]
    dist = jnp.where(jnp.asarray(np.asarray(seen, bool)[:, cols]), dist, -1.0)
    hit = dist >= 0
    j = jnp.argmin(jnp.where(hit, dist, jnp.inf), axis=1)
    anyhit = jnp.any(hit, axis=1)
    best = jnp.take_along_axis(dist, j[:, None], axis=1)[:, 0]
    nbest = jnp.take_along_axis(normal, j[:, None, None], axis=1)[:, 0]
    return Hit(
        dist=jnp.where(anyhit, best, -1.0),
        geomid=jnp.where(anyhit, jnp.asarray(cols)[j], -1),
        normal=jnp.where(anyhit[:, None], nbest, 0.0),
    )


def ray(sys: System, state: State, pnt: jax.Array, vec: jax.Array, geomgroup: tuple[int, ...] | None = None,
        flg_static: bool = True, bodyexclude: int = -1) -> Hit:
    """The nearest geom surface the ray `pnt + x vec` (x >= 0) meets in `state` (MuJoCo mj_ray).

    `pnt`, `vec` (3,) in the world frame (vmap for many rays; a zero `vec`, which MuJoCo refuses,
    hits nothing here); `geomgroup`, `flg_static` and `bodyexclude` choose the geoms as in
    `candidates` (static: close over them under jit). Uses the state's geom frames (`geom_xpos`,
    `geom_xmat`), so call it on a state after `init` or `step`.
    """
    seen = candidates(sys, geomgroup, flg_static, bodyexclude)[None, :]
    hit = cast(sys, state.geom_xpos, state.geom_xmat, pnt[None, :], vec[None, :], seen)
    return Hit(hit.dist[0], hit.geomid[0], hit.normal[0])
