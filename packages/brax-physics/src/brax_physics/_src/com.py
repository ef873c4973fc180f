"""Com-based spatial quantities (MuJoCo mj_comPos, mj_crb, mj_comVel).

Every kinematic tree uses one frame: world orientation, origin at the tree's center of mass
`subtree_com[root]`. Motion vectors are [ω; v] with v the velocity of the body-fixed point at that
origin; force vectors are [torque about it; force]. One shared frame per tree means the recursions
below need no frame changes, so they reduce to masked sums (see `structure`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from brax_math import com_inertia, inertia_mul, motion_cross, quat_to_mat, rotation_motion
from mujoco import mjtJoint

from brax_physics._src import linalg
from brax_physics._src.kinematics import Frames, assemble_rows
from brax_physics._src.lowering.products import mm as mm  # the tree's products (re-exported)
from brax_physics._src.structure import structure
from brax_physics._src.system import System
from brax_physics._src.transmission import inherited


def subtree_com(sys: System, xipos: jax.Array) -> jax.Array:
    """(nbody, 3) center of mass of each body's subtree (its own xipos if the subtree is massless)."""
    st = structure(sys)
    sub = jnp.asarray(st.subtree)
    mass = mm(sub, sys.body_mass[:, None])
    mpos = mm(sub, sys.body_mass[:, None] * xipos)
    heavy = mass > 1e-15
    return jnp.where(heavy, mpos / jnp.where(heavy, mass, 1.0), xipos)


def cinert(sys: System, fr: Frames, com: jax.Array) -> jax.Array:
    """(nbody, 10) body inertias about their tree's com, world axes (MuJoCo cinert)."""
    st = structure(sys)
    d = fr.xipos - com[st.root]
    return com_inertia(sys.body_mass, sys.body_inertia, fr.ximat, d)


def cdof(sys: System, fr: Frames, com: jax.Array) -> jax.Array:
    """(nv, 6) com-based motion axis of every dof."""
    st = structure(sys)
    dtype = fr.xpos.dtype
    c = com[st.root]  # per body
    parts, dofs = [], []

    for t in (mjtJoint.mjJNT_HINGE, mjtJoint.mjJNT_SLIDE):
        js = st.jnt_of_type[t]
        if js.size:
            a = fr.xaxis[js]
            if t == mjtJoint.mjJNT_HINGE:
                parts.append(rotation_motion(a, c[st.jnt_body[js]] - fr.xanchor[js]))
            else:
                parts.append(jnp.concatenate([jnp.zeros_like(a), a], axis=-1))
            dofs.append(st.jnt_dofs[t])

    for t in (mjtJoint.mjJNT_BALL, mjtJoint.mjJNT_FREE):
        js = st.jnt_of_type[t]
        if not js.size:
            continue
        b = st.jnt_body[js]
        # rotational dofs turn about the body's current local axes (columns of xmat)
        axes = jnp.swapaxes(quat_to_mat(fr.xquat[b]), -1, -2)  # (n, k, xyz)
        off = (c[b] - fr.xanchor[js])[:, None, :]
        rot = rotation_motion(axes, jnp.broadcast_to(off, axes.shape)).reshape(-1, 6)
        d = st.jnt_dofs[t]
        if t == mjtJoint.mjJNT_FREE:
            eye = jnp.broadcast_to(jnp.eye(3, dtype=dtype), (js.size, 3, 3))
            parts.append(jnp.concatenate([jnp.zeros_like(eye), eye], axis=-1).reshape(-1, 6))
            dofs.append(d[:, :3].reshape(-1))
            d = d[:, 3:]
        parts.append(rot)
        dofs.append(d.reshape(-1))
    if not parts:
        return jnp.zeros((sys.nv, 6), dtype)
    return assemble_rows(parts, dofs, sys.nv)


def mass_matrix(sys: System, cinert_: jax.Array, cdof_: jax.Array) -> jax.Array:
    """(nv, nv) joint-space inertia by composite rigid bodies, plus armature on the diagonal."""
    st = structure(sys)
    crb = mm(jnp.asarray(st.subtree), cinert_)  # composite inertia of each subtree (same frame)
    f = inertia_mul(crb[st.dof_body], cdof_)  # (nv, 6) crb_body(i) · cdof_i
    # M[i, j] = cdof_j · crb_body(i) · cdof_i for j an ancestor of i (or i); zero across branches
    prod = mm(f, cdof_.T)
    strict = jnp.where(jnp.asarray(st.dof_anc & ~np.eye(sys.nv, dtype=bool)), prod, 0.0)
    armature = sys.dof_armature
    from_actuators = inherited(sys, sys.actuator_armature)
    if from_actuators is not None:
        armature = armature + from_actuators
    return linalg.add_diagonal(strict + strict.T, linalg.diagonal(prod) + armature)


def com_vel(sys: System, cdof_: jax.Array, qd: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Body velocities cvel (nbody, 6) and dof axis derivatives cdof_dot (nv, 6)."""
    st = structure(sys)
    vel = cdof_ * qd[:, None]
    cvel = mm(jnp.asarray(st.body_dof), vel)
    before = mm(jnp.asarray(st.dof_before), vel)
    return cvel, motion_cross(before, cdof_)
