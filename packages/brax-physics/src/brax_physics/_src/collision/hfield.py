"""Height fields: contacts with convex geoms as triangular prisms (MuJoCo mjc_ConvexHField) and rays.

A height field is a grid of `nrow` x `ncol` elevations over [-sx, sx] x [-sy, sy] in its frame
(column c at x = c dx - sx, row r at y = r dy - sy, elevation data[r, c] * sz), solid down to the
base at z = -base. MuJoCo 4.0.0 collides it with a convex geom cell by cell: the geom's support
box in the height field's frame selects the cells it overlaps, each cell is split along its
(c, r)-(c+1, r+1) diagonal into two triangles, and each triangle extruded from the surface down to
the base is a convex prism with 6 vertices that meets the geom in the general convex collider
(GJK/EPA, `convex.shape_search`, with the pair's margin): a prism gives a contact when the geom
comes within the margin of it, at their signed distance. The support box is widened by the margin
before it selects cells; cells whose prism tops all lie below it are skipped. Contacts come in
the scan order (rows, then columns, then the two prisms of a cell), at most MuJoCo's
mjMAXCONPAIR per pair.

Under jit the number of cells a geom can overlap is static: its widened support box is at most
2 (rbound + margin) wide (`geom_rbound` and the pair's margin + gap at load; enlarge them in the
MJCF before randomizing sizes or margins up), which spans at most floor(width / dx) + 2 cells.
Only the prisms of that patch that MuJoCo's loop visits (inside the geom's cell range, tall
enough, of pairs its filters keep) run the collider: one masked search over the (pair, prism)
lanes of every height-field group with a primitive geom (`convex.shape_search`), and one per group
with a mesh. A sphere needs no search at MuJoCo's default `ccd_iterations` and `ccd_tolerance` or
tighter ones: its center's distance to a prism (or depth under the prism's nearest face) is
closed-form, and is what the search converges to (`sphere_prism`); looser ones run the search. The
pair's slots keep the first mjMAXCONPAIR found in scan order, which is exactly MuJoCo's set; a patch
of at most mjMAXCONPAIR prisms keeps one slot per prism.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, NamedTuple

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from brax_math import cross
from mujoco import mjtGeom

from brax_physics._src.collision.convex import (
    CCD_ITERATIONS,
    CCD_TOLERANCE,
    CONVEX_TYPES,
    ROUNDED_TYPES,
    ConvexShape,
    ShapeFn,
    primitive_shape,
    shape_envelope,
    shape_search,
    union_shape,
)
from brax_physics._src.collision.primitives import NO_CONTACT, make_frame
from brax_physics._src.linalg import MINVAL

if TYPE_CHECKING:
    from brax_physics._src.collision.types import PairGroup
    from brax_physics._src.system import System

HFIELD: Final = int(mjtGeom.mjGEOM_HFIELD)
_SPHERE: Final = int(mjtGeom.mjGEOM_SPHERE)
MAXCONPAIR: Final = 50
"""MuJoCo's mjMAXCONPAIR: most contacts a height-field pair reports."""

HFIELD_PAIRS: Final = (*((HFIELD, t) for t in CONVEX_TYPES), (HFIELD, int(mjtGeom.mjGEOM_MESH)))
"""(type1, type2) pairs collided here: a height field and a sphere, capsule, ellipsoid, cylinder, box or
convex mesh (its hull, `mesh.mesh_shape`)."""


# ----------------------------------------------------------------------------------------------
# load time (numpy): the static patch


def patch_cells(m: mujoco.MjModel, hfield_geom: int, geom: int, margin: float) -> tuple[int, int]:
    """(rows, cols) of grid cells the geom's support box widened by `margin` can overlap."""
    h = int(m.geom_dataid[hfield_geom])
    nrow, ncol = int(m.hfield_nrow[h]), int(m.hfield_ncol[h])
    sx, sy = float(m.hfield_size[h, 0]), float(m.hfield_size[h, 1])
    width = 2.0 * (float(m.geom_rbound[geom]) + margin)

    def cells(n: int, half: float) -> int:
        w = width / (2.0 * half / (n - 1))
        return min(n - 1, int(np.floor(w * (1 + 1e-5) + 1e-5)) + 2)

    return cells(nrow, sy), cells(ncol, sx)


def group_patch(m: mujoco.MjModel, geom1: np.ndarray, geom2: np.ndarray, pair_id: np.ndarray
                ) -> tuple[tuple[int, int], int]:
    """The patch (rows, cols) every pair of a group scans and its contact slots per pair."""

    def margin(a: int, b: int, p: int) -> float:
        if p >= 0:
            return float(m.pair_margin[p] + m.pair_gap[p])
        return float(m.geom_margin[a] + m.geom_margin[b] + m.geom_gap[a] + m.geom_gap[b])

    rc = np.array([patch_cells(m, int(a), int(b), margin(int(a), int(b), int(p)))
                   for a, b, p in zip(geom1, geom2, pair_id, strict=True)], np.int64)
    rows, cols = (int(x) for x in rc.max(axis=0))
    return (rows, cols), min(2 * rows * cols, MAXCONPAIR)


