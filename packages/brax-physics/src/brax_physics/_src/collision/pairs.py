"""Load-time collision candidates: MuJoCo's broadphase filter and contact-parameter mixing (numpy).

Everything here runs once per model on a compiled `mujoco.MjModel`; the result holds static
index arrays grouped by pair type plus the mixed per-pair parameters, so that `collide` makes one
vmapped collider call per pair type.
"""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np

from brax_physics._src.collision.primitives import COLLIDERS

# MuJoCo's mjMINVAL: solmix weights below it count as zero.
_MINVAL = 1e-15

_TYPE_NAMES = {
    0: "plane", 1: "hfield", 2: "sphere", 3: "capsule", 4: "ellipsoid", 5: "cylinder",
    6: "box", 7: "mesh", 8: "sdf",
}


@dataclasses.dataclass(frozen=True, eq=False)
class PairGroup:
    """All candidate pairs of one (type1, type2); arrays are (npair, ...) numpy, static under jit."""

    type1: int
    """MuJoCo geom type of every geom1 (the lower type)."""
    type2: int
    """MuJoCo geom type of every geom2."""
    ncon_per_pair: int
    """Fixed number of contact slots K the collider returns per pair."""
    geom1: np.ndarray
    """(npair,) int32 geom ids of the lower-type geoms."""
    geom2: np.ndarray
    """(npair,) int32 geom ids of the other geoms."""
    condim: np.ndarray
    """(npair,) int32 mixed contact dimensionality (1, 3, 4 or 6)."""
    friction: np.ndarray
    """(npair, 5) float64 mixed friction (slide, slide, spin, roll, roll)."""
    solref: np.ndarray
    """(npair, 2) float64 mixed solref."""
    solreffriction: np.ndarray
    """(npair, 2) float64 solreffriction (zeros unless set by an explicit <pair>)."""
    solimp: np.ndarray
    """(npair, 5) float64 mixed solimp."""
    margin: np.ndarray
    """(npair,) float64 summed margins: rows are active while dist < margin."""
    gap: np.ndarray
    """(npair,) float64 summed gaps: MuJoCo also reports inactive contacts up to margin + gap."""

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

    def _key(self) -> tuple[object, ...]:
        return tuple(
            (g.type1, g.type2, g.ncon_per_pair)
            + tuple(a.tobytes() for a in (g.geom1, g.geom2, g.condim, g.friction, g.solref, g.solreffriction,
                                          g.solimp, g.margin, g.gap))
            for g in self.groups
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CollisionPairs) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    @property
    def ncon(self) -> int:
        """Total number of contact slots (static)."""
        return sum(g.npair * g.ncon_per_pair for g in self.groups)


def _geom_name(m: mujoco.MjModel, g: int) -> str:
    """Geom name, or `#id` for unnamed geoms."""
    name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g)
    return f"'{name}'" if name else f"#{g}"


def _body_pair_filtered(m: mujoco.MjModel, b1: int, b2: int, filterparent: bool) -> bool:
    """True if MuJoCo's weld / parent-child rules skip every dynamic contact between two bodies."""
    w1, w2 = int(m.body_weldid[b1]), int(m.body_weldid[b2])
    if w1 == w2:
        return True
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
    explicit = {
        (min(int(a), int(b)), max(int(a), int(b)))
        for a, b in zip(np.asarray(m.pair_geom1).reshape(-1), np.asarray(m.pair_geom2).reshape(-1), strict=True)
    }
    contype = np.asarray(m.geom_contype)
    conaff = np.asarray(m.geom_conaffinity)
    gtype = np.asarray(m.geom_type)
    body = np.asarray(m.geom_bodyid)
    out = []
    for g1 in range(m.ngeom):
        for g2 in range(g1 + 1, m.ngeom):
            if not ((contype[g1] & conaff[g2]) or (contype[g2] & conaff[g1])):
                continue
            if gtype[g1] == 0 and gtype[g2] == 0:
                continue  # plane-plane is never tested
            b1, b2 = int(body[g1]), int(body[g2])
            if _body_pair_filtered(m, b1, b2, filterparent):
                continue
            if (min(b1, b2) << 16) + max(b1, b2) in excluded:
                continue
            if (g1, g2) in explicit:
                continue  # an explicit <pair> replaces the dynamic contact
            out.append((g1, g2))
    return out


