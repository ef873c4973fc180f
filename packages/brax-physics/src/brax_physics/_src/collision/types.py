"""Static collision structure shared by the loader, `System` and the colliders (a leaf: no colliders).

`System` holds these as static data; keeping them here lets it import them without pulling in the
collider modules, which themselves take `System` as an argument.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True, eq=False)
class PairGroup:
    """All candidate pairs of one (type1, type2); arrays are (npair,) numpy, static under jit.

    Only what decides shapes and control flow is here; the contact parameters are mixed every step
    from the `System` leaves (`geom_friction`, ..., `pair_friction`, ...).
    """

    type1: int
    """`mujoco.mjtGeom` code of every geom1 (the lower type)."""
    type2: int
    """`mujoco.mjtGeom` code of every geom2."""
    ncon_per_pair: int
    """Fixed number of contact slots K the collider returns per pair."""
    geom1: np.ndarray
    """(npair,) int32 geom ids of the lower-type geoms."""
    geom2: np.ndarray
    """(npair,) int32 geom ids of the other geoms."""
    condim: np.ndarray
    """(npair,) int32 contact dimensionality (1, 3, 4 or 6): the pair's, or the geoms' mixed."""
    pair_id: np.ndarray
    """(npair,) int32 index of the explicit `<pair>` (into `System.pair_*`), -1 for geom-geom pairs."""
    winner: np.ndarray
    """(npair,) int32 for geom-geom pairs: 1 if geom1 has the higher priority, 2 if geom2, 0 if equal."""
    patch: tuple[int, int] = (0, 0)
    """Height-field groups: (rows, cols) of grid cells each pair scans (`hfield.group_patch`)."""

    @property
    def npair(self) -> int:
        """Number of pairs in the group."""
        return int(self.geom1.shape[0])


@dataclasses.dataclass(frozen=True, eq=False)
class CollisionPairs:
    """Candidate pairs of a model, grouped by pair type (hashable by value for use as static data:
    two loads of the same model share compiled programs)."""

    groups: tuple[PairGroup, ...]
    """One group per (type1, type2) present, in ascending type order."""
    ccd_iterations: int = 35
    """MuJoCo's `opt.ccd_iterations`: GJK and EPA iteration cap of the general convex collider."""
    ccd_tolerance: float = 1e-6
    """MuJoCo's `opt.ccd_tolerance`: GJK and EPA tolerance of the general convex collider."""

    def _key(self) -> tuple[object, ...]:
        groups = tuple(
            (g.type1, g.type2, g.ncon_per_pair, g.patch,
             *(a.tobytes() for a in (g.geom1, g.geom2, g.condim, g.pair_id, g.winner)))
            for g in self.groups
        )
        return (self.ccd_iterations, self.ccd_tolerance, *groups)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CollisionPairs) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    @property
    def ncon(self) -> int:
        """Total number of contact slots (static)."""
        return sum(g.npair * g.ncon_per_pair for g in self.groups)


@dataclasses.dataclass(frozen=True, eq=False)
class MeshData:
    """Static structure of a model's meshes (numpy, one entry per mesh), compared by content."""

    vertadr: tuple[int, ...]
    """First row of each mesh in `mesh_vert` (MuJoCo's mesh_vertadr)."""
    vertnum: tuple[int, ...]
    """Number of vertices of each mesh (MuJoCo's mesh_vertnum)."""
    hull: tuple[np.ndarray, ...]
    """Per mesh: (nhull,) int32 rows of `mesh_vert` of its convex hull's vertices (mesh_graph's
    vert_globalid; empty without a hull graph)."""
    face: tuple[np.ndarray, ...]
    """Per mesh: (nface, 3) int32 rows of `mesh_vert` of its triangles (mesh_face, for rays)."""
    plane_tri: tuple[np.ndarray, ...]
    """Per mesh: (nhull, P, 3) int32 hull-local ids of three vertices of each polygon at each hull
    vertex, ordered so that their cross product is the polygon's outward normal; -1 padded."""
    plane_quad: tuple[np.ndarray, ...]
    """Per mesh: (nhull, P, 4) int32 hull-local ids of the plane contacts of each polygon at each
    hull vertex (MuJoCo's polygonQuad from that vertex, in polygon order); -1 padded."""
    poly: tuple[np.ndarray, ...] = ()
    """Per mesh: (npoly, V) int32 hull-local ids of each hull polygon's vertices in MuJoCo's
    meshFace order (clockwise about the outward normal), padded with the polygon's first vertex."""
    poly_num: tuple[np.ndarray, ...] = ()
    """Per mesh: (npoly,) int32 vertex count of each hull polygon."""
    digest: bytes = b""
    """SHA-256 of the above (equality and hash)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MeshData) and self.digest == other.digest

    def __hash__(self) -> int:
        return hash(self.digest)

    @property
    def nmesh(self) -> int:
        """Number of meshes."""
        return len(self.vertadr)
