"""Load-time collision candidates: MuJoCo's static broadphase filter, grouped by pair type (numpy).

Everything here runs once per model on a compiled `mujoco.MjModel`; the result holds static
index arrays grouped by pair type (geoms, condim, explicit pair index, priority winner), so that
`collide` makes one vmapped collider call per pair type and mixes the contact parameters from the
`System` leaves at run time.
"""

from __future__ import annotations

import mujoco
import numpy as np

from brax_physics._src.collision.convex import COLLIDERS, CONVEX_PAIRS
from brax_physics._src.collision.hfield import HFIELD_PAIRS, group_patch
from brax_physics._src.collision.mesh import NCON as MESH_NCON
from brax_physics._src.collision.mesh import unsupported_meshes
from brax_physics._src.collision.multicontact import NCON as MULTICCD_NCON
from brax_physics._src.collision.types import CollisionPairs, PairGroup
from brax_physics._src.mjenum import keyword


def _geom_name(m: mujoco.MjModel, g: int) -> str:
    """Geom name, or `#id` for unnamed geoms."""
    name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g)
    return f"'{name}'" if name else f"#{g}"


def _pair_name(types: tuple[int, int]) -> str:
    """MJCF names of a pair of geom types, e.g. 'plane-sphere'."""
    return f"{keyword(mujoco.mjtGeom, types[0])}-{keyword(mujoco.mjtGeom, types[1])}"


def _body_pair_filtered(m: mujoco.MjModel, b1: int, b2: int, filterparent: bool) -> bool:
    """True if MuJoCo's weld / parent-child rules skip every dynamic contact between two bodies."""
    w1, w2 = int(m.body_weldid[b1]), int(m.body_weldid[b2])
    if w1 == w2:
        return True
    if m.body_dofnum[w1] == 0 and m.body_dofnum[w2] == 0:
        return True  # both dof-less (world, static or mocap): no force can move either
    wp1 = int(m.body_weldid[m.body_parentid[w1]])
    wp2 = int(m.body_weldid[m.body_parentid[w2]])
    # Children of the world still collide with world geoms (the world exception).
    return filterparent and w1 != 0 and w2 != 0 and (w1 == wp2 or w2 == wp1)


def dynamic_pairs(m: mujoco.MjModel) -> list[tuple[int, int]]:
    """Geom pairs (g1 < g2 by id) that pass MuJoCo's dynamic broadphase filter, excluding <pair>s."""
    if m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_CONTACT:
        return []
    filterparent = not (m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_FILTERPARENT)
    excluded = {int(s) for s in np.asarray(m.exclude_signature).reshape(-1)}
    pair_geoms = zip(np.asarray(m.pair_geom1).reshape(-1), np.asarray(m.pair_geom2).reshape(-1), strict=True)
    explicit = {(min(int(a), int(b)), max(int(a), int(b))) for a, b in pair_geoms}
    contype = np.asarray(m.geom_contype)
    conaff = np.asarray(m.geom_conaffinity)
    gtype = np.asarray(m.geom_type)
    body = np.asarray(m.geom_bodyid)
    # MuJoCo has no collider for plane-plane, plane-hfield and hfield-hfield: never tested
    flat = (int(mujoco.mjtGeom.mjGEOM_PLANE), int(mujoco.mjtGeom.mjGEOM_HFIELD))
    out = []
    for g1 in range(m.ngeom):
        for g2 in range(g1 + 1, m.ngeom):
            if not ((contype[g1] & conaff[g2]) or (contype[g2] & conaff[g1])):
                continue
            if gtype[g1] in flat and gtype[g2] in flat:
                continue
            b1, b2 = int(body[g1]), int(body[g2])
            if _body_pair_filtered(m, b1, b2, filterparent):
                continue
            if (min(b1, b2) << 16) + max(b1, b2) in excluded:
                continue
            if (g1, g2) in explicit:
                continue  # an explicit <pair> replaces the dynamic contact
            out.append((g1, g2))
    return out


