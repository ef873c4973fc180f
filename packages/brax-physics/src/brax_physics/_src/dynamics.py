"""Velocity and force stages: bias forces (RNE), passive forces, actuation, smooth acceleration."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl

from brax_physics._src.com import cross_force, inertia_mul, mm
from brax_physics._src.structure import structure
from brax_physics._src.system import (
    BIAS_AFFINE,
    DSBL_ACTUATION,
    DSBL_CLAMPCTRL,
    DSBL_DAMPER,
    DSBL_GRAVITY,
    DSBL_SPRING,
    System,
)


def rne(sys: System, cinert: jax.Array, cdof: jax.Array, cvel: jax.Array, cdof_dot: jax.Array,
        qd: jax.Array) -> jax.Array:
    """(nv,) bias force qfrc_bias: Coriolis, centrifugal and gravity (recursive Newton-Euler, qacc = 0)."""
    st = structure(sys)
    dtype = cdof.dtype
    # gravity enters as a fictitious upward acceleration of the world
    g = jnp.zeros(3, dtype) if sys.opt.disableflags & DSBL_GRAVITY else sys.opt.gravity
    cacc = mm(jnp.asarray(st.body_dof), cdof_dot * qd[:, None])
    cacc = cacc + jnp.concatenate([jnp.zeros(3, dtype), -g])[None, :]
    cfrc = inertia_mul(cinert, cacc) + cross_force(cvel, inertia_mul(cinert, cvel))
    cfrc_sub = mm(jnp.asarray(st.subtree), cfrc)  # total force carried by each body's subtree
    return jnp.sum(cdof * cfrc_sub[st.dof_body], axis=-1)


def passive(sys: System, q: jax.Array, qd: jax.Array) -> jax.Array:
    """(nv,) passive force qfrc_passive: joint springs (hinge/slide) and dof dampers."""
    st = structure(sys)
    frc = jnp.zeros(sys.nv, qd.dtype)
    if not sys.opt.disableflags & DSBL_SPRING and st.scalar_qpos.size:
        jnts = st.scalar_jnt
        stretch = q[st.scalar_qpos] - sys.qpos_spring[st.scalar_qpos]
        frc = frc.at[st.scalar_dof].add(-sys.jnt_stiffness[jnts] * stretch)
    if not sys.opt.disableflags & DSBL_DAMPER:
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
    if sys.nu == 0 or sys.opt.disableflags & DSBL_ACTUATION:
        zero_u = jnp.zeros(sys.nu, dtype)
        return Actuation(act, zero_u, jnp.zeros(sys.nv, dtype), zero_u)
    ctrl = act
    if not sys.opt.disableflags & DSBL_CLAMPCTRL and any(sys.actuator_ctrllimited):
        lim = jnp.asarray(sys.actuator_ctrllimited)
        rng = sys.actuator_ctrlrange
        ctrl = jnp.where(lim, jnp.clip(ctrl, rng[:, 0], rng[:, 1]), ctrl)
    gear = sys.actuator_gear[:, 0]
    length = gear * q[st.act_qpos]
    velocity = gear * qd[st.act_dof]
    force = sys.actuator_gainprm[:, 0] * ctrl
    dforce = jnp.zeros(sys.nu, dtype)
    if any(t == BIAS_AFFINE for t in sys.actuator_biastype):
        affine = jnp.asarray([t == BIAS_AFFINE for t in sys.actuator_biastype])
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


# Up to this size the factor and solves are unrolled into plain array ops. A LAPACK custom call
# has a fixed cost per call that dominates tiny matrices (measured on CPU, one scan of 1000
# factor+solve: n=2 0.56 us unrolled 0.07 us; batch 128: 20 us vs 0.5 us); from n=7 on LAPACK
# is as fast or faster and compiles much quicker, so larger matrices keep it. (The Newton solver's
# solves, several per step, use `linalg.spd_solve`'s batch-last column form under vmap; for the
# one factor and two solves per step here that form measured no faster and compiles longer.)
_UNROLL_MAX = 4


def factor(m: jax.Array) -> jax.Array:
    """(nv, nv) lower Cholesky factor of a symmetric positive definite matrix."""
    n = m.shape[-1]
    if n > _UNROLL_MAX:
        return jsl.cholesky(m, lower=True)
    idx = jnp.arange(n)
    cols: list[jax.Array] = []
    for j in range(n):  # trace-time unrolling over at most _UNROLL_MAX columns
        c = m[:, j]
        for k in range(j):
            c = c - cols[k] * cols[k][j]
        cols.append(jnp.where(idx >= j, c, 0.0) / jnp.sqrt(c[j]))
    return jnp.stack(cols, axis=1)


def solve(l: jax.Array, b: jax.Array) -> jax.Array:
    """Solve (L Lᵀ) x = b for x (nv,) given the lower factor L."""
    n = l.shape[-1]
    if n > _UNROLL_MAX:
        return jsl.cho_solve((l, True), b)
    r, ys = b, []
    for j in range(n):  # forward substitution, column by column
        ys.append(r[j] / l[j, j])
        r = r - l[:, j] * ys[-1]
    r, xs = jnp.stack(ys), [jnp.zeros((), b.dtype)] * n
    for j in reversed(range(n)):  # back substitution with Lᵀ
        xs[j] = r[j] / l[j, j]
        r = r - l[j, :] * xs[j]
    return jnp.stack(xs)