def _mix(m: mujoco.MjModel, g1: int, g2: int) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """MuJoCo's mixing of two geoms' condim, friction (5,), solref (2,), solimp (5,)."""
    p1, p2 = int(m.geom_priority[g1]), int(m.geom_priority[g2])
    if p1 != p2:
        g = g1 if p1 > p2 else g2
        f = np.asarray(m.geom_friction[g], np.float64)
        return (
            int(m.geom_condim[g]),
            np.array([f[0], f[0], f[1], f[2], f[2]]),
            np.asarray(m.geom_solref[g], np.float64).copy(),
            np.asarray(m.geom_solimp[g], np.float64).copy(),
        )
    condim = max(int(m.geom_condim[g1]), int(m.geom_condim[g2]))
    f = np.maximum(m.geom_friction[g1], m.geom_friction[g2]).astype(np.float64)
    s1, s2 = float(m.geom_solmix[g1]), float(m.geom_solmix[g2])
    if s1 < _MINVAL and s2 < _MINVAL:
        w = 0.5
    elif s1 < _MINVAL:
        w = 0.0
    elif s2 < _MINVAL:
        w = 1.0
    else:
        w = s1 / (s1 + s2)
    r1 = np.asarray(m.geom_solref[g1], np.float64)
    r2 = np.asarray(m.geom_solref[g2], np.float64)
    # Direct (non-positive) solrefs cannot be averaged with time constants: take the minimum.
    solref = w * r1 + (1 - w) * r2 if (r1[0] > 0 and r2[0] > 0) else np.minimum(r1, r2)
    solimp = w * np.asarray(m.geom_solimp[g1], np.float64) + (1 - w) * np.asarray(m.geom_solimp[g2], np.float64)
    return condim, np.array([f[0], f[0], f[1], f[2], f[2]]), solref, solimp


def collision_pairs(m: mujoco.MjModel) -> CollisionPairs:
    """Candidate pairs and mixed contact parameters of a compiled model, grouped by pair type.

    Raises ValueError for a candidate pair whose types have no collider (naming both geoms), and
    for `override` contact parameters, which are not supported.
    """
    if m.opt.enableflags & mujoco.mjtEnableBit.mjENBL_OVERRIDE:
        raise ValueError("option flag override='enable' (o_margin/o_solref/...) is not supported")
    gtype = np.asarray(m.geom_type)
    rows: dict[tuple[int, int], list[tuple[int, int, int, np.ndarray, np.ndarray, np.ndarray,
                                           np.ndarray, float, float]]] = {}

    def add(g1: int, g2: int, condim: int, friction: np.ndarray, solref: np.ndarray,
            solreffriction: np.ndarray, solimp: np.ndarray, margin: float, gap: float) -> None:
        if gtype[g1] > gtype[g2]:
            g1, g2 = g2, g1
        key = (int(gtype[g1]), int(gtype[g2]))
        if key not in COLLIDERS:
            t1, t2 = _TYPE_NAMES.get(key[0], str(key[0])), _TYPE_NAMES.get(key[1], str(key[1]))
            raise ValueError(
                f"unsupported collision pair {t1}-{t2} between geoms {_geom_name(m, g1)} and "
                f"{_geom_name(m, g2)}; supported pairs: "
                + ", ".join(f"{_TYPE_NAMES[a]}-{_TYPE_NAMES[b]}" for a, b in COLLIDERS)
                + " (disable it with contype/conaffinity or <exclude>)"
            )
        rows.setdefault(key, []).append(
            (g1, g2, condim, friction, solref, solreffriction, solimp, margin, gap)
        )

    if not m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_CONTACT:
        for i in range(m.npair):
            add(
                int(m.pair_geom1[i]), int(m.pair_geom2[i]), int(m.pair_dim[i]),
                np.asarray(m.pair_friction[i], np.float64).copy(),
                np.asarray(m.pair_solref[i], np.float64).copy(),
                np.asarray(m.pair_solreffriction[i], np.float64).copy(),
                np.asarray(m.pair_solimp[i], np.float64).copy(),
                float(m.pair_margin[i]), float(m.pair_gap[i]),
            )
    for g1, g2 in dynamic_pairs(m):
        condim, friction, solref, solimp = _mix(m, g1, g2)
        add(
            g1, g2, condim, friction, solref, np.zeros(2), solimp,
            float(m.geom_margin[g1] + m.geom_margin[g2]), float(m.geom_gap[g1] + m.geom_gap[g2]),
        )

    groups = []
    for key in sorted(rows):
        r = rows[key]
        groups.append(PairGroup(
            type1=key[0], type2=key[1], ncon_per_pair=COLLIDERS[key][1],
            geom1=np.array([x[0] for x in r], np.int32),
            geom2=np.array([x[1] for x in r], np.int32),
            condim=np.array([x[2] for x in r], np.int32),
            friction=np.stack([x[3] for x in r]),
            solref=np.stack([x[4] for x in r]),
            solreffriction=np.stack([x[5] for x in r]),
            solimp=np.stack([x[6] for x in r]),
            margin=np.array([x[7] for x in r], np.float64),
            gap=np.array([x[8] for x in r], np.float64),
        ))
    return CollisionPairs(groups=tuple(groups))
