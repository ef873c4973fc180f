"""Static tree structure precomputed in numpy, once per model topology.

Tree recursions (subtree sums, velocity propagation, CRB sparsity) become dense masked matrix
products with the masks below; for the model sizes this engine targets (nv up to ~30) a few
small matmuls are faster on CPU/GPU than a sequential level-by-level scan, and they are trivially
differentiable. Only pose composition needs the depth levels (a Python loop at trace time).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
from mujoco import mjtJoint

from brax_physics._src.system import System


@dataclasses.dataclass(frozen=True)
class Structure:
    """Index arrays and masks derived from a `System`'s static fields (numpy, trace-time only)."""

    levels: tuple[np.ndarray, ...]
    """Body ids per depth 1, 2, ... (world excluded)."""
    parent: np.ndarray
    """(nbody,) parent id."""
    root: np.ndarray
    """(nbody,) root id (child of world heading the body's tree)."""
    jnt_slots: tuple[tuple[np.ndarray, np.ndarray], ...]
    """For k = 0, 1, ...: (bodies having a k-th non-free joint, those joint ids)."""
    free_bodies: np.ndarray
    """Bodies moved by a free joint (their only joint)."""
    subtree: np.ndarray
    """(nbody, nbody) float32: subtree[b, d] = 1 if d is b or a descendant of b."""
    body_dof: np.ndarray
    """(nbody, nv) float32: 1 if the dof moves body b (dof of b or of an ancestor)."""
    dof_anc: np.ndarray
    """(nv, nv) bool: dof_anc[i, j] if j is i or an ancestor dof of i (M's sparsity)."""
    dof_before: np.ndarray
    """(nv, nv) float32: dofs whose velocity enters cvel before dof i's cdof_dot (MuJoCo's comVel)."""
    jnt_body: np.ndarray
    """(njnt,) body of each joint."""
    geom_body: np.ndarray
    """(ngeom,) body of each geom."""
    dof_body: np.ndarray
    """(nv,) body of each dof."""
    jnt_of_type: dict[int, np.ndarray]
    """Joint ids grouped by `mujoco.mjtJoint` code (keys are ints; the enum members index them too)."""
    jnt_dofs: dict[int, np.ndarray]
    """Dof ids per joint type: (n,) for hinge/slide, (n, 3) for ball, (n, 6) for free."""
    jnt_qpos: dict[int, np.ndarray]
    """Qpos ids per joint type: (n,) for hinge/slide, (n, 4) ball, (n, 7) free."""
    scalar_qpos: np.ndarray
    """Qpos ids of hinge and slide joints."""
    scalar_dof: np.ndarray
    """Dof ids of hinge and slide joints (same order as `scalar_qpos`)."""
    scalar_jnt: np.ndarray
    """Joint ids of hinge and slide joints (same order as `scalar_qpos`)."""
    act_dof: np.ndarray
    """(nu,) dof driven by each joint-transmission actuator (others: arbitrary)."""
    act_qpos: np.ndarray
    """(nu,) qpos coordinate of each joint-transmission actuator's joint (others: arbitrary)."""


def structure(sys: System) -> Structure:
    """Precomputed (cached) `Structure` of `sys`."""
    return _structure(
        sys.body_parentid, sys.body_jntnum, sys.body_jntadr, sys.jnt_type, sys.jnt_qposadr,
        sys.jnt_dofadr, sys.jnt_bodyid, sys.dof_bodyid, sys.dof_jntid, sys.dof_parentid,
        sys.actuator_trnid, sys.geom_bodyid,
    )


