"""The `Contact` pytree and the batched collision driver."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from brax_physics._src.collision.pairs import CollisionPairs
from brax_physics._src.collision.primitives import COLLIDERS


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


def collide(
    pairs: CollisionPairs, geom_xpos: jax.Array, geom_xmat: jax.Array, geom_size: jax.Array
) -> Contact:
    """Contacts of all candidate pairs: one vmapped collider call per pair type.

    geom_xpos (ngeom, 3), geom_xmat (ngeom, 3, 3) and geom_size (ngeom, 3) are arrays (sizes may be
    randomized); `pairs` is static. Returns a `Contact` with `pairs.ncon` slots.
    """
    dtype = geom_xpos.dtype
    parts: list[dict[str, jax.Array]] = []
    for g in pairs.groups:
        fn, k = COLLIDERS[(g.type1, g.type2)]
        i1, i2 = g.geom1, g.geom2
        # Colliders cap their contact count with MuJoCo's detection threshold margin + gap.
        detect = jnp.asarray(g.margin + g.gap, dtype)
        dist, pos, frame = jax.vmap(fn)(
            geom_xpos[i1], geom_xmat[i1], geom_size[i1],
            geom_xpos[i2], geom_xmat[i2], geom_size[i2], detect,
        )
        n = g.npair * k

        def rep(x: np.ndarray, dt: jnp.dtype = dtype, k: int = k) -> jax.Array:
            return jnp.asarray(np.repeat(x, k, axis=0), dt)

        parts.append({
            "dist": dist.reshape(n),
            "pos": pos.reshape(n, 3),
            "frame": frame.reshape(n, 3, 3),
            "geom1": rep(g.geom1, jnp.int32),
            "geom2": rep(g.geom2, jnp.int32),
            "includemargin": rep(g.margin),
            "friction": rep(g.friction),
            "solref": rep(g.solref),
            "solreffriction": rep(g.solreffriction),
            "solimp": rep(g.solimp),
            "dim": rep(g.condim, jnp.int32),
        })
    if parts:
        cat = {key: jnp.concatenate([p[key] for p in parts]) for key in parts[0]}
    else:
        shapes = {
            "dist": (), "pos": (3,), "frame": (3, 3), "geom1": (), "geom2": (), "includemargin": (),
            "friction": (5,), "solref": (2,), "solreffriction": (2,), "solimp": (5,), "dim": (),
        }
        cat = {
            key: jnp.zeros((0, *s), jnp.int32 if key in ("geom1", "geom2", "dim") else dtype)
            for key, s in shapes.items()
        }
    force = jnp.zeros((cat["dist"].shape[0], 6), dtype)
    return Contact(**cat, active=cat["dist"] < cat["includemargin"], force=force)
