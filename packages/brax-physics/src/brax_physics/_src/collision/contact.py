"""The `Contact` pytree and the batched collision driver."""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from mujoco import mjtGeom

from brax_physics._src.collision import hfield, mesh, multicontact
from brax_physics._src.collision.convex import (
    COLLIDERS,
    CONVEX_PAIRS,
    primitive_search,
    primitive_shape,
    shape_envelope,
)
from brax_physics._src.collision.primitives import make_frame
from brax_physics._src.collision.types import PairGroup
from brax_physics._src.linalg import MINVAL
from brax_physics._src.system import System


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Contact:
    """Fixed-size contact set (ncon slots, static); rows with `active == False` must be ignored.

    Slots are ordered by pair type (ascending (type1, type2)), then pair, then the collider's slot
    order; MuJoCo orders `d.contact` by body pair instead.
    """

    dist: jax.Array
    """(ncon,) signed surface distance (negative = penetration)."""
    pos: jax.Array
    """(ncon, 3) contact point in the world: midway between the two surfaces."""
    frame: jax.Array
    """(ncon, 3, 3) rows: normal from geom1 to geom2, tangent 1, tangent 2."""
    geom1: jax.Array
    """(ncon,) int32 geom id of the lower-type geom."""
    geom2: jax.Array
    """(ncon,) int32 geom id of the other geom."""
    includemargin: jax.Array
    """(ncon,) margin below which the contact produces constraint rows."""
    friction: jax.Array
    """(ncon, 5) friction (slide, slide, spin, roll, roll)."""
    solref: jax.Array
    """(ncon, 2) constraint solref."""
    solreffriction: jax.Array
    """(ncon, 2) solref of elliptic friction rows (zeros: use `solref`)."""
    solimp: jax.Array
    """(ncon, 5) constraint solimp."""
    dim: jax.Array
    """(ncon,) int32 condim."""
    active: jax.Array
    """(ncon,) bool: dist < includemargin."""
    force: jax.Array
    """(ncon, 6) constraint force in the contact frame (normal, t1, t2, spin, roll1, roll2), as
    MuJoCo's `mj_contactForce`; zeros from `collide` (the pipeline fills it in)."""

    @property
    def ncon(self) -> int:
        """Number of contact slots."""
        return int(self.dist.shape[-1])


class _PairParams(NamedTuple):
    """Contact parameters of a group's pairs, (npair, ...) each."""

    friction: jax.Array
    solref: jax.Array
    solreffriction: jax.Array
    solimp: jax.Array
    margin: jax.Array
    gap: jax.Array


class _AllPairs(NamedTuple):
    """The groups' pairs side by side (static numpy, (npair_total,) each) and where each group and
    each contact slot starts: the per-pair work runs once over all groups, not once per group."""

    geom1: np.ndarray
    geom2: np.ndarray
    winner: np.ndarray
    pair_id: np.ndarray
    condim: np.ndarray
    on_plane: np.ndarray
    """Whether the pair's geom1 is a plane (the bounding-sphere filter's plane test)."""
    bounds: tuple[tuple[int, int], ...]
    """Each group's [start, end) in the pair arrays."""
    slot: np.ndarray
    """(ncon,) the pair (index into the arrays) of every contact slot, groups in order."""


