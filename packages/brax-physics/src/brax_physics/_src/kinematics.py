"""Position kinematics: body, joint, inertial and geom frames in the world (MuJoCo mj_kinematics)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from brax_math import axis_angle_to_quat, normalize, quat_identity, quat_mul, quat_to_mat, rotate

from brax_physics._src.structure import Structure, structure
from brax_physics._src.system import JNT_BALL, JNT_FREE, JNT_HINGE, JNT_SLIDE, System


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


def _joint_transforms(sys: System, st: Structure, q: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(njnt, 3), (njnt, 4): the motion each non-free joint adds in its body's current frame."""
    jpos = jnp.zeros((sys.njnt, 3), q.dtype)
    jquat = quat_identity((sys.njnt,), q.dtype)

    h = st.jnt_of_type[JNT_HINGE]
    if h.size:
        adr = st.jnt_qpos[JNT_HINGE]
        rot = axis_angle_to_quat(sys.jnt_axis[h], q[adr] - sys.qpos0[adr])
        # rotation about the anchor jnt_pos: the anchor point stays where it was
        jpos = jpos.at[h].set(sys.jnt_pos[h] - rotate(sys.jnt_pos[h], rot))
        jquat = jquat.at[h].set(rot)

    s = st.jnt_of_type[JNT_SLIDE]
    if s.size:
        adr = st.jnt_qpos[JNT_SLIDE]
        jpos = jpos.at[s].set(sys.jnt_axis[s] * (q[adr] - sys.qpos0[adr])[:, None])

    b = st.jnt_of_type[JNT_BALL]
    if b.size:
        rot = normalize(q[st.jnt_qpos[JNT_BALL]])
        jpos = jpos.at[b].set(sys.jnt_pos[b] - rotate(sys.jnt_pos[b], rot))
        jquat = jquat.at[b].set(rot)
    return jpos, jquat


def kinematics(sys: System, q: jax.Array) -> Frames:
    """World frames of bodies, joints, inertias and geoms at positions `q` (nq,)."""
    st = structure(sys)
    jpos, jquat = _joint_transforms(sys, st, q)

    # body frame relative to its parent: body_pos/quat, then each joint in order; remember the
    # frame each joint sees (before its own motion) to place its anchor and axis
    lpos, lquat = sys.body_pos, sys.body_quat
    pre_pos = jnp.zeros((sys.njnt, 3), q.dtype)
    pre_quat = quat_identity((sys.njnt,), q.dtype)
    for bodies, jnts in st.jnt_slots:
        pre_pos = pre_pos.at[jnts].set(lpos[bodies])
        pre_quat = pre_quat.at[jnts].set(lquat[bodies])
        lpos = lpos.at[bodies].add(rotate(jpos[jnts], lquat[bodies]))
        lquat = lquat.at[bodies].set(quat_mul(lquat[bodies], jquat[jnts]))
    fb = st.free_bodies
    if fb.size:
        # free joints (children of the world, sole joint of their body) set the pose directly
        fq = q[st.jnt_qpos[JNT_FREE]]
        lpos = lpos.at[fb].set(fq[:, :3])
        lquat = lquat.at[fb].set(normalize(fq[:, 3:]))

    xpos = jnp.zeros((sys.nbody, 3), q.dtype)
    xquat = quat_identity((sys.nbody,), q.dtype)
    for bodies in st.levels:
        p = st.parent[bodies]
        xpos = xpos.at[bodies].set(xpos[p] + rotate(lpos[bodies], xquat[p]))
        xquat = xquat.at[bodies].set(normalize(quat_mul(xquat[p], lquat[bodies])))

    # joint frame = parent frame composed with the body-local frame seen by the joint
    jp = st.parent[st.jnt_body]
    xanchor = xpos[jp] + rotate(pre_pos + rotate(sys.jnt_pos, pre_quat), xquat[jp])
    xaxis = rotate(sys.jnt_axis, quat_mul(xquat[jp], pre_quat))
    if fb.size:
        xanchor = xanchor.at[st.jnt_of_type[JNT_FREE]].set(xpos[fb])

    xipos = xpos + rotate(sys.body_ipos, xquat)
    ximat = quat_to_mat(quat_mul(xquat, sys.body_iquat))
    gb = st.geom_body
    geom_xpos = xpos[gb] + rotate(sys.geom_pos, xquat[gb])
    geom_xmat = quat_to_mat(quat_mul(xquat[gb], sys.geom_quat))
    return Frames(xpos, xquat, xanchor, xaxis, xipos, ximat, geom_xpos, geom_xmat)
