"""Velocity and force stages: bias forces (RNE), passive forces, actuation, smooth acceleration."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from brax_math import force_cross, inertia_mul
from mujoco import mjtBias, mjtDisableBit

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


def passive(sys: System, q: jax.Array, qd: jax.Array) -> jax.Array:
    """(nv,) passive force qfrc_passive: joint springs (hinge/slide) and dof dampers."""
    st = structure(sys)
    frc = jnp.zeros(sys.nv, qd.dtype)
    if not sys.opt.disableflags & mjtDisableBit.mjDSBL_SPRING and st.scalar_qpos.size:
        jnts = st.scalar_jnt
        stretch = q[st.scalar_qpos] - sys.qpos_spring[st.scalar_qpos]
        frc = frc.at[st.scalar_dof].add(-sys.jnt_stiffness[jnts] * stretch)
    if not sys.opt.disableflags & mjtDisableBit.mjDSBL_DAMPER:
        frc = frc - sys.dof_damping * qd
    return frc


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