def collision_pairs(m: mujoco.MjModel) -> CollisionPairs:
    """Candidate pairs of a compiled model, grouped by pair type, with their static condim.

    Raises ValueError for a candidate pair whose types have no collider (naming both geoms), and
    for `override` contact parameters, which are not supported.
    """
    if m.opt.enableflags & mujoco.mjtEnableBit.mjENBL_OVERRIDE:
        raise ValueError("option flag override='enable' (o_margin/o_solref/...) is not supported")
    gtype = np.asarray(m.geom_type)
    prio = np.asarray(m.geom_priority)
    condims = np.asarray(m.geom_condim)
    rows: dict[tuple[int, int], list[tuple[int, int, int, int, int]]] = {}
    ncon = {**{k: v[1] for k, v in COLLIDERS.items()}, **MESH_NCON}
    flat = (int(mujoco.mjtGeom.mjGEOM_PLANE), int(mujoco.mjtGeom.mjGEOM_HFIELD))
    if not m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_MULTICCD:
        ncon.update(MULTICCD_NCON)  # touching faces and edges (collision.multicontact)

    def add(g1: int, g2: int, pair_id: int) -> None:
        if gtype[g1] > gtype[g2]:
            g1, g2 = g2, g1
        key = (int(gtype[g1]), int(gtype[g2]))
        if key[0] in flat and key[1] in flat:
            return  # MuJoCo has no collider for plane/hfield against plane/hfield, even in a <pair>
        if key not in ncon and key not in HFIELD_PAIRS:
            supported = sorted({*ncon, *HFIELD_PAIRS})
            raise ValueError(
                f"unsupported collision pair {_pair_name(key)} between geoms {_geom_name(m, g1)} and "
                f"{_geom_name(m, g2)}; supported pairs: " + ", ".join(map(_pair_name, supported))
                + " (disable it with contype/conaffinity or <exclude>)"
            )
        if pair_id >= 0:
            condim, winner = int(m.pair_dim[pair_id]), 0
        else:
            # MuJoCo's mj_contactParam: the higher priority's condim, else the larger one.
            winner = 0 if prio[g1] == prio[g2] else (1 if prio[g1] > prio[g2] else 2)
            condim = int(max(condims[g1], condims[g2]) if winner == 0 else condims[g1 if winner == 1 else g2])
        rows.setdefault(key, []).append((g1, g2, condim, pair_id, winner))

    if not m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_CONTACT:
        for i in range(m.npair):
            add(int(m.pair_geom1[i]), int(m.pair_geom2[i]), i)
    for g1, g2 in dynamic_pairs(m):
        add(g1, g2, -1)

    ccd = {*CONVEX_PAIRS, *HFIELD_PAIRS, *(k for k in MESH_NCON if k[0] != mujoco.mjtGeom.mjGEOM_PLANE)}
    if m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_NATIVECCD and any(k in ccd for k in rows):
        key = next(k for k in sorted(rows) if k in ccd)
        raise ValueError(f"option flag nativeccd='disable' (libccd) is not supported for the "
                         f"{_pair_name(key)} pairs of this model: they use MuJoCo's native GJK/EPA")
    hull_errs = unsupported_meshes(m, {int(g) for r in rows.values() for row in r for g in row[:2]})
    if hull_errs:
        raise ValueError("; ".join(hull_errs))
    groups = []
    for key in sorted(rows):
        r = np.asarray(rows[key], np.int32).reshape(-1, 5)
        patch, slots = ((0, 0), ncon[key]) if key not in HFIELD_PAIRS else group_patch(
            m, r[:, 0], r[:, 1], r[:, 3])
        groups.append(PairGroup(
            type1=key[0], type2=key[1], ncon_per_pair=slots, patch=patch,
            geom1=r[:, 0].copy(), geom2=r[:, 1].copy(), condim=r[:, 2].copy(), pair_id=r[:, 3].copy(),
            winner=r[:, 4].copy(),
        ))
    return CollisionPairs(groups=tuple(groups), ccd_iterations=int(m.opt.ccd_iterations),
                          ccd_tolerance=float(m.opt.ccd_tolerance))