@functools.lru_cache(maxsize=64)
def _structure(
    body_parentid: tuple[int, ...],
    body_jntnum: tuple[int, ...],
    body_jntadr: tuple[int, ...],
    jnt_type: tuple[int, ...],
    jnt_qposadr: tuple[int, ...],
    jnt_dofadr: tuple[int, ...],
    jnt_bodyid: tuple[int, ...],
    dof_bodyid: tuple[int, ...],
    dof_jntid: tuple[int, ...],
    dof_parentid: tuple[int, ...],
    actuator_trnid: tuple[tuple[int, int], ...],
    geom_bodyid: tuple[int, ...],
) -> Structure:
    nbody, nv = len(body_parentid), len(dof_bodyid)
    parent = np.asarray(body_parentid, dtype=np.int32)
    depth = np.zeros(nbody, dtype=np.int32)
    for b in range(1, nbody):  # MuJoCo orders parents before children
        depth[b] = depth[parent[b]] + 1
    max_depth = int(depth.max(initial=0))
    levels = tuple(np.nonzero(depth == d)[0].astype(np.int32) for d in range(1, max_depth + 1))
    root = np.zeros(nbody, dtype=np.int32)
    for b in range(1, nbody):
        root[b] = b if parent[b] == 0 else root[parent[b]]

    # ancestor-or-self relation between bodies
    anc = np.eye(nbody, dtype=bool)
    for b in range(1, nbody):
        anc[b] |= anc[parent[b]]
    anc[:, 0] = True
    subtree = anc.T.astype(np.float32)

    dof_body = np.asarray(dof_bodyid, dtype=np.int32).reshape(nv)
    body_dof = anc[:, dof_body].astype(np.float32) if nv else np.zeros((nbody, 0), np.float32)

    dof_anc = np.eye(nv, dtype=bool)
    for i in range(nv):
        p = dof_parentid[i]
        if p >= 0:
            dof_anc[i] |= dof_anc[p]

    # cvel seen by dof i's cdof_dot: all strict ancestor dofs, except the other dofs of the same
    # ball joint / free-joint rotation (MuJoCo evaluates those three with one shared velocity).
    jtype = np.asarray(jnt_type, dtype=np.int32)
    group = np.arange(nv)
    for j, t in enumerate(jnt_type):
        a = jnt_dofadr[j]
        if t == mjtJoint.mjJNT_BALL:
            group[a : a + 3] = a
        elif t == mjtJoint.mjJNT_FREE:
            group[a + 3 : a + 6] = a + 3
    dof_before = dof_anc & ~np.eye(nv, dtype=bool) & (group[:, None] != group[None, :])

    def ids(t: int) -> np.ndarray:
        return np.nonzero(jtype == t)[0].astype(np.int32)

    joint_types = (mjtJoint.mjJNT_FREE, mjtJoint.mjJNT_BALL, mjtJoint.mjJNT_SLIDE, mjtJoint.mjJNT_HINGE)
    jnt_of_type = {int(t): ids(int(t)) for t in joint_types}
    dofadr = np.asarray(jnt_dofadr, dtype=np.int32).reshape(-1)
    qposadr = np.asarray(jnt_qposadr, dtype=np.int32).reshape(-1)
    width_v = {int(mjtJoint.mjJNT_FREE): 6, int(mjtJoint.mjJNT_BALL): 3}
    width_q = {int(mjtJoint.mjJNT_FREE): 7, int(mjtJoint.mjJNT_BALL): 4}
    jnt_dofs, jnt_qpos = {}, {}
    for t, js in jnt_of_type.items():
        if t in width_v:
            jnt_dofs[t] = (dofadr[js][:, None] + np.arange(width_v[t])[None, :]).astype(np.int32)
            jnt_qpos[t] = (qposadr[js][:, None] + np.arange(width_q[t])[None, :]).astype(np.int32)
        else:
            jnt_dofs[t], jnt_qpos[t] = dofadr[js], qposadr[js]
    scalar = np.concatenate([jnt_of_type[mjtJoint.mjJNT_HINGE], jnt_of_type[mjtJoint.mjJNT_SLIDE]])
    slots = []
    for k in range(max(body_jntnum, default=0)):
        pairs = [(b, body_jntadr[b] + k) for b in range(nbody)
                 if body_jntnum[b] > k and jnt_type[body_jntadr[b] + k] != mjtJoint.mjJNT_FREE]
        slots.append((np.asarray([p[0] for p in pairs], dtype=np.int32),
                      np.asarray([p[1] for p in pairs], dtype=np.int32)))
    # meaningful for joint transmissions only (the fast path); other targets index sites or tendons
    act_jnt = np.asarray([t[0] for t in actuator_trnid], dtype=np.int32)
    act_jnt = np.clip(act_jnt, 0, max(len(jnt_type) - 1, 0))
    act_dof = dofadr[act_jnt] if len(jnt_type) else np.zeros(len(actuator_trnid), np.int32)
    act_qpos = qposadr[act_jnt] if len(jnt_type) else np.zeros(len(actuator_trnid), np.int32)

    return Structure(
        levels=levels,
        parent=parent,
        root=root,
        jnt_slots=tuple(slots),
        free_bodies=np.asarray(jnt_bodyid, dtype=np.int32).reshape(-1)[jnt_of_type[mjtJoint.mjJNT_FREE]],
        subtree=subtree,
        body_dof=body_dof,
        dof_anc=dof_anc,
        dof_before=dof_before.astype(np.float32),
        jnt_body=np.asarray(jnt_bodyid, dtype=np.int32).reshape(-1),
        geom_body=np.asarray(geom_bodyid, dtype=np.int32).reshape(-1),
        dof_body=dof_body,
        jnt_of_type=jnt_of_type,
        jnt_dofs=jnt_dofs,
        jnt_qpos=jnt_qpos,
        scalar_qpos=qposadr[scalar],
        scalar_dof=dofadr[scalar],
        scalar_jnt=scalar,
        act_dof=act_dof,
        act_qpos=act_qpos,
    )
