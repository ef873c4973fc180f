"""Position kinematics: body, joint, inertial and geom frames in the world (MuJoCo mj_kinematics)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from brax_math import axis_angle_to_quat, normalize, quat_identity, quat_mul, quat_to_mat, rotate
from mujoco import mjtJoint, mjtSameFrame

from brax_physics._src.structure import Structure, structure
from brax_physics._src.system import System


class Frames(NamedTuple):
    """World frames computed from q."""

    xpos: jax.Array  # (nbody, 3)
    xquat: jax.Array  # (nbody, 4)
    xanchor: jax.Array  # (njnt, 3)
    xaxis: jax.Array  # (njnt, 3)
    xipos: jax.Array  # (nbody, 3)
    ximat: jax.Array  # (nbody, 3, 3)
    geom_xpos: jax.Array  # (ngeom, 3)
    geom_xmat: jax.Array  # (ngeom, 3, 3)


def take_rows(x: jax.Array, idx: np.ndarray) -> jax.Array:
    """`x[idx]` for static indices: a slice when they are a contiguous run, else one gather."""
    n = idx.shape[0]
    if n and np.array_equal(idx, np.arange(idx[0], idx[0] + n)):
        return x[int(idx[0]) : int(idx[0]) + n]
    return x[idx]


def assemble_rows(parts: list[jax.Array], rows: list[np.ndarray], n: int) -> jax.Array:
    """(n, ...) array with `parts[i]` at the static rows `rows[i]` and zeros in rows none names.

    One concatenation and one static permutation (`take_rows`), not scatters: XLA's CPU scatters do
    not fuse and copy their operand. `rows` must not repeat a row; `parts` share trailing shape.
    """
    idx = np.concatenate([np.asarray(r, np.int32).reshape(-1) for r in rows])
    if np.unique(idx).size != idx.size:
        raise ValueError(f"assemble_rows: rows repeat among {idx.tolist()}")
    rest = np.setdiff1d(np.arange(n, dtype=np.int32), idx)
    if rest.size:  # rows no part names: zeros
        parts = [*parts, jnp.zeros((rest.size, *parts[0].shape[1:]), parts[0].dtype)]
        idx = np.concatenate([idx, rest])
    return take_rows(jnp.concatenate(parts), np.argsort(idx, kind="stable").astype(np.int32))


def _joint_transforms(sys: System, st: Structure, q: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(njnt + 1, 3), (njnt + 1, 4): the motion each joint adds in its body's current frame.

    Free joints (set the pose directly, see `kinematics`) and the extra last row are identities.
    Each joint type is computed on its own and the rows are put in joint order by one gather
    (no scatters: XLA's CPU scatters do not fuse and copy their operand).
    """
    parts_pos, parts_quat, order = [], [], []

    h = st.jnt_of_type[mjtJoint.mjJNT_HINGE]
    if h.size:
        adr = st.jnt_qpos[mjtJoint.mjJNT_HINGE]
        rot = axis_angle_to_quat(sys.jnt_axis[h], q[adr] - sys.qpos0[adr])
        # rotation about the anchor jnt_pos: the anchor point stays where it was
        parts_pos.append(sys.jnt_pos[h] - rotate(sys.jnt_pos[h], rot))
        parts_quat.append(rot)
        order.append(h)

    s = st.jnt_of_type[mjtJoint.mjJNT_SLIDE]
    if s.size:
        adr = st.jnt_qpos[mjtJoint.mjJNT_SLIDE]
        parts_pos.append(sys.jnt_axis[s] * (q[adr] - sys.qpos0[adr])[:, None])
        parts_quat.append(quat_identity((s.size,), q.dtype))
        order.append(s)

    b = st.jnt_of_type[mjtJoint.mjJNT_BALL]
    if b.size:
        rot = normalize(q[st.jnt_qpos[mjtJoint.mjJNT_BALL]])
        parts_pos.append(sys.jnt_pos[b] - rotate(sys.jnt_pos[b], rot))
        parts_quat.append(rot)
        order.append(b)

    rest = np.concatenate([st.jnt_of_type[mjtJoint.mjJNT_FREE], [sys.njnt]]).astype(np.int32)
    parts_pos.append(jnp.zeros((rest.size, 3), q.dtype))
    parts_quat.append(quat_identity((rest.size,), q.dtype))
    order.append(rest)
    perm = np.argsort(np.concatenate(order), kind="stable")
    return take_rows(jnp.concatenate(parts_pos), perm), take_rows(jnp.concatenate(parts_quat), perm)


def mocap_bodies(sys: System) -> np.ndarray:
    """(nmocap,) body of each mocap row (static)."""
    ids = np.asarray(sys.body_mocapid, np.int32)
    out = np.zeros(sys.nmocap, np.int32)
    out[ids[ids >= 0]] = np.flatnonzero(ids >= 0)
    return out