# ----------------------------------------------------------------------------------------------
# prisms


def prism_shape(mat: jax.Array, verts: jax.Array) -> ConvexShape:
    """ShapeFn of a prism: `verts` (6, 3) bottom triangle then top triangle, relative to the center.

    As MuJoCo's prism support: the bottom triangle for directions pointing down (d_z < 0, in the
    prism's frame), else the top one, and its vertex farthest along d (the first on ties).
    """

    def support(d: jax.Array) -> jax.Array:
        local = mat.T @ d
        tri = jnp.where(local[2] < 0, verts[:3], verts[3:])
        return mat @ tri[jnp.argmax(tri @ local)]

    return ConvexShape(support, jnp.zeros((), verts.dtype), jnp.sqrt(jnp.max(jnp.sum(verts * verts, axis=1))))


def _prisms(size: jax.Array, data: jax.Array, adr: jax.Array, nrow: jax.Array, ncol: jax.Array,
            r: jax.Array, c: jax.Array) -> jax.Array:
    """(..., 2, 6, 3) the two prisms of cells (r, c) (...) in the height field's frame, MuJoCo's
    vertex order: bottom (c, r+1), (c, r), (c+1, r+1) and (c, r), (c+1, r+1), (c+1, r), then the
    same at the surface."""
    dtype = size.dtype
    dx = 2 * size[0] / (ncol - 1).astype(dtype)
    dy = 2 * size[1] / (nrow - 1).astype(dtype)

    def corner(dr: int, dc: int) -> jax.Array:
        z = data[adr + (r + dr) * ncol + c + dc] * size[2]
        x = dx * (c + dc).astype(dtype) - size[0]
        return jnp.stack([x, dy * (r + dr).astype(dtype) - size[1], z], axis=-1)

    a, b, e, f = corner(1, 0), corner(0, 0), corner(1, 1), corner(0, 1)
    tris = jnp.stack([jnp.stack([a, b, e], -2), jnp.stack([b, e, f], -2)], -3)  # (..., 2, 3, 3)
    bottom = tris.at[..., 2].set(-size[3])
    return jnp.concatenate([bottom, tris], axis=-2)


# ----------------------------------------------------------------------------------------------
# one pair: the prisms to visit, then the contacts from their searches


