"""Constraint islands, as MuJoCo's `mj_island`: the trees that active constraint rows link.

A kinematic tree (MuJoCo's `dof_treeid`) starts at each body with dofs below a static body. A row
reaches the trees whose dofs its Jacobian can touch; trees linked by active rows form an island,
and trees without active rows belong to none (their dofs take `qacc_smooth`). MuJoCo solves each
island as a problem of its own (its own line search, stopping tests and iteration count), which
changes results whenever the solver stops before converging. Islands are labelled here by their
smallest tree id, so labels lie in [0, ntree) and -1 means no island.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from mujoco import mjtDisableBit

from brax_physics._src import constraint
from brax_physics._src.system import System


def enabled(sys: System) -> bool:
    """Whether the solver splits into islands (MuJoCo's `island` flag, on by default)."""
    return not sys.opt.disableflags & mjtDisableBit.mjDSBL_ISLAND and sys.nv > 0


def ntree(sys: System) -> int:
    """Number of kinematic trees (island label slots)."""
    return max(sys.dof_treeid, default=-1) + 1


@functools.lru_cache(maxsize=64)
def _row_trees(dof_treeid: tuple[int, ...], support: bytes, shape: tuple[int, int]) -> np.ndarray:
    rows = np.frombuffer(support, bool).reshape(shape)
    tree = np.asarray(dof_treeid, np.int64)
    per_row = [sorted(set(tree[r].tolist())) for r in rows]
    width = max((len(t) for t in per_row), default=1) or 1
    out = np.full((len(per_row), width), -1, np.int32)
    for i, t in enumerate(per_row):
        out[i, :len(t)] = t
    return out


def row_trees(sys: System) -> np.ndarray:
    """(nefc, T) int32 trees each row can reach, ascending, padded with -1 (static)."""
    support = np.ascontiguousarray(constraint.row_dofs(sys))
    return _row_trees(sys.dof_treeid, support.tobytes(), support.shape)


def islands(sys: System, active: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(nv,) int32 island of each dof and (nefc,) int32 island of each row (of its first tree for
    inactive rows), -1 where none, given the rows MuJoCo instantiates `active` (nefc,) bool."""
    n = ntree(sys)
    trees = row_trees(sys)
    dof_tree = jnp.asarray(np.asarray(sys.dof_treeid, np.int32))
    if trees.shape[0] == 0:
        return jnp.full(sys.nv, -1, jnp.int32), jnp.zeros(0, jnp.int32)
    t = jnp.asarray(trees)
    slot = jnp.where(t >= 0, t, n)
    constrained = jnp.zeros(n + 1, bool).at[slot].max(active[:, None] & (t >= 0))[:n]
    label = jnp.where(constrained, jnp.arange(n, dtype=jnp.int32), n)  # n: no island
    if trees.shape[1] > 1:
        a = jnp.broadcast_to(slot[:, :1], slot[:, 1:].shape).reshape(-1)
        b = slot[:, 1:].reshape(-1)
        link = (jnp.broadcast_to(active[:, None], slot[:, 1:].shape) & (t[:, 1:] >= 0)).reshape(-1)

        def hook(c: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
            lab, _ = c
            ext = jnp.append(lab, n)
            m = jnp.where(link, jnp.minimum(ext[a], ext[b]), n)
            new = ext.at[a].min(m).at[b].min(m)[:n]
            new = jnp.where(new < n, new[jnp.minimum(new, n - 1)], n)  # jump to the label's label
            return new, jnp.any(new != lab)

        label, _ = jax.lax.while_loop(lambda c: c[1], hook, (label, jnp.ones((), bool)))
    ext = jnp.append(label, n)
    dof_island = jnp.where(ext[dof_tree] < n, ext[dof_tree], -1).astype(jnp.int32)
    first = slot[:, 0]
    efc_island = jnp.where(ext[first] < n, ext[first], -1).astype(jnp.int32)
    return dof_island, efc_island