def kinematics(sys: System, q: jax.Array, mocap_pos: jax.Array | None = None,
               mocap_quat: jax.Array | None = None) -> Frames:
    """World frames of bodies, joints, inertias and geoms at positions `q` (nq,).

    Mocap bodies sit at `mocap_pos` (nmocap, 3) / `mocap_quat` (nmocap, 4) (default: their model
    body_pos/body_quat), as MuJoCo's mj_kinematics reads mjData's mocap_pos/mocap_quat.
    """
    st = structure(sys)
    nbody, njnt = sys.nbody, sys.njnt
    jpos, jquat = _joint_transforms(sys, st, q)

    # body frame relative to its parent: body_pos/quat, then each joint in order (slot k applies
    # every body's k-th joint; bodies without one take the identity row njnt, an exact no-op).
    # Remember the frame each joint sees (before its own motion) to place its anchor and axis.
    lpos, lquat = sys.body_pos, sys.body_quat
    if sys.nmocap:
        mb = mocap_bodies(sys)
        mpos = take_rows(sys.body_pos, mb) if mocap_pos is None else mocap_pos
        mquat = take_rows(sys.body_quat, mb) if mocap_quat is None else mocap_quat
        pick = np.arange(nbody, dtype=np.int32)
        pick[mb] = nbody + np.arange(sys.nmocap, dtype=np.int32)
        lpos = take_rows(jnp.concatenate([lpos, mpos.astype(lpos.dtype)]), pick)
        lquat = take_rows(jnp.concatenate([lquat, normalize(mquat.astype(lquat.dtype))]), pick)
    seen_pos, seen_quat = [], []
    pre_idx = np.full(njnt, len(st.jnt_slots) * nbody, np.int32)  # free joints: identity row
    for k, (bodies, jnts) in enumerate(st.jnt_slots):
        seen_pos.append(lpos)
        seen_quat.append(lquat)
        pre_idx[jnts] = k * nbody + bodies
        slot = np.full(nbody, njnt, np.int32)
        slot[bodies] = jnts
        lpos = lpos + rotate(take_rows(jpos, slot), lquat)
        lquat = quat_mul(lquat, take_rows(jquat, slot))
    pre_pos = take_rows(jnp.concatenate([*seen_pos, jnp.zeros((1, 3), q.dtype)]), pre_idx)
    pre_quat = take_rows(jnp.concatenate([*seen_quat, quat_identity((1,), q.dtype)]), pre_idx)
    fb = st.free_bodies
    if fb.size:
        # free joints (children of the world, sole joint of their body) set the pose directly
        fq = q[st.jnt_qpos[mjtJoint.mjJNT_FREE]]
        pick = np.arange(nbody, dtype=np.int32)
        pick[fb] = nbody + np.arange(fb.size, dtype=np.int32)
        lpos = take_rows(jnp.concatenate([lpos, fq[:, :3]]), pick)
        lquat = take_rows(jnp.concatenate([lquat, normalize(fq[:, 3:])]), pick)

    # world frames level by level: a level's parents are all in the previous level, so each level
    # gathers from the one before; one final gather puts bodies in id order
    local = np.zeros(nbody, np.int32)  # index of a body within its level (world: level 0)
    flat = np.zeros(nbody, np.int32)  # index of a body in the concatenation of all levels
    lev_pos, lev_quat = [jnp.zeros((1, 3), q.dtype)], [quat_identity((1,), q.dtype)]
    offset = 1
    # the local frames in level order once, so that each level reads a slice
    by_level = np.concatenate([np.zeros(0, np.int32), *st.levels]).astype(np.int32)
    lpos_l, lquat_l = take_rows(lpos, by_level), take_rows(lquat, by_level)
    for bodies in st.levels:
        p = local[st.parent[bodies]]
        ppos, pquat = take_rows(lev_pos[-1], p), take_rows(lev_quat[-1], p)
        at = slice(offset - 1, offset - 1 + bodies.size)
        lev_pos.append(ppos + rotate(lpos_l[at], pquat))
        lev_quat.append(normalize(quat_mul(pquat, lquat_l[at])))
        local[bodies] = np.arange(bodies.size)
        flat[bodies] = offset + np.arange(bodies.size)
        offset += bodies.size
    xpos = take_rows(jnp.concatenate(lev_pos), flat)
    xquat = take_rows(jnp.concatenate(lev_quat), flat)

    # joint frame = parent frame composed with the body-local frame seen by the joint
    jp = st.parent[st.jnt_body]
    xanchor = xpos[jp] + rotate(pre_pos + rotate(sys.jnt_pos, pre_quat), xquat[jp])
    xaxis = rotate(sys.jnt_axis, quat_mul(xquat[jp], pre_quat))
    if fb.size:
        jfree = np.arange(njnt, dtype=np.int32)
        jfree[st.jnt_of_type[mjtJoint.mjJNT_FREE]] = njnt + np.arange(fb.size, dtype=np.int32)
        xanchor = take_rows(jnp.concatenate([xanchor, take_rows(xpos, fb)]), jfree)

    # MuJoCo's compiler marks frames that coincide with their body's (or inertial) frame and its
    # kinematics then copies that frame instead of reading pos/quat (mj_local2Global): a change to
    # such a geom_pos or body_iquat does nothing in MuJoCo, and a geom on the inertial frame moves
    # with body_ipos. Same here, with the flags as static masks.
    body, inertia = int(mjtSameFrame.mjSAMEFRAME_BODY), int(mjtSameFrame.mjSAMEFRAME_INERTIA)
    body_rot, inertia_rot = int(mjtSameFrame.mjSAMEFRAME_BODYROT), int(mjtSameFrame.mjSAMEFRAME_INERTIAROT)
    xmat = quat_to_mat(xquat)
    bsf = np.asarray(sys.body_sameframe, np.int32)
    xipos = _where(bsf == body, xpos, xpos + rotate(sys.body_ipos, xquat))
    ximat = _where(np.isin(bsf, (body, body_rot)), xmat, quat_to_mat(quat_mul(xquat, sys.body_iquat)))
    gb = st.geom_body
    gsf = np.asarray(sys.geom_sameframe, np.int32)
    geom_xpos = xpos[gb] + rotate(sys.geom_pos, xquat[gb])
    geom_xpos = _where(gsf == inertia, xipos[gb], geom_xpos)
    geom_xpos = _where(gsf == body, xpos[gb], geom_xpos)
    geom_xmat = quat_to_mat(quat_mul(xquat[gb], sys.geom_quat))
    geom_xmat = _where(np.isin(gsf, (body, body_rot)), xmat[gb],
                       _where(np.isin(gsf, (inertia, inertia_rot)), ximat[gb], geom_xmat))
    return Frames(xpos, xquat, xanchor, xaxis, xipos, ximat, geom_xpos, geom_xmat)