def _all_pairs(groups: tuple[PairGroup, ...]) -> _AllPairs:
    """`groups` flattened into one set of pairs (`_AllPairs`)."""
    ends = np.cumsum([g.npair for g in groups], dtype=np.int64)
    starts = ends - np.asarray([g.npair for g in groups], np.int64)

    def cat(arrays: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(arrays).astype(np.int32) if arrays else np.zeros(0, np.int32)

    slot = cat([start + np.repeat(np.arange(g.npair), g.ncon_per_pair)
                for g, start in zip(groups, starts, strict=True)])
    return _AllPairs(cat([g.geom1 for g in groups]), cat([g.geom2 for g in groups]),
                     cat([g.winner for g in groups]), cat([g.pair_id for g in groups]),
                     cat([g.condim for g in groups]),
                     np.concatenate([np.full(g.npair, g.type1 == mjtGeom.mjGEOM_PLANE) for g in groups])
                     if groups else np.zeros(0, bool),
                     tuple((int(a), int(b)) for a, b in zip(starts, ends, strict=True)), slot)


def _mix(sys: System, g: _AllPairs) -> _PairParams:
    """MuJoCo's contact parameters of the pairs from the current leaves (mj_contactParam).

    Explicit `<pair>`s take their own `pair_*` values; geom pairs take the higher-priority geom's
    friction, solref and solimp, or at equal priority the element-wise maximum friction and the
    solmix-weighted mean solref and solimp (element-wise minimum solref when either is direct);
    margins and gaps add up.
    """
    g1, g2 = g.geom1, g.geom2
    f1, f2 = sys.geom_friction[g1], sys.geom_friction[g2]
    r1, r2 = sys.geom_solref[g1], sys.geom_solref[g2]
    i1, i2 = sys.geom_solimp[g1], sys.geom_solimp[g2]
    s1, s2 = sys.geom_solmix[g1], sys.geom_solmix[g2]
    ok1, ok2 = s1 >= MINVAL, s2 >= MINVAL
    w = jnp.where(ok1 & ok2, s1 / jnp.where(ok1 & ok2, s1 + s2, 1.0),
                  jnp.where(ok1, 1.0, jnp.where(ok2, 0.0, 0.5)))[:, None]
    standard = ((r1[:, 0] > 0) & (r2[:, 0] > 0))[:, None]
    fri = jnp.maximum(f1, f2)
    solref = jnp.where(standard, w * r1 + (1 - w) * r2, jnp.minimum(r1, r2))
    solimp = w * i1 + (1 - w) * i2
    for winner, fw, rw, iw in ((1, f1, r1, i1), (2, f2, r2, i2)):
        if np.any(g.winner == winner):
            sel = jnp.asarray(g.winner == winner)[:, None]
            fri = jnp.where(sel, fw, fri)
            solref, solimp = jnp.where(sel, rw, solref), jnp.where(sel, iw, solimp)
    params = _PairParams(
        friction=fri[:, jnp.asarray([0, 0, 1, 2, 2])],
        solref=solref,
        solreffriction=jnp.zeros_like(solref),
        solimp=solimp,
        margin=sys.geom_margin[g1] + sys.geom_margin[g2],
        gap=sys.geom_gap[g1] + sys.geom_gap[g2],
    )
    explicit = g.pair_id >= 0
    if not np.any(explicit):
        return params
    pid = np.maximum(g.pair_id, 0)
    pair = _PairParams(sys.pair_friction[pid], sys.pair_solref[pid], sys.pair_solreffriction[pid],
                       sys.pair_solimp[pid], sys.pair_margin[pid], sys.pair_gap[pid])
    sel = jnp.asarray(explicit)
    return _PairParams(*(jnp.where(sel.reshape((-1,) + (1,) * (a.ndim - 1)), b, a)
                         for a, b in zip(params, pair, strict=True)))


def _sphere_filtered(sys: System, g: _AllPairs, geom_xpos: jax.Array, geom_xmat: jax.Array,
                     bound: jax.Array) -> jax.Array:
    """(npair,) bool: MuJoCo's bounding-sphere filter (mj_filterSphere) skips the pair.

    Geoms with positive `geom_rbound` are skipped when their centers are farther apart than the
    radii plus `bound` (margin + gap); a plane (always geom1: lowest type) and a bounded geom when
    the geom's center is farther above the plane than its radius plus `bound`.
    """
    rb1, rb2 = sys.geom_rbound[g.geom1], sys.geom_rbound[g.geom2]
    x1, x2 = geom_xpos[g.geom1], geom_xpos[g.geom2]
    reach = rb1 + rb2 + bound
    far = jnp.sum((x1 - x2) ** 2, axis=-1) > reach * reach
    out = jnp.where((rb1 > 0) & (rb2 > 0), far, False)
    if np.any(g.on_plane):
        height = jnp.sum((x2 - x1) * geom_xmat[g.geom1][:, :, 2], axis=-1)
        out = out | (jnp.asarray(g.on_plane) & (rb1 <= 0) & (rb2 > 0) & (height > bound + rb2))
    return out


def _convex_search(sys: System, geom_xpos: jax.Array, geom_xmat: jax.Array, detects: list[jax.Array],
                   skips: list[jax.Array]) -> dict[int, tuple[jax.Array, ...]]:
    """GJK/EPA search results (dist, normal, witnesses; constants) of the groups that MuJoCo collides
    with its general convex collider, by group index, run only on the pairs that pass the
    bounding-sphere filter. The groups share one search: each pair type of its own would be one
    more GJK/EPA loop to compile and one more loop per step to run."""
    chosen = [(gi, g) for gi, g in enumerate(sys.contact_pairs.groups) if (g.type1, g.type2) in CONVEX_PAIRS]
    if not chosen:
        return {}
    i1 = np.concatenate([g.geom1 for _, g in chosen])
    i2 = np.concatenate([g.geom2 for _, g in chosen])
    found = primitive_search(
        np.concatenate([np.full(g.npair, g.type1) for _, g in chosen]),
        geom_xpos[i1], geom_xmat[i1], sys.geom_size[i1],
        np.concatenate([np.full(g.npair, g.type2) for _, g in chosen]),
        geom_xpos[i2], geom_xmat[i2], sys.geom_size[i2],
        jnp.concatenate([detects[gi] for gi, _ in chosen]), jnp.concatenate([~skips[gi] for gi, _ in chosen]),
        sys.contact_pairs.ccd_iterations, sys.contact_pairs.ccd_tolerance)
    ends = np.cumsum([g.npair for _, g in chosen])
    return {gi: tuple(x[end - g.npair:end] for x in found) for (gi, g), end in zip(chosen, ends, strict=True)}


def _slot_parameters(prm: _PairParams, slot: np.ndarray) -> dict[str, jax.Array]:
    """The position-independent `Contact` fields of the slots (each one its pair's, `slot` (ncon,))."""
    return {"includemargin": prm.margin[slot], "friction": prm.friction[slot], "solref": prm.solref[slot],
            "solreffriction": prm.solreffriction[slot], "solimp": prm.solimp[slot]}


def with_parameters(sys: System, contact: Contact) -> Contact:
    """`contact` with the fields `collide` takes from the model rather than the positions
    (`includemargin`, `friction`, `solref`, `solreffriction`, `solimp`) computed again from `sys`'s
    leaves: a step that reads them so does not need them carried in its state."""
    groups = sys.contact_pairs.groups
    if not groups:
        return contact
    pairs = _all_pairs(groups)
    return dataclasses.replace(contact, **_slot_parameters(_mix(sys, pairs), pairs.slot))


def collide(sys: System, geom_xpos: jax.Array, geom_xmat: jax.Array) -> Contact:
    """Contacts of all candidate pairs of `sys`: one vmapped collider call per pair type.

    geom_xpos (ngeom, 3) and geom_xmat (ngeom, 3, 3) are the geom frames; sizes and contact
    parameters come from the `System` leaves (so they may be randomized), the pairs and their slot
    counts from its static `contact_pairs`. Returns a `Contact` with `sys.contact_pairs.ncon` slots.
    """
    dtype = geom_xpos.dtype
    geom_size = sys.geom_size
    groups = sys.contact_pairs.groups
    pairs = _all_pairs(groups)
    prm = _mix(sys, pairs)
    # Colliders cap their contact count with MuJoCo's detection threshold margin + gap.
    detect_all = prm.margin + prm.gap
    skip_all = _sphere_filtered(sys, pairs, geom_xpos, geom_xmat, detect_all)
    detects = [detect_all[a:b] for a, b in pairs.bounds]
    skips = [skip_all[a:b] for a, b in pairs.bounds]
    convex = _convex_search(sys, geom_xpos, geom_xmat, detects, skips)
    on_hfield = [gi for gi, g in enumerate(groups) if g.type1 == hfield.HFIELD and g.type2 != mesh.MESH]
    terrain = dict(zip(on_hfield, hfield.collide_primitive_pairs(
        sys, [groups[gi] for gi in on_hfield], geom_xpos, geom_xmat, [detects[gi] for gi in on_hfield],
        [skips[gi] for gi in on_hfield]), strict=True))
    parts: list[dict[str, jax.Array]] = []
    for gi, (g, detect, skip) in enumerate(zip(groups, detects, skips, strict=True)):
        k = g.ncon_per_pair
        i1, i2 = g.geom1, g.geom2
        if gi in convex:  # the general convex collider's search is done: add the gradients
            s1, s2 = primitive_shape(g.type1), primitive_shape(g.type2)
            dist, pos, normal = jax.vmap(functools.partial(shape_envelope, s1, shape2=s2))(
                geom_xpos[i1], geom_xmat[i1], geom_size[i1], pos2=geom_xpos[i2], mat2=geom_xmat[i2],
                data2=geom_size[i2], dist=convex[gi][0], n=convex[gi][1], c1=convex[gi][2],
                c2=convex[gi][3])
            if k > 1:  # multiccd: the contacts of touching faces and edges
                z1, z2 = geom_size[i1], geom_size[i2]
                scale = multicontact.bound(g.type1, z1) + multicontact.bound(g.type2, z2)
                dist, pos, frame = multicontact.collide_pairs(
                    functools.partial(multicontact.primitive_features, g.type1), z1,
                    functools.partial(multicontact.primitive_features, g.type2), z2,
                    geom_xpos[i1], geom_xmat[i1], geom_xpos[i2], geom_xmat[i2], scale, detect, dist, pos,
                    normal, k)
            else:
                dist, pos, frame = dist[:, None], pos[:, None], make_frame(normal)[:, None]
        elif g.type1 == hfield.HFIELD and g.type2 == mesh.MESH:  # prisms against the mesh's hull
            hull = sys.mesh_vert[mesh.hull_rows(sys.meshes, np.asarray(sys.geom_dataid, np.int32)[i2])]
            dist, pos, frame = hfield.collide_pairs(sys, g, geom_xpos, geom_xmat, hull, detect, skip,
                                                    mesh.mesh_shape)
        elif gi in terrain:  # height-field prisms against a primitive: searched above
            dist, pos, frame = terrain[gi]
        elif (g.type1, g.type2) in mesh.NCON:  # pairs with a mesh: per-geom mesh data
            dist, pos, frame = mesh.collide_group(sys, g, geom_xpos, geom_xmat, detect, skip)
        else:
            fn = COLLIDERS[(g.type1, g.type2)][0]
            dist, pos, frame = jax.vmap(fn)(
                geom_xpos[i1], geom_xmat[i1], geom_size[i1],
                geom_xpos[i2], geom_xmat[i2], geom_size[i2], detect,
            )
        n = g.npair * k
        parts.append({"dist": dist.reshape(n), "pos": pos.reshape(n, 3), "frame": frame.reshape(n, 3, 3)})
    if parts:
        cat = {key: jnp.concatenate([p[key] for p in parts]) for key in parts[0]}
        slot = pairs.slot
        cat.update(
            geom1=jnp.asarray(pairs.geom1[slot]), geom2=jnp.asarray(pairs.geom2[slot]),
            dim=jnp.asarray(pairs.condim[slot]), active=(cat["dist"] < prm.margin[slot]) & ~skip_all[slot],
            **_slot_parameters(prm, slot))
    else:
        shapes = {
            "dist": (), "pos": (3,), "frame": (3, 3), "geom1": (), "geom2": (), "includemargin": (),
            "friction": (5,), "solref": (2,), "solreffriction": (2,), "solimp": (5,), "dim": (),
            "active": (),
        }
        ints = ("geom1", "geom2", "dim")
        cat = {
            key: jnp.zeros((0, *s), jnp.int32 if key in ints else bool if key == "active" else dtype)
            for key, s in shapes.items()
        }
    force = jnp.zeros((cat["dist"].shape[0], 6), dtype)
    return Contact(**cat, force=force)
