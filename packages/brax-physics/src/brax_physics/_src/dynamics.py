"""Velocity and force stages: bias forces (RNE), passive forces, actuation, smooth acceleration."""

from __future__ import annotations

from typing import Final, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from brax_math import cross, force_cross, inertia_mul, normalize, quat_log, relative_quat
from mujoco import mjtBias, mjtDisableBit, mjtDyn, mjtGain, mjtJoint, mjtTrn

from brax_physics._src import linalg
from brax_physics._src.com import mm
from brax_physics._src.kinematics import assemble_rows
from brax_physics._src.linalg import MINVAL
from brax_physics._src.structure import structure
from brax_physics._src.system import System
from brax_physics._src.transmission import Transmission, inherited, joint_only
from brax_physics._src.transmission import velocity as transmission_velocity


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


def dof_damping(sys: System) -> jax.Array:
    """(nv,) dof damping including what joints inherit from their actuators' `actuator_damping`."""
    extra = inherited(sys, sys.actuator_damping)
    return sys.dof_damping if extra is None else sys.dof_damping + extra


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
        frc = frc - dof_damping(sys) * qd
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
    torque = cross(xipos - subtree_com[st.root], force)
    wrench = mm(jnp.asarray(st.subtree), jnp.concatenate([torque, force], axis=-1))
    return jnp.sum(cdof * wrench[st.dof_body], axis=-1)


class Actuation(NamedTuple):
    """Actuation stage outputs."""

    ctrl: jax.Array  # (nu,) after ctrlrange clamping
    force: jax.Array  # (nu,) actuator_force after forcerange clamping
    qfrc: jax.Array  # (nv,) qfrc_actuator
    dforce_dvel: jax.Array  # (nu,) d force / d actuator velocity (0 where the force is clamped)
    act_dot: jax.Array  # (na,) activation derivative
    velocity: jax.Array  # (nu,) actuator_velocity = moment · qd


_JOINT_TRN: Final = (mjtTrn.mjTRN_JOINT, mjtTrn.mjTRN_JOINTINPARENT)


def _types(codes: tuple[int, ...], *wanted: int) -> np.ndarray:
    return np.isin(np.asarray(codes, np.int32), np.asarray(wanted, np.int32))


def _stateful(sys: System) -> tuple[np.ndarray, np.ndarray]:
    """Actuators with an activation and their addresses in `act` (each has one: `actuator_actnum` <= 1)."""
    adr = np.asarray(sys.actuator_actadr, np.int32).reshape(sys.nu)
    ids = np.flatnonzero(adr >= 0).astype(np.int32)
    return ids, adr[ids]


def next_activation(sys: System, act: jax.Array, act_dot: jax.Array) -> jax.Array:
    """(na,) activations advanced over one timestep by `act_dot` (MuJoCo mj_nextActivation).

    filterexact integrates its linear filter exactly; the others by Euler; then actrange clamps.
    """
    ids, adr = _stateful(sys)
    h = sys.opt.timestep
    a, dot = act[adr], act_dot[adr]
    nxt = a + h * dot
    exact = _types(sys.actuator_dyntype, mjtDyn.mjDYN_FILTEREXACT)[ids]
    if exact.any():
        tau = jnp.maximum(MINVAL, sys.actuator_dynprm[ids, 0])
        nxt = jnp.where(exact, a + dot * tau * (1 - jnp.exp(-h / tau)), nxt)
    limited = np.asarray(sys.actuator_actlimited, bool).reshape(sys.nu)[ids]
    if limited.any():
        rng = sys.actuator_actrange[ids]
        nxt = jnp.where(limited, jnp.clip(nxt, rng[:, 0], rng[:, 1]), nxt)
    return jnp.zeros_like(act).at[adr].set(nxt)