def _visits(hpos: jax.Array, hmat: jax.Array, size: jax.Array, data: jax.Array, adr: jax.Array,
            nrow: jax.Array, ncol: jax.Array, shape2: ShapeFn, pos2: jax.Array, mat2: jax.Array,
            data2: Any, rbound2: jax.Array, margin: jax.Array, patch: tuple[int, int]
            ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """The patch of one height field (frame hpos, hmat; `size` (4,), elevations `data` from `adr`)
    under one convex geom (`shape2`, its frame and data, bounding radius): prisms (P, 6, 3) in the
    height field's frame, the geom's frame there (lpos (3,), lmat (3, 3)) and which prisms MuJoCo
    collides (visit (P,)); P = 2 rows cols of the static `patch`."""
    dtype = pos2.dtype
    lpos = hmat.T @ (pos2 - hpos)
    lmat = hmat.T @ mat2
    # MuJoCo's early exits: bounding sphere, then support box, against the height field's box
    rad = rbound2 + margin
    lo = jnp.stack([-size[0], -size[1], -size[3]])
    hi = size[:3]
    near = jnp.all((lpos - rad <= hi) & (lpos + rad >= lo))
    s2 = shape2(jax.lax.stop_gradient(lmat), jax.lax.stop_gradient(data2))
    eye = jnp.eye(3, dtype=dtype)
    lpos_c = jax.lax.stop_gradient(lpos)
    smax = jnp.stack([(s2.support(e) + s2.radius * e + lpos_c)[i] for i, e in enumerate(eye)])
    smin = jnp.stack([(s2.support(-e) - s2.radius * e + lpos_c)[i] for i, e in enumerate(eye)])
    near = near & jnp.all((smin - margin <= hi) & (smax + margin >= lo))
    # the cells under the support box (MuJoCo's sub-grid bounds)
    size_c = jax.lax.stop_gradient(size)
    fc = (ncol - 1).astype(dtype)
    fr = (nrow - 1).astype(dtype)
    smin = smin - margin  # MuJoCo 4.0.0 widens the support box by the margin
    smax = smax + margin
    cmin = jnp.maximum(0, jnp.floor((smin[0] + size_c[0]) / (2 * size_c[0]) * fc).astype(jnp.int32))
    cmax = jnp.minimum(ncol - 1, jnp.ceil((smax[0] + size_c[0]) / (2 * size_c[0]) * fc).astype(jnp.int32))
    rmin = jnp.maximum(0, jnp.floor((smin[1] + size_c[1]) / (2 * size_c[1]) * fr).astype(jnp.int32))
    rmax = jnp.minimum(nrow - 1, jnp.ceil((smax[1] + size_c[1]) / (2 * size_c[1]) * fr).astype(jnp.int32))
    pr, pc = patch
    r = rmin + jnp.arange(pr, dtype=jnp.int32)[:, None]
    c = cmin + jnp.arange(pc, dtype=jnp.int32)[None, :]
    inside = (r < rmax) & (c < cmax) & near  # (pr, pc): cells MuJoCo's loop visits
    r_ = jnp.clip(r, 0, nrow - 2) + 0 * c
    c_ = jnp.clip(c, 0, ncol - 2) + 0 * r
    prisms = _prisms(size, data, adr, nrow, ncol, r_, c_).reshape(2 * pr * pc, 6, 3)
    # prism height test: a prism whose top lies below the geom is skipped
    tall = jnp.any(jax.lax.stop_gradient(prisms[:, 3:, 2]) >= smin[2], axis=1)
    visit = jnp.repeat(inside.reshape(-1), 2) & tall
    return prisms, lpos, lmat, visit


def _contacts(hpos: jax.Array, hmat: jax.Array, prisms: jax.Array, shape2: ShapeFn, lpos: jax.Array,
              lmat: jax.Array, data2: Any, margin: jax.Array, visit: jax.Array,
              search: tuple[jax.Array, ...], ncon: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Contacts (dist (ncon,), pos (ncon, 3), frame (ncon, 3, 3), unfilled slots at NO_CONTACT) of
    one pair from its prisms' searches (`convex.shape_search` outputs, (P, ...) each)."""
    eye = jnp.eye(3, dtype=prisms.dtype)

    def one(prism: jax.Array, found: tuple[jax.Array, ...]) -> tuple[jax.Array, jax.Array, jax.Array]:
        center = jnp.mean(prism, axis=0)
        return shape_envelope(prism_shape, center, eye, prism - center[None, :], shape2, lpos, lmat, data2,
                              *found)

    dist, lp, ln = jax.vmap(one)(prisms, search)
    found = visit & (jax.lax.stop_gradient(dist) < margin)
    n = prisms.shape[0]
    if n > ncon:  # keep the first `ncon` found in scan order, as MuJoCo stops at mjMAXCONPAIR
        rank = jnp.cumsum(found) - 1
        key = jnp.where(found & (rank < ncon), rank, ncon + jnp.arange(n))
        sel = jnp.argsort(key)[:ncon]
        dist, lp, ln, found = dist[sel], lp[sel], ln[sel], found[sel]
    pos = lp @ hmat.T + hpos[None, :]
    normal = ln @ hmat.T
    dist = jnp.where(found, dist, NO_CONTACT)
    return dist, jnp.where(found[:, None], pos, 0.0), make_frame(normal)


class _Job(NamedTuple):
    """One height-field group's arrays ((npair, ...) each) and static layout, for `_stage`/`_finish`."""

    hpos: jax.Array
    hmat: jax.Array
    size: jax.Array
    adr: np.ndarray
    nrow: np.ndarray
    ncol: np.ndarray
    pos2: jax.Array
    mat2: jax.Array
    data2: Any
    rbound2: jax.Array
    margin: jax.Array
    skip: jax.Array
    patch: tuple[int, int]
    ncon: int
    shape2: ShapeFn


class _Staged(NamedTuple):
    """A group's prisms (npair, P, 6, 3), geom frames in the height fields' frames and visits (npair, P)."""

    prisms: jax.Array
    lpos: jax.Array
    lmat: jax.Array
    visit: jax.Array


def _stage(job: _Job, data: jax.Array) -> _Staged:
    """The prisms each pair of `job` visits, before the search."""
    a_, nr_, nc_ = (jnp.asarray(np.asarray(x, np.int32)) for x in (job.adr, job.nrow, job.ncol))

    def visits(hp: jax.Array, hm: jax.Array, sz: jax.Array, a: jax.Array, nr: jax.Array, nc: jax.Array,
               p2: jax.Array, m2: jax.Array, d2: Any, rb: jax.Array, mg: jax.Array
               ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        return _visits(hp, hm, sz, data, a, nr, nc, job.shape2, p2, m2, d2, rb, mg, job.patch)

    prisms, lpos, lmat, visit = jax.vmap(visits)(job.hpos, job.hmat, job.size, a_, nr_, nc_, job.pos2,
                                                 job.mat2, job.data2, job.rbound2, job.margin)
    return _Staged(prisms, lpos, lmat, visit & ~job.skip[:, None])


def _search_lanes(staged: list[_Staged], shape2: ShapeFn, data2: Any, margin: jax.Array,
                  rounded: bool | np.ndarray, iterations: int, tolerance: float
                  ) -> list[tuple[jax.Array, ...]]:
    """One GJK/EPA search over every (pair, prism) lane of the staged groups, run only on the prisms
    MuJoCo visits; geom2's shape, data and margin are those of all the groups' pairs in order.
    Returns each group's results, (npair, P, ...) each."""
    flat = jnp.concatenate([st.prisms.reshape(-1, 6, 3) for st in staged])
    center = jnp.mean(flat, axis=1)
    eye = jnp.broadcast_to(jnp.eye(3, dtype=flat.dtype), (flat.shape[0], 3, 3))
    sizes = [st.visit.shape for st in staged]
    first = np.cumsum([0] + [npair for npair, _ in sizes])
    index2 = np.concatenate([f + np.repeat(np.arange(npair), nprism)
                             for f, (npair, nprism) in zip(first[:-1], sizes, strict=True)])
    lpos = jnp.concatenate([st.lpos for st in staged])
    lmat = jnp.concatenate([st.lmat for st in staged])
    visit = jnp.concatenate([st.visit.reshape(-1) for st in staged])
    search = shape_search(prism_shape, center, eye, flat - center[:, None, :], shape2, lpos, lmat, data2,
                          margin, visit, rounded, iterations, tolerance, index2=index2)
    ends = np.cumsum([npair * nprism for npair, nprism in sizes])
    return [tuple(x[end - npair * nprism:end].reshape(npair, nprism, *x.shape[1:]) for x in search)
            for end, (npair, nprism) in zip(ends, sizes, strict=True)]


def _dot(a: jax.Array, b: jax.Array) -> jax.Array:
    """a · b over the last axis."""
    return jnp.sum(a * b, axis=-1)


def _closest_on_triangle(p: jax.Array, a: jax.Array, b: jax.Array, c: jax.Array) -> jax.Array:
    """(3,) the point of triangle (a, b, c) closest to p: the region of p among the triangle's
    vertices, edges and face, by the signs of its barycentric sub-determinants."""
    ab, ac, ap, bp, cp = b - a, c - a, p - a, p - b, p - c
    d1, d2 = _dot(ab, ap), _dot(ac, ap)
    d3, d4 = _dot(ab, bp), _dot(ac, bp)
    d5, d6 = _dot(ab, cp), _dot(ac, cp)
    va, vb, vc = d3 * d6 - d5 * d4, d5 * d2 - d1 * d6, d1 * d4 - d3 * d2

    def ratio(num: jax.Array, den: jax.Array) -> jax.Array:
        return num / jnp.where(den != 0, den, 1.0)

    den = va + vb + vc
    out = a + ab * ratio(vb, den) + ac * ratio(vc, den)  # inside the face
    # the regions in reverse order of precedence, each overriding the ones after it
    on_bc = (va <= 0) & (d4 - d3 >= 0) & (d5 - d6 >= 0)
    out = jnp.where(on_bc, b + (c - b) * ratio(d4 - d3, (d4 - d3) + (d5 - d6)), out)
    out = jnp.where((vb <= 0) & (d2 >= 0) & (d6 <= 0), a + ac * ratio(d2, d2 - d6), out)
    out = jnp.where((d6 >= 0) & (d5 <= d6), c, out)
    out = jnp.where((vc <= 0) & (d1 >= 0) & (d3 <= 0), a + ab * ratio(d1, d1 - d3), out)
    out = jnp.where((d3 >= 0) & (d4 <= d3), b, out)
    return jnp.where((d1 <= 0) & (d2 <= 0), a, out)


def _first_min(values: list[jax.Array], *payloads: list[jax.Array]) -> tuple[jax.Array, ...]:
    """The least of `values` (the first on ties) and the payloads at it, by selects (no reduction)."""
    best, out = values[0], [p[0] for p in payloads]
    for i in range(1, len(values)):
        take = values[i] < best
        best = jnp.where(take, values[i], best)
        out = [jnp.where(take, p[i], o) for p, o in zip(payloads, out, strict=True)]
    return (best, *out)


def sphere_prism(prism: jax.Array, center: jax.Array, radius: jax.Array
                 ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """A sphere (center (3,), radius ()) against a prism (6, 3) of `_prisms`, in closed form: the
    signed distance, unit normal (prism to sphere) and witness points (on the prism, relative to
    the prism's vertex mean; on the sphere, relative to its center) that MuJoCo's search converges
    to. The search shrinks a sphere to its center: outside the prism, the center's nearest point on
    the prism's eight boundary triangles; inside it, EPA's minimum-depth direction, the nearest of
    its five face planes."""
    bottom, top = prism[:3], prism[3:]
    tris = [(top[0], top[1], top[2]), (bottom[0], bottom[1], bottom[2])]
    for i, j in ((0, 1), (1, 2), (2, 0)):
        tris += [(bottom[i], bottom[j], top[j]), (bottom[i], top[j], top[i])]
    near = [_closest_on_triangle(center, *t) for t in tris]
    gap2, q = _first_min([_dot(x - center, x - center) for x in near], near)
    xn = jnp.sqrt(gap2)
    # the five faces' outward unit normals and the center's depth under each (positive inside)
    zero = jnp.zeros((), prism.dtype)
    xy = top[:, :2]
    e1, e2 = xy[1] - xy[0], xy[2] - xy[0]
    turn = jnp.sign(e1[0] * e2[1] - e1[1] * e2[0])
    normals, depths = [], []
    for i, j in ((0, 1), (1, 2), (2, 0)):
        e = xy[j] - xy[i]
        m = turn * jnp.stack([e[1], -e[0], zero]) / jnp.sqrt(e[0] * e[0] + e[1] * e[1])
        normals.append(m)
        depths.append(m[0] * (xy[i, 0] - center[0]) + m[1] * (xy[i, 1] - center[1]))
    up = cross(top[1] - top[0], top[2] - top[0])
    up = up * jnp.sign(up[2]) / jnp.sqrt(_dot(up, up))
    normals += [up, jnp.stack([zero, zero, -jnp.ones((), prism.dtype)])]
    depths += [_dot(up, top[0] - center), center[2] - bottom[0, 2]]
    depth, face = _first_min(depths, normals)
    inside = depth >= 0
    n = jnp.where(inside, face, (center - q) / jnp.where(xn > 0, xn, 1.0))
    dist = jnp.where(inside, -depth, xn) - radius
    on_prism = jnp.where(inside, center + depth * face, q)
    mean = (prism[0] + prism[1] + prism[2] + prism[3] + prism[4] + prism[5]) / 6
    return dist, n, on_prism - mean, -radius * n


def _sphere_lanes(staged: _Staged, radius: jax.Array) -> tuple[jax.Array, ...]:
    """`_search_lanes`' results (npair, P, ...) for one group of spheres (radius (npair,)), in
    closed form on every lane (`sphere_prism`; no search loop), NO_CONTACT where not visited."""
    prisms, lpos, radius = jax.lax.stop_gradient((staged.prisms, staged.lpos, radius))
    per_pair = jax.vmap(sphere_prism, in_axes=(0, None, None))
    dist, n, c1, c2 = jax.vmap(per_pair)(prisms, lpos, radius)
    visit = staged.visit
    x_axis = jnp.array([1.0, 0.0, 0.0], n.dtype)
    return (jnp.where(visit, dist, NO_CONTACT), jnp.where(visit[..., None], n, x_axis),
            jnp.where(visit[..., None], c1, 0.0), jnp.where(visit[..., None], c2, 0.0))


def _finish(job: _Job, staged: _Staged, search: tuple[jax.Array, ...]
            ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Contacts (npair, ncon, ...) of `job` from its prisms' searches."""

    def contacts(hp: jax.Array, hm: jax.Array, pm: jax.Array, lp: jax.Array, lm: jax.Array, d2: Any,
                 mg: jax.Array, vs: jax.Array, sr: tuple[jax.Array, ...]
                 ) -> tuple[jax.Array, jax.Array, jax.Array]:
        return _contacts(hp, hm, pm, job.shape2, lp, lm, d2, mg, vs, sr, job.ncon)

    out: tuple[jax.Array, jax.Array, jax.Array] = jax.vmap(contacts)(
        job.hpos, job.hmat, staged.prisms, staged.lpos, staged.lmat, job.data2, job.margin, staged.visit,
        search)
    return out




def _job(sys: System, g: PairGroup, geom_xpos: jax.Array, geom_xmat: jax.Array, data2: Any, margin: jax.Array,
         skip: jax.Array, shape2: ShapeFn) -> _Job:
    """The `_Job` of group `g` of `collide`."""
    hid = np.asarray(sys.geom_dataid, np.int32)[g.geom1]

    def table(x: Any) -> np.ndarray:
        out: np.ndarray = np.asarray(x, np.int32)[hid]
        return out

    return _Job(geom_xpos[g.geom1], geom_xmat[g.geom1], sys.hfield_size[hid], table(sys.hfield_adr),
                table(sys.hfield_nrow), table(sys.hfield_ncol), geom_xpos[g.geom2],
                geom_xmat[g.geom2], data2, sys.geom_rbound[g.geom2], margin, skip, g.patch, g.ncon_per_pair,
                shape2)


def collide_pairs(sys: System, g: PairGroup, geom_xpos: jax.Array, geom_xmat: jax.Array, data2: Any,
                  margin: jax.Array, skip: jax.Array, shape2: ShapeFn
                  ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Contacts (npair, K, ...) of a height-field group of `collide` whose geom2 is read by `shape2`
    from `data2` (batched over the pairs: a mesh's hull)."""
    job = _job(sys, g, geom_xpos, geom_xmat, data2, margin, skip, shape2)
    staged = _stage(job, sys.hfield_data)
    search = _search_lanes([staged], shape2, data2, margin, g.type2 in ROUNDED_TYPES,
                           sys.contact_pairs.ccd_iterations, sys.contact_pairs.ccd_tolerance)[0]
    return _finish(job, staged, search)


def collide_primitive_pairs(sys: System, groups: list[PairGroup], geom_xpos: jax.Array, geom_xmat: jax.Array,
                            margins: list[jax.Array], skips: list[jax.Array]
                            ) -> list[tuple[jax.Array, jax.Array, jax.Array]]:
    """Contacts (npair, K, ...) of height-field groups of `collide` whose geom2 is a primitive: the
    prisms of every group share one search (each geom type of its own would be one more GJK/EPA loop
    to compile and one more loop per step to run)."""
    if not groups:
        return []
    jobs = [_job(sys, g, geom_xpos, geom_xmat, sys.geom_size[g.geom2], mg, sk, primitive_shape(g.type2))
            for g, mg, sk in zip(groups, margins, skips, strict=True)]
    staged = [_stage(job, sys.hfield_data) for job in jobs]
    # spheres in closed form at MuJoCo's default ccd budget or a tighter one (the converged search);
    # a looser `ccd_iterations` or `ccd_tolerance` runs the search it caps. The rest share one search.
    cp = sys.contact_pairs
    closed = cp.ccd_iterations >= CCD_ITERATIONS and cp.ccd_tolerance <= CCD_TOLERANCE
    searched = [i for i, g in enumerate(groups) if g.type2 != _SPHERE or not closed]
    out = {i: _sphere_lanes(staged[i], jobs[i].data2[:, 0]) for i in range(len(groups)) if i not in searched}
    if searched:
        found = _search_others([groups[i] for i in searched], [jobs[i] for i in searched],
                               [staged[i] for i in searched], [margins[i] for i in searched],
                               cp.ccd_iterations, cp.ccd_tolerance)
        out.update(zip(searched, found, strict=True))
    return [_finish(job, st, out[i]) for i, (job, st) in enumerate(zip(jobs, staged, strict=True))]


def _search_others(groups: list[PairGroup], jobs: list[_Job], staged: list[_Staged], margins: list[jax.Array],
                   iterations: int, tolerance: float) -> list[tuple[jax.Array, ...]]:
    """`_search_lanes` of primitive height-field groups of several geom types, in one search."""
    kinds = tuple(sorted({g.type2 for g in groups}))
    k2 = jnp.asarray(np.concatenate([np.full(g.npair, kinds.index(g.type2)) for g in groups]), jnp.int32)
    size2 = jnp.concatenate([job.data2 for job in jobs])
    # per lane: a sphere or capsule pair takes MuJoCo's core-distance path
    rounded = np.concatenate([np.full(st.visit.size, g.type2 in ROUNDED_TYPES)
                              for st, g in zip(staged, groups, strict=True)])
    flag: bool | np.ndarray = bool(rounded[0]) if np.all(rounded == rounded[0]) else rounded
    return _search_lanes(staged, union_shape(kinds), (k2, size2), jnp.concatenate(margins), flag, iterations,
                         tolerance)


# ----------------------------------------------------------------------------------------------
# rays (MuJoCo's mj_rayHfield), in the height field's frame


def _ray_triangle(v: jax.Array, p: jax.Array, u: jax.Array, b0: jax.Array, b1: jax.Array
                  ) -> tuple[jax.Array, jax.Array]:
    """Distance (..., -1 on a miss) along p + x u to triangles v (..., 3, 3) and their normals
    (MuJoCo's ray_triangle: the projections on the plane (b0, b1) normal to u decide the hit)."""
    dif = v - p[..., None, :]
    # (..., 3, 2) the vertices projected on the plane
    pl = jnp.stack([jnp.sum(dif * b0[..., None, :], -1), jnp.sum(dif * b1[..., None, :], -1)], -1)
    same = jnp.any(jnp.all(pl > 0, axis=-2) | jnp.all(pl < 0, axis=-2), axis=-1)
    a00, a01 = pl[..., 0, 0] - pl[..., 2, 0], pl[..., 1, 0] - pl[..., 2, 0]
    a10, a11 = pl[..., 0, 1] - pl[..., 2, 1], pl[..., 1, 1] - pl[..., 2, 1]
    bb0, bb1 = -pl[..., 2, 0], -pl[..., 2, 1]
    det = a00 * a11 - a01 * a10
    okd = jnp.abs(det) >= MINVAL
    det = jnp.where(okd, det, 1.0)
    t0 = (a11 * bb0 - a01 * bb1) / det
    t1 = (-a10 * bb0 + a00 * bb1) / det
    nrm = cross(v[..., 0, :] - v[..., 2, :], v[..., 1, :] - v[..., 2, :])
    denom = jnp.sum(u * nrm, -1)
    okn = jnp.abs(denom) >= MINVAL
    x = -jnp.sum((p - v[..., 2, :]) * nrm, -1) / jnp.where(okn, denom, 1.0)
    hit = ~same & okd & (t0 >= 0) & (t1 >= 0) & (t0 + t1 <= 1) & okn
    return jnp.where(hit, x, -1.0), nrm


def _ray_box_faces(half: jax.Array, center: jax.Array, p: jax.Array, u: jax.Array
                   ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """MuJoCo's ray_box on an axis-aligned box: nearest distance, its normal and the distance to
    each face (..., 6) (-x, +x, -y, +y, -z, +z; -1 where the ray misses the face)."""
    q = p - center[None, :]
    faces, best, normal = [], jnp.full(p.shape[:-1], -1.0, p.dtype), jnp.zeros_like(p)
    for axis, (i, j) in enumerate(((1, 2), (0, 2), (0, 1))):
        usable = jnp.abs(u[..., axis]) > MINVAL
        ua = jnp.where(usable, u[..., axis], 1.0)
        for side in (-1.0, 1.0):
            x = (side * half[axis] - q[..., axis]) / ua
            pi, pj = q[..., i] + x * u[..., i], q[..., j] + x * u[..., j]
            ok = usable & (x >= 0) & (jnp.abs(pi) <= half[i]) & (jnp.abs(pj) <= half[j])
            take = ok & ((best < 0) | (x < best))
            e = np.zeros(3, np.float32)
            e[axis] = side
            best = jnp.where(take, x, best)
            normal = jnp.where(take[:, None], jnp.asarray(e[None, :], p.dtype), normal)
            faces.append(jnp.where(ok, x, -1.0))
    return best, normal, jnp.stack(faces, -1)


def ray_local(size: jax.Array, data: jax.Array, adr: int, nrow: int, ncol: int, p: jax.Array, u: jax.Array
              ) -> tuple[jax.Array, jax.Array]:
    """Distance (n,) (-1 on a miss) along p + x u (n, 3) (in the height field's frame) to one
    height field and the (unnormalized) local normal there, as MuJoCo's mj_rayHfield.

    The base box, then the surface triangles, then the four sides of the box above the base. MuJoCo
    tests every triangle in the padded rectangle of cells under the ray's segment inside that box;
    a hit on a triangle lies in a cell the segment's projection crosses, so here the segment is
    cut at every grid line (nrow + ncol cuts, static) and each piece tests its cell's two triangles.
    """
    dtype = p.dtype
    sx, sy, sz, base = size[0], size[1], size[2], size[3]
    zero = jnp.zeros((), dtype)
    x, nrm = _ray_box_faces(jnp.stack([sx, sy, 0.5 * base]), jnp.stack([zero, zero, -0.5 * base]), p, u)[:2]
    top, _, faces = _ray_box_faces(jnp.stack([sx, sy, 0.5 * sz]), jnp.stack([zero, zero, 0.5 * sz]), p, u)
    # the ray's segment inside the top box
    far = jnp.max(faces, axis=-1)
    s0 = jnp.where(far > top, top, 0.0)
    s1 = jnp.where(far > top, far, top)
    # basis of the plane normal to the ray (MuJoCo's b0, b1)
    au = jnp.abs(u)
    k = jnp.where((au[..., 0] >= au[..., 1]) & (au[..., 0] >= au[..., 2]), 0,
                  jnp.where(au[..., 1] >= au[..., 2], 1, 2))
    b0 = jnp.where(jnp.arange(3)[None, :] == k[:, None], 0.0, 1.0).astype(dtype)
    uu = jnp.sum(u * u, -1, keepdims=True)
    b1 = b0 - u * jnp.sum(u * b0, -1, keepdims=True) / jnp.where(uu > 0, uu, 1.0)
    b1 = b1 / jnp.maximum(jnp.linalg.norm(b1, axis=-1, keepdims=True), MINVAL)
    b0 = cross(b1, u)
    b0 = b0 / jnp.maximum(jnp.linalg.norm(b0, axis=-1, keepdims=True), MINVAL)
    # cut the segment at the grid lines; each piece lies over one cell
    dx = 2 * sx / (ncol - 1)
    dy = 2 * sy / (nrow - 1)
    gx = jnp.arange(ncol, dtype=dtype) * dx - sx
    gy = jnp.arange(nrow, dtype=dtype) * dy - sy

    def cuts(g: jax.Array, axis: int) -> jax.Array:
        ok = jnp.abs(u[..., axis:axis + 1]) > MINVAL
        t = (g[None, :] - p[:, axis:axis + 1]) / jnp.where(ok, u[:, axis:axis + 1], 1.0)
        return jnp.where(ok, jnp.clip(t, s0[..., None], s1[..., None]), s0[..., None])

    t = jnp.sort(jnp.concatenate([s0[..., None], s1[..., None], cuts(gx, 0), cuts(gy, 1)], -1), axis=-1)
    mid = 0.5 * (t[..., 1:] + t[..., :-1])  # (..., nrow + ncol + 1)
    q = p[..., None, :] + mid[..., None] * u[..., None, :]
    c = jnp.floor((q[..., 0] + sx) / dx).astype(jnp.int32)
    r = jnp.floor((q[..., 1] + sy) / dy).astype(jnp.int32)
    valid = (c >= 0) & (c <= ncol - 2) & (r >= 0) & (r <= nrow - 2) & (top >= 0)[..., None]
    c = jnp.clip(c, 0, ncol - 2)
    r = jnp.clip(r, 0, nrow - 2)

    def vert(dr: int, dc: int) -> jax.Array:
        z = data[adr + (r + dr) * ncol + c + dc] * sz
        return jnp.stack([dx * (c + dc).astype(dtype) - sx, dy * (r + dr).astype(dtype) - sy, z], -1)

    v00, v01, v11, v10 = vert(0, 0), vert(0, 1), vert(1, 1), vert(1, 0)
    tris = jnp.stack([jnp.stack([v00, v01, v11], -2), jnp.stack([v00, v11, v10], -2)], -3)  # (n, S, 2, 3, 3)
    pe = jnp.broadcast_to(p[..., None, None, :], (*tris.shape[:-2], 3))
    ue = jnp.broadcast_to(u[..., None, None, :], pe.shape)
    be0 = jnp.broadcast_to(b0[..., None, None, :], pe.shape)
    be1 = jnp.broadcast_to(b1[..., None, None, :], pe.shape)
    xt, nt = _ray_triangle(tris, pe, ue, be0, be1)
    xt = jnp.where(valid[..., None], xt, -1.0).reshape((*xt.shape[:-2], -1))
    nt = nt.reshape((*nt.shape[:-3], -1, 3))
    hit = xt >= 0
    j = jnp.argmin(jnp.where(hit, xt, jnp.inf), axis=-1)
    xbest = jnp.take_along_axis(xt, j[..., None], -1)[..., 0]
    nbest = jnp.take_along_axis(nt, j[..., None, None], -2)[..., 0, :]
    take = jnp.any(hit, -1) & ((x < 0) | (xbest < x))
    x = jnp.where(take, xbest, x)
    nrm = jnp.where(take[..., None], nbest, nrm)
    # the four sides above the base: hit where the crossing lies below the edge's elevation
    for i in range(4):
        xi = faces[..., i]
        z = (p[..., 2] + xi * u[..., 2]) / sz
        if i < 2:
            y = (p[..., 1] + xi * u[..., 1] + sy) / dy
            y0 = jnp.clip(jnp.floor(y), 0, nrow - 2)
            col = 0 if i == 0 else ncol - 1
            i0 = adr + y0.astype(jnp.int32) * ncol + col
            i1 = i0 + ncol
        else:
            y = (p[..., 0] + xi * u[..., 0] + sx) / dx
            y0 = jnp.clip(jnp.floor(y), 0, ncol - 2)
            row = 0 if i == 2 else (nrow - 1) * ncol
            i0 = adr + y0.astype(jnp.int32) + row
            i1 = i0 + 1
        below = z < data[i0] * (y0 + 1 - y) + data[i1] * (y - y0)
        take = (top >= 0) & (xi >= 0) & ((xi < x) | (x < 0)) & below
        e = np.zeros(3, np.float32)
        e[i // 2] = -1.0 if i % 2 == 0 else 1.0
        x = jnp.where(take, xi, x)
        nrm = jnp.where(take[:, None], jnp.asarray(e[None, :], dtype), nrm)
    return x, nrm