def _where(mask: np.ndarray, a: jax.Array, b: jax.Array) -> jax.Array:
    """`a` on rows where the static `mask` holds, else `b` (no op when the mask is all false)."""
    if not mask.any():
        return b
    if mask.all():
        return a
    return jnp.where(jnp.asarray(mask).reshape(mask.shape + (1,) * (a.ndim - 1)), a, b)


def site_frames(sys: System, fr: Frames, sites: np.ndarray) -> tuple[jax.Array, jax.Array]:
    """(n, 3) positions and (n, 3, 3) orientations of `sites` in the world (MuJoCo site_xpos, site_xmat)."""
    return site_frames_at(sys, fr.xpos, fr.xquat, fr.xipos, fr.ximat, sites)


def site_frames_at(sys: System, xpos: jax.Array, xquat: jax.Array, xipos: jax.Array, ximat: jax.Array,
                   sites: np.ndarray) -> tuple[jax.Array, jax.Array]:
    """`site_frames` from the body frames (nbody, ...) alone.

    Like geoms, a site whose frame MuJoCo's compiler found to coincide with its body's or inertial
    frame (`site_sameframe`) copies that frame, as MuJoCo's mj_local2Global does.
    """
    b = np.asarray(sys.site_bodyid, np.int32)[sites]
    sf = np.asarray(sys.site_sameframe, np.int32)[sites]
    q = xquat[b]
    pos = xpos[b] + rotate(sys.site_pos[sites], q)
    mat = quat_to_mat(quat_mul(q, sys.site_quat[sites]))
    f = mjtSameFrame
    pos = _where(sf == f.mjSAMEFRAME_INERTIA, xipos[b], pos)
    pos = _where(sf == f.mjSAMEFRAME_BODY, xpos[b], pos)
    mat = _where(np.isin(sf, (f.mjSAMEFRAME_BODY, f.mjSAMEFRAME_BODYROT)), quat_to_mat(q), mat)
    return pos, _where(np.isin(sf, (f.mjSAMEFRAME_INERTIA, f.mjSAMEFRAME_INERTIAROT)), ximat[b], mat)


def site_xpos(sys: System, fr: Frames, sites: np.ndarray) -> jax.Array:
    """(n, 3) world positions of `sites` (MuJoCo site_xpos); see `site_frames`."""
    return site_frames(sys, fr, sites)[0]
