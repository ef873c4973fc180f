"""MuJoCo's multiccd: several contacts where flat faces or straight edges of two convex geoms touch.

With `multiccd` enabled (MuJoCo's default), MuJoCo 4.0.0 turns the one GJK/EPA contact of a pair
of capsules, cylinders, boxes and meshes (any two of them that it collides with its general convex
collider: capsule-cylinder, cylinder-cylinder, cylinder-box, and each of them against a mesh) into
the clipped contact polygon, whenever the two geoms' features along the EPA normal are flat:

- the features: a box's and a mesh hull's vertices on their support planes (up to 3 of them: the
  feature's dimension) and the polygons that contain them; a cylinder's cap (a 16-gon in the
  geom's frame, vertices at multiples of 22.5 degrees) when the cap or its rim is deepest, its
  side line (the segment of the side at the support angle, exact, not polygonal) when the side
  faces the normal; a capsule's core segment moved by its radius along the normal (an edge, or
  its deeper end when tilted; a capsule has no face);
- a polygon of each geom facing the other within mjFACE_TOL: geom 2's polygon clipped by the side
  planes of geom 1's (Sutherland-Hodgman in MuJoCo's vertex order), then pruned to the points not
  farther from geom 1's plane than the margin; more than 4 left: MuJoCo's polygonQuad (greedy,
  from the first vertex) maximizing the area of the quadrilateral in polygon order (its source
  on record measures another area; this one agrees with MuJoCo 4.0.0 far more often, and where
  they differ it is at near-ties of the greedy walk: same count, normal and plane);
- else an edge of the lower-dimensional feature lying in a candidate polygon of the other within
  mjEDGE_TOL: the edge clipped by that polygon (its two farthest points; one clipped point can
  appear twice, as in MuJoCo);
- each point's distance is its own (from the clipping polygon's plane), not the EPA depth.

Probed against MuJoCo 4.0.0 (its C source on record predates these rules): a cylinder on a box
gives the cap's 4 rim points (tilted within mjFACE_TOL: each at its own depth), lying on it (tilted
up to mjEDGE_TOL) the two ends of its side line, a box edge or a capsule across a cap's rim its
points on the cap; with a margin, the same contacts for pairs separated within it.

Only the pairs within the margin are clipped (`collide_pairs`: on constants, a few at a time, so
pairs that do not touch cost one loop test); the points found are then carried rigidly with their
geoms, which gives them the gradients of GJK/EPA's witness points (none through the geom sizes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from brax_math import cross, safe_norm
from mujoco import mjtGeom

from brax_physics._src.collision.convex import run_masked
from brax_physics._src.collision.primitives import NO_CONTACT, make_frame
from brax_physics._src.lowering import settings

MULTI: Final = 4
"""Contact slots of a pair with faces on both sides (the clipped polygon's quadrilateral)."""

_CAPSULE: Final = int(mjtGeom.mjGEOM_CAPSULE)
_CYLINDER: Final = int(mjtGeom.mjGEOM_CYLINDER)
_BOX: Final = int(mjtGeom.mjGEOM_BOX)
_MESH: Final = int(mjtGeom.mjGEOM_MESH)

NCON: Final[dict[tuple[int, int], int]] = {
    (_CAPSULE, _CYLINDER): 2, (_CYLINDER, _CYLINDER): MULTI, (_CYLINDER, _BOX): MULTI,
    (_CAPSULE, _MESH): 2, (_CYLINDER, _MESH): MULTI, (_BOX, _MESH): MULTI, (_MESH, _MESH): MULTI,
}
"""Contact slots per (type1, type2) pair with multiccd enabled: a capsule has only an edge (2 points)."""

_FACE_TOL: Final = 0.996  # MuJoCo's mjFACE_TOL: faces are aligned when their normals' dot is below -this
_EDGE_TOL: Final = 0.0888  # MuJoCo's mjEDGE_TOL: an edge lies in a face when |edge . normal| is below this
_MINVAL: Final = 1e-15
_T_TOL: Final = 1e-5  # float32 slack of an edge's crossing parameter (MuJoCo: exactly [0, 1] in float64)
FEATURE_TOL: Final = 1e-4
"""Vertices this close to the support plane (relative to the pair's size) belong to one feature."""
_SIDES: Final = 16  # a cylinder cap's polygon
_CAP: Final = np.stack([np.cos(np.arange(_SIDES) * 2 * np.pi / _SIDES),
                 np.sin(np.arange(_SIDES) * 2 * np.pi / _SIDES)], axis=1)  # from angle 0, counter-clockwise

# box faces in MuJoCo's boxFace order (+x, -x, +y, -y, +z, -z), vertices clockwise about the normal
_BOX_FACES: Final = np.array([
    [[1, 1, 1], [1, 1, -1], [1, -1, -1], [1, -1, 1]],
    [[-1, 1, -1], [-1, 1, 1], [-1, -1, 1], [-1, -1, -1]],
    [[-1, 1, -1], [1, 1, -1], [1, 1, 1], [-1, 1, 1]],
    [[-1, -1, 1], [1, -1, 1], [1, -1, -1], [-1, -1, -1]],
    [[-1, 1, 1], [1, 1, 1], [1, -1, 1], [-1, -1, 1]],
    [[1, 1, -1], [-1, 1, -1], [-1, -1, -1], [1, -1, -1]],
], np.float64)
_BOX_CORNERS: Final = np.array(
    [[1 if v & 1 else -1, 1 if v & 2 else -1, 1 if v & 4 else -1] for v in range(8)], np.float64)
_BOX_EDGES: Final = np.array([(a, a | b) for a in range(8) for b in (1, 2, 4) if not a & b], np.int32)


class Faces(NamedTuple):
    """A geom's polygons in the world: vertices (F, V, 3) (clockwise about the outward normal,
    padded with the first), counts (F,) (0: padding), outward unit normals (F, 3)."""

    vert: jax.Array
    num: jax.Array
    normal: jax.Array


class Features(NamedTuple):
    """What a geom offers the multi-contact along a direction, in the world: its polygons, which of
    them contain the feature, the feature's dimension (1 vertex, 2 edge, 3 face), and the edges at
    the feature (E, 2, 3) (endpoints) with a mask (E,)."""

    faces: Faces
    cand: jax.Array
    dim: jax.Array
    edge: jax.Array
    emask: jax.Array


def _newell(vert: jax.Array) -> jax.Array:
    """Outward unit normals (F, 3) of clockwise polygons (F, V, 3) (Newell's method)."""
    s = jnp.sum(cross(vert, jnp.roll(vert, -1, axis=1)), axis=1)
    return -s / jnp.maximum(safe_norm(s, axis=-1), 1e-12)[:, None]


class Polytope(NamedTuple):
    """A box or mesh hull in the world: vertices (H, 3) with a mask (H,) (padding), its polygons,
    and its edges (E, 2) (vertex ids) with a mask (E,)."""

    vert: jax.Array
    vmask: jax.Array
    faces: Faces
    edge: jax.Array
    emask: jax.Array


def box_polytope(pos: jax.Array, mat: jax.Array, size: jax.Array) -> Polytope:
    """A box (half-sizes `size` (3,)) at pos (3,), mat (3, 3) as a polytope."""
    fv = pos[None, None, :] + (jnp.asarray(_BOX_FACES, size.dtype) * size[None, None, :]) @ mat.T
    vert = pos[None, :] + (jnp.asarray(_BOX_CORNERS, size.dtype) * size[None, :]) @ mat.T
    return Polytope(vert, jnp.ones(8, bool), Faces(fv, jnp.full(6, 4, jnp.int32), _newell(fv)),
                    jnp.asarray(_BOX_EDGES), jnp.ones(12, bool))


def mesh_polytope(pos: jax.Array, mat: jax.Array, verts: jax.Array, poly: jax.Array, num: jax.Array,
                  vmask: jax.Array, edge: jax.Array, emask: jax.Array) -> Polytope:
    """A mesh hull (vertices (H, 3) in the geom's frame, its polygon and edge tables) as a polytope."""
    fv = pos[None, None, :] + verts[poly] @ mat.T
    return Polytope(pos[None, :] + verts @ mat.T, vmask, Faces(fv, num, _newell(fv)), edge, emask)


def polytope_features(p: Polytope, d: jax.Array, tol: jax.Array) -> Features:
    """A polytope's feature deepest along d: its vertices within `tol` of the support plane (their
    number capped at 3 is MuJoCo's simplex dimension), the polygons that contain them all, and the
    edges at the feature (both ends on it for an edge or face, one end for a vertex)."""
    vert = jax.lax.stop_gradient(p.vert)
    sv = jnp.where(p.vmask, vert @ d, -jnp.inf)
    tied = p.vmask & (sv >= jnp.max(sv) - tol)
    dim = jnp.minimum(jnp.sum(tied), 3)
    fv = jax.lax.stop_gradient(p.faces.vert[:, 0])
    fn = jax.lax.stop_gradient(p.faces.normal)
    off = jnp.abs(vert @ fn.T - jnp.sum(fv * fn, axis=1)[None, :])  # (H, F)
    cand = (p.faces.num >= 3) & jnp.all(~tied[:, None] | (off <= tol), axis=0)
    a, b = tied[p.edge[:, 0]], tied[p.edge[:, 1]]
    emask = p.emask & jnp.where(dim >= 2, a & b, a | b)
    return Features(p.faces, cand, dim, p.vert[p.edge], emask)


def cylinder_features(pos: jax.Array, mat: jax.Array, size: jax.Array, d: jax.Array) -> Features:
    """A cylinder's (radius, half-height) feature deepest along d: its side line (an edge) if its
    axis is more than 45 degrees from d, else its cap (a 16-gon). MuJoCo 4.0.0 treats a rim point
    as the cap (a box edge or a capsule crossing the rim is clipped by the cap) and a slightly
    tilted side as its side line (clipped by a face within mjEDGE_TOL, up to 5 degrees)."""
    r, h = size[0], size[1]
    axis = mat[:, 2]
    c = jax.lax.stop_gradient(jnp.dot(axis, d))
    side = jnp.abs(c) < np.sqrt(0.5)
    # caps from angle 0 (MuJoCo's vertex order): top (outward +axis) clockwise about +axis, bottom
    # counter-clockwise
    ring = jnp.asarray(_CAP, size.dtype) * r
    cw = jnp.roll(ring[::-1], 1, axis=0)
    top = pos[None, :] + jnp.concatenate([cw, jnp.full((_SIDES, 1), h)], axis=1) @ mat.T
    bottom = pos[None, :] + jnp.concatenate([ring, jnp.full((_SIDES, 1), -h)], axis=1) @ mat.T
    faces = Faces(jnp.stack([top, bottom]), jnp.full(2, _SIDES, jnp.int32), jnp.stack([axis, -axis]))
    cand = ~side & jnp.stack([c > 0, c <= 0])
    # the side line at the support angle: the direction of d square to the axis
    u = d - c * axis
    u = u / jnp.maximum(safe_norm(u), 1e-12)
    rim = pos + r * u
    edge = jnp.stack([rim - h * axis, rim + h * axis])[None]
    return Features(faces, cand, jnp.where(side, 2, 3), edge, side[None])


def capsule_features(pos: jax.Array, mat: jax.Array, size: jax.Array, d: jax.Array, tol: jax.Array
                     ) -> Features:
    """A capsule's (radius, half-length) feature deepest along d: its core segment moved by the
    radius along d, an edge if it is square to d within `tol`, else its deeper end (a vertex)."""
    r, h = size[0], size[1]
    axis = mat[:, 2]
    c = jax.lax.stop_gradient(jnp.dot(axis, d))
    dim = jnp.where(2 * jax.lax.stop_gradient(h) * jnp.abs(c) <= tol, 2, 1)
    base = pos + r * d
    edge = jnp.stack([base - h * axis, base + h * axis])[None]
    none = Faces(jnp.broadcast_to(pos, (1, 3, 3)), jnp.zeros(1, jnp.int32), jnp.zeros((1, 3), pos.dtype))
    return Features(none, jnp.zeros(1, bool), dim, edge, jnp.ones(1, bool))


def bound(gtype: int, size: jax.Array) -> jax.Array:
    """A size scale (...) of primitive geoms of one type (sizes (..., 3)) for `FEATURE_TOL`."""
    if gtype == _BOX:
        return safe_norm(size, axis=-1)
    return size[..., 0] + size[..., 1] if gtype == _CAPSULE else safe_norm(size[..., :2], axis=-1)


def mesh_features(pos: jax.Array, mat: jax.Array, data: tuple[jax.Array, tuple[jax.Array, ...]], d: jax.Array,
                  tol: jax.Array) -> Features:
    """The features of a mesh hull (data: its vertices (H, 3) and `mesh_polytope`'s tables) along d."""
    return polytope_features(mesh_polytope(pos, mat, data[0], *data[1]), d, tol)


def primitive_features(gtype: int, pos: jax.Array, mat: jax.Array, size: jax.Array, d: jax.Array,
                       tol: jax.Array) -> Features:
    """The features of a capsule, cylinder or box (static `gtype`) along d."""
    if gtype == _BOX:
        return polytope_features(box_polytope(pos, mat, size), d, tol)
    if gtype == _CYLINDER:
        return cylinder_features(pos, mat, size, d)
    if gtype == _CAPSULE:
        return capsule_features(pos, mat, size, d, tol)
    raise ValueError(f"no multi-contact features for geom type {gtype}")


def polygon_quad(p: jax.Array, n: jax.Array) -> jax.Array:
    """Indices (4,) of MuJoCo's polygonQuad (greedy maximum-area quadrilateral) of the polygon
    p[:n] (n >= 4); a while loop over MuJoCo's nested loops as a small state machine."""
    p = jax.lax.stop_gradient(p)
    n = n.astype(jnp.int32)

    def nxt(i: jax.Array) -> jax.Array:
        return jnp.where(i >= n - 1, 0, i + 1).astype(jnp.int32)

    def area(a: jax.Array, b: jax.Array, c: jax.Array, d: jax.Array) -> jax.Array:
        return 0.5 * safe_norm(cross(p[c] - p[a], p[d] - p[b]))

    def cond(s: tuple[jax.Array, ...]) -> jax.Array:
        return s[0] < n

    def body(s: tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
        a, b, c, d, phase, m, res = s
        cand = jnp.stack([jnp.stack([a, b, c, nxt(d)]), jnp.stack([a, b, nxt(c), d]),
                          jnp.stack([a, nxt(b), c, d])])
        q = cand[jnp.clip(phase, 0, 2)]
        na = area(q[0], q[1], q[2], q[3])
        up = (phase < 3) & (na > m)
        # phase 3: the end of one pass of a (MuJoCo's b == a, c == b, d == c bumps)
        b3 = jnp.where(b == a, nxt(b), b)
        c3 = jnp.where((b == a) & (c == b3), nxt(c), c)
        d3 = jnp.where((b == a) & (c == b3) & (d == c3), nxt(d), d)
        end = phase == 3
        later = jnp.where(phase == 1, jnp.where(up, 1, 2), jnp.where(up, 2, 0))
        nphase = jnp.where(end, 0, jnp.where(phase == 0, jnp.where(up, 1, 3), later))
        out = (jnp.where(end, a + 1, a), jnp.where(end, b3, jnp.where(up, q[1], b)),
               jnp.where(end, c3, jnp.where(up, q[2], c)), jnp.where(end, d3, jnp.where(up, q[3], d)),
               nphase, jnp.where(up, q, res))
        a, b, c, d, nphase, res = (x.astype(jnp.int32) for x in out)
        return a, b, c, d, nphase, jnp.where(up, na, m), res

    i = [jnp.asarray(k, jnp.int32) for k in range(4)]
    init: tuple[jax.Array, ...] = (i[0], i[1], i[2], i[3], jnp.zeros((), jnp.int32), area(*i),
                                   jnp.arange(4, dtype=jnp.int32))
    return jax.lax.while_loop(cond, body, init)[-1]


def clip(f1: jax.Array, k1: jax.Array, n1: jax.Array, f2: jax.Array, k2: jax.Array, reach: jax.Array
         ) -> tuple[jax.Array, jax.Array]:
    """MuJoCo's polygonClip: polygon f2[:k2] clipped (Sutherland-Hodgman, in MuJoCo's vertex order)
    by the side planes of polygon f1[:k1] (normal n1), then pruned to the vertices at most `reach`
    (the margin) above f1's plane. Returns the vertices (B, 3) (compacted to the front) and their
    count."""
    v1, v2 = f1.shape[0], f2.shape[0]
    size = v1 + v2  # each clipping plane adds at most one vertex to a convex polygon
    idx = jnp.arange(size)

    def compact(pts: jax.Array, val: jax.Array) -> jax.Array:
        """The valid points of pts (m, 3) in order, at the front of a (size, 3) array."""
        slot = jnp.where(val, jnp.cumsum(val) - 1, size)
        return jnp.zeros((size, 3), pts.dtype).at[slot].set(pts, mode="drop")

    def edge(e: jax.Array, c: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        poly, cnt = c
        a = f1[e]
        b = f1[jnp.where(e + 1 < k1, e + 1, 0)]
        cr = cross(b - a, n1)
        pn = cr / jnp.maximum(safe_norm(cr), 1e-12)
        q = poly[jnp.where(idx < cnt - 1, idx + 1, 0)]
        in1 = (poly - a[None, :]) @ pn > -_MINVAL
        in2 = (q - a[None, :]) @ pn > -_MINVAL
        pq = q - poly
        den = pq @ pn
        ok = den != 0
        t = (jnp.dot(pn, a) - poly @ pn) / jnp.where(ok, den, 1.0)
        x = poly + t[:, None] * pq
        live = idx < cnt
        xval = live & (in1 != in2) & ok & (t >= -_T_TOL) & (t <= 1 + _T_TOL)
        qval = live & in2
        pts = jnp.stack([x, q], axis=1).reshape(2 * size, 3)
        val = jnp.stack([xval, qval], axis=1).reshape(2 * size)
        use = e < k1
        return (jnp.where(use, compact(pts, val), poly),
                jnp.where(use, jnp.minimum(jnp.sum(val), size), cnt).astype(cnt.dtype))

    start = jnp.concatenate([f2, jnp.broadcast_to(f2[:1], (v1, 3))])
    poly, cnt = jax.lax.fori_loop(0, v1, edge, (start, jnp.asarray(k2, jnp.int32)))
    depth = (poly - f1[:1]) @ n1
    keep = (idx < cnt) & (depth <= reach)
    return compact(poly, keep), jnp.sum(keep)


class Clipped(NamedTuple):
    """A pair's multi-contact, found on constants and stored in its geoms' frames so that it can be
    carried rigidly with them: `point` (4, 3) on geom 1 if `on1` else on geom 2, the clipping
    plane (a point `plane` and unit normal `plane_n`) in the other geom's frame, the contact
    `normal` (3,) (world, geom 1 to geom 2) and `shift` (3,), the world direction from a point
    to its contact position per unit of -dist / 2."""

    found: jax.Array
    valid: jax.Array
    on1: jax.Array
    point: jax.Array
    plane: jax.Array
    plane_n: jax.Array
    normal: jax.Array
    shift: jax.Array


def contacts(f1: Features, f2: Features, n: jax.Array, reach: jax.Array, pos1: jax.Array, mat1: jax.Array,
             pos2: jax.Array, mat2: jax.Array) -> Clipped:
    """MuJoCo's multicontact (on constants) from the contact normal n (geom 1 to geom 2) and the
    features of geom 1 (at pos1, mat1) along n and of geom 2 along -n: a polygon of each facing the
    other within mjFACE_TOL gives the clipped polygon (up to 4 points: MuJoCo's polygonQuad
    beyond); else an edge of the lower-dimensional feature lying in a candidate polygon of the
    other within mjEDGE_TOL gives the clipped edge (up to 2 points). `reach` is the margin (points
    up to it apart count)."""
    sg = jax.lax.stop_gradient
    f1, f2, n, reach, pos1, mat1, pos2, mat2 = sg((f1, f2, n, reach, pos1, mat1, pos2, mat2))
    fn1, fn2 = f1.faces.normal, f2.faces.normal
    dots = jnp.where(f1.cand[:, None] & f2.cand[None, :], fn1 @ fn2.T, jnp.inf)
    best = jnp.argmin(dots)
    fi, fj = best // dots.shape[1], best % dots.shape[1]
    face_face = dots[fi, fj] < -_FACE_TOL

    def unit(e: jax.Array) -> jax.Array:
        v = e[:, 1] - e[:, 0]
        return v / jnp.maximum(safe_norm(v, axis=-1), 1e-12)[:, None]

    # edge of geom 1 in a face of geom 2, or edge of geom 2 in a face of geom 1
    a1 = jnp.where(f1.emask[:, None] & f2.cand[None, :], jnp.abs(unit(f1.edge) @ fn2.T), jnp.inf)  # (E1, F2)
    a2 = jnp.where(f2.emask[:, None] & f1.cand[None, :], jnp.abs(unit(f2.edge) @ fn1.T), jnp.inf)  # (E2, F1)
    b1, b2 = jnp.argmin(a1), jnp.argmin(a2)
    edge1 = (f1.dim < 3) & (f1.dim <= f2.dim)
    edge2 = ~edge1 & (f2.dim < 3)
    found1 = edge1 & (a1.reshape(-1)[b1] < _EDGE_TOL)
    found2 = edge2 & (a2.reshape(-1)[b2] < _EDGE_TOL)
    ei1, ef2 = b1 // a1.shape[1], b1 % a1.shape[1]
    ei2, ef1 = b2 // a2.shape[1], b2 % a2.shape[1]
    # the clipping face (of geom a) and the clipped polygon (a face or an edge of the other)
    use1 = ~face_face & found1  # geom 1's edge clipped by geom 2's face
    width = max(f1.faces.vert.shape[1], f2.faces.vert.shape[1], 2)

    def padv(f: jax.Array) -> jax.Array:
        return jnp.concatenate([f, jnp.broadcast_to(f[:1], (width - f.shape[0], 3))])

    g1 = jnp.where(face_face, fi, ef1)  # geom 1's clipping face unless its edge is clipped
    clip_face = jnp.where(use1, padv(f2.faces.vert[ef2]), padv(f1.faces.vert[g1]))
    clip_num = jnp.where(use1, f2.faces.num[ef2], f1.faces.num[g1])
    clip_n = jnp.where(use1, f2.faces.normal[ef2], f1.faces.normal[g1])
    clipped = jnp.where(face_face, padv(f2.faces.vert[fj]),
                        jnp.where(use1, padv(f1.edge[ei1]), padv(f2.edge[ei2])))
    clipped_num = jnp.where(face_face, f2.faces.num[fj], 2)
    poly, cnt = clip(clip_face, clip_num, clip_n, clipped, clipped_num, reach)
    # the two most distant points of a clipped edge
    live = jnp.arange(poly.shape[0]) < cnt
    sq = jnp.sum((poly[:, None] - poly[None, :]) ** 2, axis=-1)
    d2 = jnp.where(live[:, None] & live[None, :], sq, -1.0)
    far = jnp.argmax(jnp.triu(d2 + 1.0, 1).reshape(-1))
    far_pair = jnp.stack([far // d2.shape[1], far % d2.shape[1], 0, 0]).astype(jnp.int32)
    sel = jnp.where(face_face, jnp.where(cnt > MULTI, polygon_quad(poly, cnt), jnp.arange(MULTI)),
                    jnp.where(cnt > 2, far_pair, jnp.arange(MULTI)))
    nvalid = jnp.where(face_face, jnp.minimum(cnt, MULTI), jnp.minimum(cnt, 2))
    # points on the clipped feature (geom 1's edge, else geom 2's face or edge); the normal points
    # from geom 1 to geom 2; the contact point is midway between the point and the clipping plane
    normal = jnp.where(face_face, -f2.faces.normal[fj], jnp.where(use1, -clip_n, clip_n))
    pa, ma = jnp.where(use1, pos1, pos2), jnp.where(use1, mat1, mat2)
    pb, mb = jnp.where(use1, pos2, pos1), jnp.where(use1, mat2, mat1)
    return Clipped(
        found=(face_face | found1 | found2) & (cnt > 0), valid=jnp.arange(MULTI) < nvalid, on1=use1,
        point=(poly[sel] - pa[None, :]) @ ma, plane=mb.T @ (clip_face[0] - pb), plane_n=mb.T @ clip_n,
        normal=normal, shift=jnp.where(use1, -normal, normal))


def place(c: Clipped, pos1: jax.Array, mat1: jax.Array, pos2: jax.Array, mat2: jax.Array
          ) -> tuple[jax.Array, jax.Array]:
    """The clipped points' distances (4,) and contact positions (4, 3), carried rigidly with the
    geoms (gradients as for GJK/EPA's witness points)."""
    pa, ma = jnp.where(c.on1, pos1, pos2), jnp.where(c.on1, mat1, mat2)
    pb, mb = jnp.where(c.on1, pos2, pos1), jnp.where(c.on1, mat2, mat1)
    p = pa[None, :] + c.point @ ma.T
    d = (p - (pb + mb @ c.plane)[None, :]) @ (mb @ c.plane_n)
    return d, p - 0.5 * d[:, None] * c.shift[None, :]


def collide_pairs(features1: Callable[..., Features], data1: Any, features2: Callable[..., Features],
                  data2: Any, pos1: jax.Array, mat1: jax.Array, pos2: jax.Array, mat2: jax.Array,
                  scale: jax.Array, margin: jax.Array, dist: jax.Array, pos: jax.Array, n: jax.Array,
                  k: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The k contact slots of n pairs under multiccd: dist (n, k), pos (n, k, 3), frame (n, k, 3, 3).

    `featuresX(pos, mat, data, d, tol)` gives a geom's `Features` along d from its per-pair data
    `dataX` (leading n); `scale` (n,) is the pair's size for `FEATURE_TOL`; dist (n,), pos (n, 3)
    and n (n, 3) are GJK/EPA's contact (with gradients). Only the pairs within the margin are
    clipped (on constants, the `Lowering`'s `clip_chunk` at a time); the points then move rigidly
    with their geoms.
    """
    sg = jax.lax.stop_gradient

    def one(p1: jax.Array, m1: jax.Array, d1: Any, p2: jax.Array, m2: jax.Array, d2: Any, mg: jax.Array,
            nn: jax.Array, sc: jax.Array) -> Clipped:
        tol = FEATURE_TOL * sc
        f1 = features1(p1, m1, d1, nn, tol)
        f2 = features2(p2, m2, d2, -nn, tol)
        return contacts(f1, f2, nn, mg, p1, m1, p2, m2)

    npair = dist.shape[0]
    dt = pos1.dtype
    z3 = jnp.zeros((npair, 3), dt)
    fill = Clipped(jnp.zeros(npair, bool), jnp.zeros((npair, MULTI), bool), jnp.zeros(npair, bool),
                   jnp.zeros((npair, MULTI, 3), dt), z3, z3, z3, z3)
    args = sg((pos1, mat1, data1, pos2, mat2, data2, margin, n, scale))
    found = run_masked(one, sg(dist) < sg(margin), args, fill, settings.current().clip_chunk)

    def slots(c: Clipped, p1: jax.Array, m1: jax.Array, p2: jax.Array, m2: jax.Array, dist: jax.Array,
              pos: jax.Array, n: jax.Array, margin: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        fd, fpos = place(c, p1, m1, p2, m2)
        use = c.found & (dist < margin)
        one_d = jnp.concatenate([dist[None], jnp.full(k - 1, NO_CONTACT, dist.dtype)])
        d = jnp.where(use, jnp.where(c.valid[:k], fd[:k], NO_CONTACT), one_d)
        p = jnp.where(use, fpos[:k], jnp.broadcast_to(pos, (k, 3)))
        return d, p, make_frame(jnp.broadcast_to(jnp.where(use, c.normal, n), (k, 3)))

    out: tuple[jax.Array, jax.Array, jax.Array] = jax.vmap(slots)(found, pos1, mat1, pos2, mat2, dist, pos, n,
                                                                   margin)
    return out