def _muscle_scale(prm: jax.Array, lengthrange: jax.Array, acc0: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Peak force (scale / acc0 where force < 0) and optimal length L0 of muscles."""
    force = jnp.where(prm[:, 2] < 0, prm[:, 3] / jnp.maximum(MINVAL, acc0), prm[:, 2])
    l0 = (lengthrange[:, 1] - lengthrange[:, 0]) / jnp.maximum(MINVAL, prm[:, 1] - prm[:, 0])
    return force, l0


def _muscle_length(prm: jax.Array, lengthrange: jax.Array, l0: jax.Array, length: jax.Array) -> jax.Array:
    """Normalized muscle length (1 at the optimum)."""
    return prm[:, 0] + (length - lengthrange[:, 0]) / jnp.maximum(MINVAL, l0)


def _gain_length(x: jax.Array, lmin: jax.Array, lmax: jax.Array) -> jax.Array:
    """MuJoCo's mju_muscleGainLength: piecewise-quadratic active force-length curve (peak 1 at x = 1)."""
    a, b = 0.5 * (lmin + 1), 0.5 * (1 + lmax)
    y1 = (x - lmin) / jnp.maximum(MINVAL, a - lmin)
    y2 = (1 - x) / jnp.maximum(MINVAL, 1 - a)
    y3 = (x - 1) / jnp.maximum(MINVAL, b - 1)
    y4 = (lmax - x) / jnp.maximum(MINVAL, lmax - b)
    out = jnp.where(x <= a, 0.5 * y1 * y1, jnp.where(x <= 1, 1 - 0.5 * y2 * y2,
                                                      jnp.where(x <= b, 1 - 0.5 * y3 * y3, 0.5 * y4 * y4)))
    return jnp.where((lmin <= x) & (x <= lmax), out, 0.0)


def muscle_gain(prm: jax.Array, lengthrange: jax.Array, acc0: jax.Array, length: jax.Array,
                velocity: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Muscle gains (mju_muscleGain, negative) and their velocity derivatives (mjd_muscleGain_vel)."""
    force, l0 = _muscle_scale(prm, lengthrange, acc0)
    fl = _gain_length(_muscle_length(prm, lengthrange, l0, length), prm[:, 4], prm[:, 5])
    vscale = jnp.maximum(MINVAL, l0 * prm[:, 6])
    v = velocity / vscale
    fvmax = prm[:, 8]
    y = fvmax - 1
    ysafe = jnp.maximum(MINVAL, y)
    fv = jnp.where(v <= -1, 0.0, jnp.where(v <= 0, (v + 1) * (v + 1),
                                          jnp.where(v <= y, fvmax - (y - v) * (y - v) / ysafe, fvmax)))
    dfv = jnp.where(v <= -1, 0.0,
                    jnp.where(v <= 0, 2 * v + 2, jnp.where(v <= y, (2 * y - 2 * v) / ysafe, 0.0)))
    return -force * fl * fv, -force * fl * dfv / vscale


def muscle_bias(prm: jax.Array, lengthrange: jax.Array, acc0: jax.Array, length: jax.Array) -> jax.Array:
    """Muscle passive forces (mju_muscleBias, negative): half-quadratic to (1 + lmax)/2, linear beyond."""
    force, l0 = _muscle_scale(prm, lengthrange, acc0)
    x = _muscle_length(prm, lengthrange, l0, length)
    b = 0.5 * (1 + prm[:, 5])
    w = jnp.maximum(MINVAL, b - 1)
    y1, y2 = (x - 1) / w, (x - b) / w
    out = jnp.where(x <= b, 0.5 * y1 * y1, 0.5 + y2)
    return jnp.where(x <= 1, 0.0, -force * prm[:, 7] * out)


def muscle_dynamics(ctrl: jax.Array, act: jax.Array, prm: jax.Array) -> jax.Array:
    """Muscle activation derivative (mju_muscleDynamics): asymmetric time constants, optional smoothing."""
    c = jnp.clip(ctrl, 0, 1)
    a = jnp.clip(act, 0, 1)
    tau_act = prm[:, 0] * (0.5 + 1.5 * a)
    tau_deact = prm[:, 1] / (0.5 + 1.5 * a)
    width = prm[:, 2]
    dctrl = c - act
    x = jnp.clip(dctrl / jnp.where(width < MINVAL, 1.0, width) + 0.5, 0.0, 1.0)
    smooth = tau_deact + (tau_act - tau_deact) * x * x * x * (3 * x * (2 * x - 5) + 10)
    tau = jnp.where(width < MINVAL, jnp.where(dctrl > 0, tau_act, tau_deact), smooth)
    return dctrl / jnp.maximum(MINVAL, tau)


def actuation(sys: System, trn: Transmission, qd: jax.Array, ctrl: jax.Array, act: jax.Array) -> Actuation:
    """Actuator forces and activation derivatives (MuJoCo mj_fwdActuation) for control `ctrl` (nu,) and
    activations `act` (na,), given the transmission at the current positions."""
    st = structure(sys)
    dtype = qd.dtype
    fast = joint_only(sys)
    velocity = transmission_velocity(sys, trn.moment, qd)
    if sys.nu == 0 or sys.opt.disableflags & mjtDisableBit.mjDSBL_ACTUATION:
        zero_u = jnp.zeros(sys.nu, dtype)
        return Actuation(ctrl, zero_u, jnp.zeros(sys.nv, dtype), zero_u, jnp.zeros(sys.na, dtype),
                         jnp.zeros(sys.nu, dtype))
    raw = ctrl
    if not sys.opt.disableflags & mjtDisableBit.mjDSBL_CLAMPCTRL and any(sys.actuator_ctrllimited):
        lim = jnp.asarray(sys.actuator_ctrllimited)
        rng = sys.actuator_ctrlrange
        ctrl = jnp.where(lim, jnp.clip(ctrl, rng[:, 0], rng[:, 1]), ctrl)
    length = trn.length

    # activation dynamics, and the force's input: ctrl, or the activation (next one if actearly)
    act_dot = jnp.zeros(sys.na, dtype)
    inp, inp_raw = ctrl, raw  # MuJoCo's velocity derivative reads the unclamped ctrl
    if sys.na:
        ids, adr = _stateful(sys)
        dyn = np.asarray(sys.actuator_dyntype, np.int32)[ids]
        u, a, prm = ctrl[ids], act[adr], sys.actuator_dynprm[ids]
        dot = jnp.zeros(ids.size, dtype)
        if (dyn == mjtDyn.mjDYN_INTEGRATOR).any():
            dot = jnp.where(dyn == mjtDyn.mjDYN_INTEGRATOR, u, dot)
        filt = np.isin(dyn, (mjtDyn.mjDYN_FILTER, mjtDyn.mjDYN_FILTEREXACT))
        if filt.any():
            dot = jnp.where(filt, (u - a) / jnp.maximum(MINVAL, prm[:, 0]), dot)
        if (dyn == mjtDyn.mjDYN_MUSCLE).any():
            dot = jnp.where(dyn == mjtDyn.mjDYN_MUSCLE, muscle_dynamics(u, a, prm), dot)
        act_dot = act_dot.at[adr].set(dot)
        early = np.asarray(sys.actuator_actearly, bool).reshape(sys.nu)[ids]
        used = a
        if early.any():
            used = jnp.where(early, next_activation(sys, act, act_dot)[adr], a)
        inp = inp.at[ids].set(used)
        inp_raw = inp_raw.at[ids].set(used)

    gaintype, biastype = sys.actuator_gaintype, sys.actuator_biastype
    gain = sys.actuator_gainprm[:, 0]
    dforce = jnp.zeros(sys.nu, dtype)
    g = sys.actuator_gainprm
    affine = _types(gaintype, mjtGain.mjGAIN_AFFINE)
    if affine.any():
        gain = jnp.where(affine, g[:, 0] + g[:, 1] * length + g[:, 2] * velocity, gain)
        dforce = jnp.where(affine, g[:, 2] * inp_raw, dforce)
    # muscle curves only on muscles (elsewhere their normalizations can overflow, and NaN the gradients)
    m = np.flatnonzero(_types(gaintype, mjtGain.mjGAIN_MUSCLE))
    if m.size:
        mgain, mdgain = muscle_gain(g[m], sys.actuator_lengthrange[m], sys.actuator_acc0[m], length[m],
                                    velocity[m])
        gain = gain.at[m].set(mgain)
        dforce = dforce.at[m].set(mdgain * inp_raw[m])
    force = gain * inp
    b = sys.actuator_biasprm
    affine = _types(biastype, mjtBias.mjBIAS_AFFINE)
    if affine.any():
        force = force + jnp.where(affine, b[:, 0] + b[:, 1] * length + b[:, 2] * velocity, 0.0)
        dforce = dforce + jnp.where(affine, b[:, 2], 0.0)
    m = np.flatnonzero(_types(biastype, mjtBias.mjBIAS_MUSCLE))
    if m.size:
        lr = sys.actuator_lengthrange[m]
        force = force.at[m].add(muscle_bias(b[m], lr, sys.actuator_acc0[m], length[m]))
    if any(sys.actuator_forcelimited):
        flim = jnp.asarray(sys.actuator_forcelimited)
        rng = sys.actuator_forcerange
        force = jnp.where(flim, jnp.clip(force, rng[:, 0], rng[:, 1]), force)
        clamped = flim & ((force <= rng[:, 0]) | (force >= rng[:, 1]))
        dforce = jnp.where(clamped, 0.0, dforce)
    if fast and np.unique(st.act_dof).size == st.act_dof.size:  # one actuator per dof at most
        qfrc = assemble_rows([sys.actuator_gear[:, 0] * force], [st.act_dof], sys.nv)
    elif fast:
        qfrc = jnp.zeros(sys.nv, dtype).at[st.act_dof].add(sys.actuator_gear[:, 0] * force)
    else:
        qfrc = mm(trn.moment.T, force)
    if any(sys.jnt_actfrclimited):
        # MuJoCo clamps the total actuator force at each limited joint's first dof
        jnts = np.flatnonzero(np.asarray(sys.jnt_actfrclimited, bool)).astype(np.int32)
        dofs = np.asarray(sys.jnt_dofadr, np.int32)[jnts]
        rng = sys.jnt_actfrcrange[jnts]
        total = jnp.clip(qfrc[dofs], rng[:, 0], rng[:, 1])
        qfrc = qfrc.at[dofs].set(total)
        # MuJoCo 4's implicit derivative then drops the joint actuators of a clamped joint
        clamped = jnp.zeros(sys.njnt, bool).at[jnts].set((total <= rng[:, 0]) | (total >= rng[:, 1]))
        on_joint = _types(sys.actuator_trntype, *_JOINT_TRN)
        target = np.asarray([t[0] for t in sys.actuator_trnid], np.int32).reshape(sys.nu)
        dforce = jnp.where(on_joint & clamped[np.where(on_joint, target, 0)], 0.0, dforce)
    return Actuation(ctrl, force, qfrc, dforce, act_dot, velocity)


def factor(m: jax.Array) -> jax.Array:
    """(nv, nv) lower Cholesky factor of an SPD matrix (carries no gradient: see `solve`)."""
    return linalg.cholesky(m)


def solve(m: jax.Array, l: jax.Array, b: jax.Array) -> jax.Array:
    """Solve M x = b for x (nv,) given M's lower factor L; gradients flow through M and b."""
    return linalg.cho_solve(m, l, b)
