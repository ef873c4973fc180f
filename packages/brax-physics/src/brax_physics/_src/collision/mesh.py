"""Convex mesh geoms in collisions: MuJoCo's compiled convex hull, its support function and colliders.

MuJoCo 4.0.0 collides a mesh geom as the convex hull of its vertices (`mesh_graph`: the hull's
vertices, their neighbours and faces, built by the compiler). Vertices (`mesh_vert`) are in the
geom's frame (the compiler moves the geom to the mesh's inertial frame). Pairs:
- plane-mesh (MuJoCo's mjc_PlaneConvex): the hull vertex deepest below the plane, the hull
  polygon at that vertex whose normal points most against the plane's, pruned to MuJoCo's
  maximum-area quadrilateral (polygonQuad) starting from that vertex; its vertices within the
  margin, in polygon order: up to 4 contacts (3 on triangles). The quadrilaterals depend only on
  the hull, so they are tabulated at load.
- sphere, capsule, ellipsoid, cylinder, box and mesh against a mesh: the general convex collider
  (`convex.shape_search`, GJK + EPA, run only on the pairs that pass MuJoCo's bounding-sphere
  filter), one contact.
- capsule, cylinder, box and mesh against a mesh with `multiccd` (MuJoCo's default): the contacts
  of touching faces and edges (`collision.multicontact`), up to 4 (2 for a capsule).

The hull's vertex lists are static (numpy, padded per pair group with a repeated hull vertex, so
the support is unchanged); the vertex coordinates are the `System.mesh_vert` leaf, gathered every
step. Geoms with a mesh that collide with nothing are in no pair group and cost nothing here.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any, Final

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from brax_math import cross, safe_norm
from mujoco import mjtGeom

from brax_physics._src.collision import multicontact
from brax_physics._src.collision.convex import (
    CONVEX_TYPES,
    ROUNDED_TYPES,
    ConvexShape,
    ShapeFn,
    primitive_shape,
    shape_envelope,
    shape_search,
)
from brax_physics._src.collision.primitives import NO_CONTACT, _first_k, make_frame
from brax_physics._src.collision.types import MeshData

MESH: Final = int(mjtGeom.mjGEOM_MESH)
_PLANE: Final = int(mjtGeom.mjGEOM_PLANE)

_MAX_PLANE: Final = 4  # a quadrilateral

NCON: Final[dict[tuple[int, int], int]] = {
    (_PLANE, MESH): _MAX_PLANE,
    **{(t, MESH): 1 for t in CONVEX_TYPES},
    (MESH, MESH): 1,
}
"""Contact slots K per (type1, type2) pair with a mesh (type1 <= type2), multiccd disabled."""


def _area4(a: np.ndarray, b: np.ndarray, c: np.ndarray, d: np.ndarray) -> float:
    """Area of a quadrilateral (MuJoCo's area4)."""
    return 0.5 * float(np.linalg.norm(np.cross(d - a, b - d) + np.cross(c - b, a - c)))


def _polygon_quad(p: np.ndarray) -> tuple[int, ...]:
    """Indices of MuJoCo's polygonQuad on polygon p (n >= 4, 3): a greedy maximum-area quadrilateral."""
    n = len(p)

    def nxt(i: int) -> int:
        return 0 if i == n - 1 else i + 1

    b, c, d = 1, 2, 3
    res = (0, 1, 2, 3)
    best = _area4(p[0], p[1], p[2], p[3])
    for a in range(n):
        while (new := _area4(p[a], p[b], p[c], p[nxt(d)])) > best:
            best, d, res = new, nxt(d), (a, b, c, nxt(d))
            while (new := _area4(p[a], p[b], p[nxt(c)], p[d])) > best:
                best, c, res = new, nxt(c), (a, b, nxt(c), d)
            while (new := _area4(p[a], p[nxt(b)], p[c], p[d])) > best:
                best, b, res = new, nxt(b), (a, nxt(b), c, d)
        if b == a:
            b = nxt(b)
            if c == b:
                c = nxt(c)
                if d == c:
                    d = nxt(d)
    return res


def _plane_tables(m: mujoco.MjModel, i: int, glob: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(nhull, P, 3) normal triples and (nhull, P, 4) contact quads of mesh i (see `MeshData`)."""
    vadr, padr, npoly = int(m.mesh_vertadr[i]), int(m.mesh_polyadr[i]), int(m.mesh_polynum[i])
    verts = np.asarray(m.mesh_vert, np.float64).reshape(-1, 3)[vadr:vadr + int(m.mesh_vertnum[i])]
    local = {int(g) - vadr: k for k, g in enumerate(glob)}  # mesh vertex -> hull-local id
    polys = []
    for k in range(npoly):
        a, n = int(m.mesh_polyvertadr[padr + k]), int(m.mesh_polyvertnum[padr + k])
        polys.append([int(v) for v in m.mesh_polyvert[a:a + n]])
    normals = np.asarray(m.mesh_polynormal, np.float64).reshape(-1, 3)[padr:padr + npoly]
    width = 1
    per_vertex: list[list[int]] = []
    for g in glob:
        adr, num = int(m.mesh_polymapadr[g]), int(m.mesh_polymapnum[g])
        per_vertex.append([int(p) for p in m.mesh_polymap[adr:adr + num]])
        width = max(width, num)
    tri = np.full((len(glob), width, 3), -1, np.int32)
    quad = np.full((len(glob), width, 4), -1, np.int32)
    for s, plist in enumerate(per_vertex):
        v = int(glob[s]) - vadr
        for j, pid in enumerate(plist):
            poly = polys[pid]
            if v not in poly or not all(u in local for u in poly):
                continue
            start = poly.index(v)
            rot = poly[start:] + poly[:start]
            pts = verts[rot]
            # three vertices spanning the polygon (the farthest pair from the first, then the widest)
            j1 = int(np.argmax(np.linalg.norm(pts - pts[0], axis=1)))
            j2 = int(np.argmax(np.linalg.norm(np.cross(pts[j1] - pts[0], pts - pts[0]), axis=1)))
            nrm = np.cross(pts[j1] - pts[0], pts[j2] - pts[0])
            if np.dot(nrm, normals[pid]) < 0:
                j1, j2 = j2, j1
            tri[s, j] = [local[rot[0]], local[rot[j1]], local[rot[j2]]]
            pick = sorted(_polygon_quad(pts)) if len(rot) > 4 else list(range(len(rot)))
            quad[s, j, :len(pick)] = [local[rot[q]] for q in pick]
    return tri, quad


def _poly_table(m: mujoco.MjModel, i: int, glob: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(npoly, V) hull-local vertex ids (meshFace order, first-vertex padded) and (npoly,) counts."""
    vadr, padr, npoly = int(m.mesh_vertadr[i]), int(m.mesh_polyadr[i]), int(m.mesh_polynum[i])
    local = {int(g) - vadr: k for k, g in enumerate(glob)}
    polys = []
    for k in range(npoly):
        a, n = int(m.mesh_polyvertadr[padr + k]), int(m.mesh_polyvertnum[padr + k])
        ids = [local.get(int(v), -1) for v in m.mesh_polyvert[a:a + n]][::-1]
        if n >= 3 and min(ids) >= 0:
            polys.append(ids)
    width = max((len(p) for p in polys), default=3)
    out = np.zeros((max(len(polys), 1), width), np.int32)
    num = np.zeros(max(len(polys), 1), np.int32)
    for k, p in enumerate(polys):
        out[k] = p + [p[0]] * (width - len(p))
        num[k] = len(p)
    return out, num


def mesh_data(m: mujoco.MjModel, collided: set[int]) -> MeshData:
    """Static mesh structure of a compiled model: for the meshes in `collided` (mesh ids), hull
    vertices from `mesh_graph` (layout: numvert, numface, vert_edgeadr[numvert],
    vert_globalid[numvert], edge_localid[...], face_globalid[3 numface]) and the plane-contact
    tables from its polygons (mesh_poly*); for every mesh its triangles."""
    graph = np.asarray(m.mesh_graph, np.int32)
    hulls, tris, quads, faces, polys, pnums = [], [], [], [], [], []
    for i in range(m.nmesh):
        adr, vadr = int(m.mesh_graphadr[i]), int(m.mesh_vertadr[i])
        if adr < 0 or i not in collided:
            hulls.append(np.zeros(0, np.int32))
            tris.append(np.zeros((0, 1, 3), np.int32))
            quads.append(np.zeros((0, 1, 4), np.int32))
            polys.append(np.zeros((0, 3), np.int32))
            pnums.append(np.zeros(0, np.int32))
        else:
            nv = int(graph[adr])
            glob = graph[adr + 2 + nv: adr + 2 + 2 * nv] + vadr
            hulls.append(glob.astype(np.int32))
            tri, quad = _plane_tables(m, i, glob)
            tris.append(tri)
            quads.append(quad)
            poly, pnum = _poly_table(m, i, glob)
            polys.append(poly)
            pnums.append(pnum)
        fadr, fnum = int(m.mesh_faceadr[i]), int(m.mesh_facenum[i])
        face = np.asarray(m.mesh_face[fadr:fadr + fnum], np.int32).reshape(-1, 3)
        faces.append((face + vadr).astype(np.int32))
    h = hashlib.sha256()
    for arrs in (hulls, faces, tris, quads, polys, pnums):
        for a in arrs:
            h.update(np.asarray(a.shape, np.int64).tobytes())
            h.update(a.tobytes())
    vertadr = tuple(int(v) for v in np.asarray(m.mesh_vertadr).reshape(-1))
    vertnum = tuple(int(v) for v in np.asarray(m.mesh_vertnum).reshape(-1))
    h.update(np.asarray(vertadr + vertnum, np.int64).tobytes())
    return MeshData(vertadr, vertnum, tuple(hulls), tuple(faces), tuple(tris), tuple(quads), tuple(polys),
                    tuple(pnums), h.digest())


def unsupported_meshes(m: mujoco.MjModel, geoms: set[int]) -> list[str]:
    """Messages for mesh geoms among `geoms` (those in collision pairs) that have no hull graph."""
    out = []
    for g in sorted(geoms):
        if int(m.geom_type[g]) == MESH and int(m.mesh_graphadr[m.geom_dataid[g]]) < 0:
            name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) or f"#{g}"
            out.append(f"geom '{name}' (<geom type=\"mesh\">): its mesh has no convex hull to collide with")
    return out


def hull_rows(meshes: MeshData, mesh_ids: np.ndarray) -> np.ndarray:
    """(n, H) int32 `mesh_vert` rows of the hulls of meshes `mesh_ids` (n,), each padded to the
    largest with its first hull vertex (a repeated vertex leaves the support unchanged)."""
    hulls = [meshes.hull[int(i)] for i in mesh_ids]
    width = max(len(h) for h in hulls)
    return np.stack([np.concatenate([h, np.full(width - len(h), h[0], np.int32)]) for h in hulls])


# ----------------------------------------------------------------------------------------------
# support function


def mesh_shape(mat: jax.Array, verts: Any) -> ConvexShape:
    """ShapeFn of a mesh geom; its data is the hull's vertices (H, 3) in the geom's frame.

    The support is a dense argmax of v . d over all hull vertices: one small matmul that vectorizes
    over pairs and batches. MuJoCo hill-climbs the hull graph for meshes of 10 or more vertices
    (fewer dot products on big hulls, but a data-dependent walk); both find the same vertex up to
    exact ties.
    """
    v = jnp.asarray(verts)

    def support(d: jax.Array) -> jax.Array:
        return mat @ v[jnp.argmax(v @ (mat.T @ d))]

    return ConvexShape(support, jnp.zeros((), v.dtype), jnp.max(safe_norm(v, axis=-1)))


# ----------------------------------------------------------------------------------------------
# colliders


def _plane_mesh(pos1: jax.Array, mat1: jax.Array, pos2: jax.Array, mat2: jax.Array, verts: jax.Array,
                tri: jax.Array, quad: jax.Array, margin: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """MuJoCo's plane-mesh contacts (dist (4,), pos (4, 3), frame (4, 3, 3)).

    verts (H, 3) hull vertices in the geom's frame; tri (H, P, 3) and quad (H, P, 4) the polygon
    tables of `MeshData` (hull-local ids, -1 padded).
    """
    n = mat1[:, 2]
    world = pos2[None, :] + verts @ mat2.T
    d = (world - pos1[None, :]) @ n
    s = jnp.argmin(d)
    # the polygon at the deepest vertex facing the plane most squarely
    t = jnp.maximum(tri[s], 0)
    a, b, c = verts[t[:, 0]], verts[t[:, 1]], verts[t[:, 2]]
    pn = cross(b - a, c - a)
    norm = safe_norm(pn, axis=-1)
    facing = (pn @ (mat2.T @ n)) / jnp.where(norm > 0, norm, 1.0)
    p = jnp.argmin(jnp.where(tri[s, :, 0] >= 0, facing, jnp.inf))
    q = quad[s, p]
    qc = jnp.maximum(q, 0)
    valid = (q >= 0) & (d[qc] < margin) & (d[s] <= margin)
    idx, filled = _first_k(valid, _MAX_PLANE)
    j = qc[idx]
    dist = jnp.where(filled, d[j], NO_CONTACT)
    pos = world[j] - 0.5 * d[j][:, None] * n[None, :]
    return dist, pos, make_frame(jnp.broadcast_to(n, (_MAX_PLANE, 3)))


def _pad_table(tables: list[np.ndarray], width: int) -> np.ndarray:
    """Stack (nhull, P, k) tables into (n, width, Pmax, k), -1 padded."""
    p = max(t.shape[1] for t in tables)
    out = np.full((len(tables), width, p, tables[0].shape[2]), -1, np.int32)
    for i, t in enumerate(tables):
        out[i, :t.shape[0], :t.shape[1]] = t
    return out


def _poly_group(meshes: MeshData, mesh_ids: np.ndarray) -> tuple[jax.Array, ...]:
    """Per mesh of `mesh_ids` (n,): (n, P, V) polygon tables and (n, P) counts, padded (count 0;
    vertices repeated); (n, H) hull-vertex masks (see `hull_rows`); (n, E, 2) hull edges (hull-local
    ids) and (n, E) their masks."""
    polys = [meshes.poly[int(i)] for i in mesh_ids]
    nums = [meshes.poly_num[int(i)] for i in mesh_ids]
    p = max(a.shape[0] for a in polys)
    v = max(a.shape[1] for a in polys)
    out = np.zeros((len(polys), p, v), np.int32)
    num = np.zeros((len(polys), p), np.int32)
    for k, (a, c) in enumerate(zip(polys, nums, strict=True)):
        out[k, :a.shape[0]] = np.concatenate([a, np.repeat(a[:, :1], v - a.shape[1], axis=1)], axis=1)
        num[k, :a.shape[0]] = c
    width = max(len(meshes.hull[int(i)]) for i in mesh_ids)
    vmask = np.stack([np.arange(width) < len(meshes.hull[int(i)]) for i in mesh_ids])
    edges = []
    for a, c in zip(polys, nums, strict=True):
        es = {tuple(sorted((int(r[k]), int(r[(k + 1) % q]))))
              for r, q in zip(a, c, strict=True) for k in range(q)}
        edges.append(np.array(sorted(es), np.int32).reshape(-1, 2))
    e = max(len(x) for x in edges)
    edge = np.zeros((len(edges), e, 2), np.int32)
    emask = np.zeros((len(edges), e), bool)
    for k, x in enumerate(edges):
        edge[k, :len(x)] = x
        emask[k, :len(x)] = True
    return (jnp.asarray(out), jnp.asarray(num), jnp.asarray(vmask), jnp.asarray(edge), jnp.asarray(emask))


def collide_group(sys: Any, g: Any, geom_xpos: jax.Array, geom_xmat: jax.Array, detect: jax.Array,
                  skip: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Contacts of a pair group of a type in `NCON` (a mesh and a plane, convex geom or mesh):
    dist (npair, K), pos (npair, K, 3), frame (npair, K, 3, 3), K = NCON[(type1, type2)];
    `detect` (npair,) is margin + gap; the GJK/EPA search skips the pairs where `skip` (npair,)
    holds (MuJoCo's bounding-sphere filter drops them)."""
    meshes: MeshData = sys.meshes
    dataid = np.asarray(sys.geom_dataid, np.int32)
    i1, i2 = g.geom1, g.geom2
    m2 = dataid[i2]
    rows2 = hull_rows(meshes, m2)
    v2 = sys.mesh_vert[rows2]
    p1, r1, p2, r2 = geom_xpos[i1], geom_xmat[i1], geom_xpos[i2], geom_xmat[i2]
    if g.type1 == _PLANE:
        tri = _pad_table([meshes.plane_tri[int(i)] for i in m2], rows2.shape[1])
        quad = _pad_table([meshes.plane_quad[int(i)] for i in m2], rows2.shape[1])
        return jax.vmap(_plane_mesh)(p1, r1, p2, r2, v2, jnp.asarray(tri), jnp.asarray(quad), detect)
    iters, tol = sys.contact_pairs.ccd_iterations, sys.contact_pairs.ccd_tolerance
    shape1: ShapeFn
    if g.type1 == MESH:
        shape1, data1 = mesh_shape, sys.mesh_vert[hull_rows(meshes, dataid[i1])]
    else:
        shape1, data1 = primitive_shape(g.type1), sys.geom_size[i1]
    rounded = g.type1 in ROUNDED_TYPES
    search = shape_search(shape1, p1, r1, data1, mesh_shape, p2, r2, v2, detect, ~skip, rounded, iters, tol)
    if g.ncon_per_pair > 1:  # multiccd: MuJoCo's contacts of touching faces and edges
        dist, pos, n = jax.vmap(functools.partial(shape_envelope, shape1, shape2=mesh_shape))(
            p1, r1, data1, pos2=p2, mat2=r2, data2=v2, dist=search[0], n=search[1], c1=search[2],
            c2=search[3])
        size2 = jnp.max(safe_norm(v2, axis=-1), axis=-1)
        mesh2 = (v2, _poly_group(meshes, m2))
        feat1: Any
        if g.type1 == MESH:
            feat1, d1 = multicontact.mesh_features, (data1, _poly_group(meshes, dataid[i1]))
            size1 = jnp.max(safe_norm(data1, axis=-1), axis=-1)
        else:
            feat1, d1 = functools.partial(multicontact.primitive_features, g.type1), data1
            size1 = multicontact.bound(g.type1, data1)
        return multicontact.collide_pairs(feat1, d1, multicontact.mesh_features, mesh2, p1, r1, p2, r2,
                                          size1 + size2, detect, dist, pos, n, g.ncon_per_pair)

    def one(pos1: jax.Array, mat1: jax.Array, d1: Any, pos2: jax.Array, mat2: jax.Array, d2: jax.Array,
            found: tuple[jax.Array, ...]) -> tuple[jax.Array, jax.Array, jax.Array]:
        dist, pos, n = shape_envelope(shape1, pos1, mat1, d1, mesh_shape, pos2, mat2, d2, *found)
        return dist[None], pos[None], make_frame(n)[None]

    return jax.vmap(one)(p1, r1, data1, p2, r2, v2, search)
