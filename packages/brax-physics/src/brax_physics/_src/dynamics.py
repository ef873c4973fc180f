"""Velocity and force stages: bias forces (RNE), passive forces, actuation, smooth acceleration."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from brax_math import force_cross, inertia_mul, normalize, quat_log, relative_quat
from mujoco import mjtBias, mjtDisableBit, mjtJoint

from brax_physics._src import linalg
from brax_physics._src.com import mm
from brax_physics._src.structure import structure
from brax_physics._src.system import System


def rne(sys: System, cinert: jax.Array, cdof: jax.Array, cvel: jax.Array, cdof_dot: jax.Array,
        qd: jax.Array) -> jax.Array:
    """(nv,) bias force qfrc_bias: Coriolis, centrifugal and gravity (recursive Newton-Euler, qacc = 0)."""
    st = structure(sys)
    dtype = cdof.dtype
    # gravity enters as a fictitious upward acceleration of the world
    g = jnp.zeros(3, dtype) if sys.opt.disableflags & mjtDisableBit.mjDSBL_GRAVITY else sys.opt.gravity
    cacc = mm(jnp.asarray(st.body_dof), cdof_dot * qd[:, None])
    cacc = cacc + jnp.concatenate([jnp.zeros(3, dtype), -g])[None, :]
    cfrc = inertia_mul(cinert, cacc) + force_cross(cvel, inertia_mul(cinert, cvel))
    cfrc_sub = mm(jnp.asarray(st.subtree), cfrc)  # total force carried by each body's subtree
    return jnp.sum(cdof * cfrc_sub[st.dof_body], axis=-1)


def _rotation_spring(sys: System, jnts: np.ndarray, qpos: np.ndarray, q: jax.Array) -> jax.Array:
    """(n, 3) spring torques of quaternion coordinates `qpos` (n, 4) of joints `jnts` (MuJoCo mju_subQuat).

    The rotation vector from the rest orientation qpos_spring to normalize(q), in the joint's local
    frame (the frame of its angular velocity), times -stiffness.
    """
    turn = relative_quat(sys.qpos_spring[qpos], normalize(q[qpos]))
    return -sys.jnt_stiffness[jnts][:, None] * quat_log(turn)


def passive(sys: System, q: jax.Array, qd: jax.Array) -> jax.Array:
    """(nv,) passive force qfrc_passive: joint springs and dof dampers (MuJoCo mj_springdamper)."""
    st = structure(sys)
    frc = jnp.zeros(sys.nv, qd.dtype)
    springs = not sys.opt.disableflags & mjtDisableBit.mjDSBL_SPRING
    if springs and st.scalar_qpos.size:
        jnts = st.scalar_jnt
        stretch = q[st.scalar_qpos] - sys.qpos_spring[st.scalar_qpos]
        frc = frc.at[st.scalar_dof].add(-sys.jnt_stiffness[jnts] * stretch)
    # ball and free joints: only those with stiffness at load trace their springs
    stiff = np.asarray(sys.jnt_hasstiffness, bool).reshape(-1)
    ball = st.jnt_of_type[mjtJoint.mjJNT_BALL]
    ball = ball[stiff[ball]] if springs else ball[:0]
    if ball.size:
        adr = np.asarray(sys.jnt_qposadr)[ball][:, None] + np.arange(4)
        dof = np.asarray(sys.jnt_dofadr)[ball][:, None] + np.arange(3)
        frc = frc.at[dof].add(_rotation_spring(sys, ball, adr, q))
    free = st.jnt_of_type[mjtJoint.mjJNT_FREE]
    free = free[stiff[free]] if springs else free[:0]
    if free.size:
        adr = np.asarray(sys.jnt_qposadr)[free][:, None] + np.arange(7)
        dof = np.asarray(sys.jnt_dofadr)[free][:, None] + np.arange(6)
        k = sys.jnt_stiffness[free][:, None]
        lin = -k * (q[adr[:, :3]] - sys.qpos_spring[adr[:, :3]])
        frc = frc.at[dof].add(jnp.concatenate([lin, _rotation_spring(sys, free, adr[:, 3:], q)], axis=-1))
    if not sys.opt.disableflags & mjtDisableBit.mjDSBL_DAMPER:
        frc = frc - sys.dof_damping * qd
    return frc


def gravcomp(sys: System, xipos: jax.Array, subtree_com: jax.Array, cdof: jax.Array) -> jax.Array:
    """(nv,) qfrc_gravcomp: each body's force −gravcomp·mass·gravity at its com (MuJoCo mj_gravcomp).

    Zero when gravity is disabled; models without gravcomp at load (`ngravcomp == 0`) trace nothing.
    """
    st = structure(sys)
    if not sys.ngravcomp or sys.opt.disableflags & mjtDisableBit.mjDSBL_GRAVITY:
        return jnp.zeros(sys.nv, cdof.dtype)
    force = -(sys.body_mass * sys.body_gravcomp)[:, None] * sys.opt.gravity[None, :]  # (nbody, 3)
    # as a com-frame wrench [torque about the tree's com point; force], summed over each subtree
    torque = jnp.cross(xipos - subtree_com[st.root], force)
    wrench = mm(jnp.asarray(st.subtree), jnp.concatenate([torque, force], axis=-1))
    return jnp.sum(cdof * wrench[st.dof_body], axis=-1)


class Actuation(NamedTuple):
    """Actuation stage outputs."""

    ctrl: jax.Array  # (nu,) after ctrlrange clamping
    force: jax.Array  # (nu,) actuator_force after forcerange clamping
    qfrc: jax.Array  # (nv,) qfrc_actuator
    dforce_dvel: jax.Array  # (nu,) d force / d actuator velocity (0 where the force is clamped)


def actuation(sys: System, q: jax.Array, qd: jax.Array, act: jax.Array) -> Actuation:
    """Actuator forces for joint transmissions, fixed gain and none/affine bias."""
    st = structure(sys)
    dtype = qd.dtype
    if sys.nu == 0 or sys.opt.disableflags & mjtDisableBit.mjDSBL_ACTUATION:
        zero_u = jnp.zeros(sys.nu, dtype)
        return Actuation(act, zero_u, jnp.zeros(sys.nv, dtype), zero_u)
    ctrl = act
    if not sys.opt.disableflags & mjtDisableBit.mjDSBL_CLAMPCTRL and any(sys.actuator_ctrllimited):
        lim = jnp.asarray(sys.actuator_ctrllimited)
        rng = sys.actuator_ctrlrange
        ctrl = jnp.where(lim, jnp.clip(ctrl, rng[:, 0], rng[:, 1]), ctrl)
    gear = sys.actuator_gear[:, 0]
    length = gear * q[st.act_qpos]
    velocity = gear * qd[st.act_dof]
    force = sys.actuator_gainprm[:, 0] * ctrl
    dforce = jnp.zeros(sys.nu, dtype)
    if any(t == mjtBias.mjBIAS_AFFINE for t in sys.actuator_biastype):
        affine = jnp.asarray([t == mjtBias.mjBIAS_AFFINE for t in sys.actuator_biastype])
        b = sys.actuator_biasprm
        force = force + jnp.where(affine, b[:, 0] + b[:, 1] * length + b[:, 2] * velocity, 0.0)
        dforce = jnp.where(affine, b[:, 2], 0.0)
    if any(sys.actuator_forcelimited):
        flim = jnp.asarray(sys.actuator_forcelimited)
        rng = sys.actuator_forcerange
        clamped = flim & ((force < rng[:, 0]) | (force > rng[:, 1]))
        force = jnp.where(flim, jnp.clip(force, rng[:, 0], rng[:, 1]), force)
        dforce = jnp.where(clamped, 0.0, dforce)
    qfrc = jnp.zeros(sys.nv, dtype).at[st.act_dof].add(gear * force)
    return Actuation(ctrl, force, qfrc, dforce)


def factor(m: jax.Array) -> jax.Array:
    """(nv, nv) lower Cholesky factor of an SPD matrix (carries no gradient: see `solve`)."""
    return linalg.cholesky(m)


def solve(m: jax.Array, l: jax.Array, b: jax.Array) -> jax.Array:
    """Solve M x = b for x (nv,) given M's lower factor L; gradients flow through M and b."""
    return linalg.cho_solve(m, l, b)
