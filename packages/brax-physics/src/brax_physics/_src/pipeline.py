"""The generalized-coordinates pipeline: `init`, `step`, `forward_kinematics`.

Stage order follows MuJoCo's mj_forward: position (kinematics, com quantities, CRB mass matrix and
its factor, collision), velocity (com velocities, passive forces, RNE bias), actuation, smooth
acceleration, constraints (rows for friction loss, joint limits and contacts, then the Newton
solver). Position-stage results (collision included) are stored in `State` for the state's own `q`,
so `step` computes them once per step, at the end, for the new positions (and the next `step`
reuses them).

Every stage runs under a `jax.named_scope` named after MuJoCo's function for it (`fwd_position`
with `kinematics`, `com_pos`, `crb`, `collision`, `factor_m`; `fwd_velocity` with `com_vel`,
`rne`, `passive`; `fwd_actuation`; `fwd_acceleration`; `fwd_constraint` with `make_constraint`,
`solve`, `constraint_force`; `sensor_pos`, `sensor_vel`, `sensor_acc`; `integrate`), so profiles
and HLO dumps read like the pipeline.

Sensors (`State.sensordata`) are computed at the point a step starts from, as MuJoCo's mj_step
computes them in mj_forward before it integrates: position sensors from the position stage stored in
the state, velocity sensors after the velocity stage, acceleration sensors after the constraint solve.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from brax_math import Motion, Transform, point_velocity
from mujoco import mjtDisableBit, mjtIntegrator

from brax_physics._src import com, constraint, dynamics, fluid, integrator, kinematics, sensor, solver, tendon
from brax_physics._src.collision.contact import Contact, collide
from brax_physics._src.state import State
from brax_physics._src.structure import structure
from brax_physics._src.system import System


class _Position(NamedTuple):
    frames: kinematics.Frames
    subtree_com: jax.Array
    cinert: jax.Array
    cdof: jax.Array
    mass_matrix: jax.Array
    mass_matrix_factor: jax.Array
    contact: Contact
    ten_length: jax.Array
    ten_J: jax.Array  # noqa: N815 (MuJoCo's name)


class _Acceleration(NamedTuple):
    act: dynamics.Actuation
    ten_velocity: jax.Array
    cvel: jax.Array
    cdof_dot: jax.Array
    qfrc_bias: jax.Array
    qfrc_passive: jax.Array
    qacc_smooth: jax.Array
    qacc: jax.Array
    efc_force: jax.Array
    qfrc_constraint: jax.Array


class _Mocap(NamedTuple):
    pos: jax.Array  # (nmocap, 3)
    quat: jax.Array  # (nmocap, 4)


def _position(sys: System, q: jax.Array, mocap: _Mocap | None = None) -> _Position:
    """Position stage at `q` with the mocap bodies at `mocap` (default: the model's poses)
    (MuJoCo's mj_fwdPosition)."""
    with jax.named_scope("fwd_position"):
        with jax.named_scope("kinematics"):
            fr = (kinematics.kinematics(sys, q) if mocap is None
                  else kinematics.kinematics(sys, q, mocap.pos, mocap.quat))
        with jax.named_scope("com_pos"):
            sub = com.subtree_com(sys, fr.xipos)
            cin = com.cinert(sys, fr, sub)
            cd = com.cdof(sys, fr, sub)
        with jax.named_scope("tendon"):
            ten_length, ten_J = tendon.tendon(sys, q, fr, sub, cd)
        with jax.named_scope("crb"):
            m = com.mass_matrix(sys, cin, cd)
            if sys.ntendon:
                m = m + tendon.armature(sys, ten_J)
        with jax.named_scope("collision"):
            con = collide(sys, fr.geom_xpos, fr.geom_xmat)
        with jax.named_scope("factor_m"):
            factor = dynamics.factor(m)
    return _Position(fr, sub, cin, cd, m, factor, con, ten_length, ten_J)


def _state_position(state: State) -> _Position:
    """The position stage stored in `state` (for its own q)."""
    fr = kinematics.Frames(state.x.pos, state.x.rot, state.xanchor, state.xaxis, state.xipos, state.ximat,
                           state.geom_xpos, state.geom_xmat)
    return _Position(fr, state.subtree_com, state.cinert, state.cdof, state.mass_matrix,
                     state.mass_matrix_factor, state.contact, state.ten_length, state.ten_J)


def solver_config(sys: System) -> solver.Config:
    """Static solver settings of `sys`."""
    o = sys.opt
    return solver.Config(
        is_floss=tuple(bool(b) for b in constraint.layout(sys).is_floss), iterations=o.iterations,
        tolerance=o.tolerance, warmstart=not o.disableflags & mjtDisableBit.mjDSBL_WARMSTART,
    )


def _acceleration(sys: System, q: jax.Array, qd: jax.Array, act: jax.Array, pos: _Position,
                  qacc_warmstart: jax.Array) -> _Acceleration:
    """Velocity, actuation, acceleration and constraint stages, given the position stage at `q`."""
    with jax.named_scope("fwd_velocity"):
        ten_velocity = com.mm(pos.ten_J, qd) if sys.ntendon else jnp.zeros(0, qd.dtype)
        with jax.named_scope("com_vel"):
            cvel, cdof_dot = com.com_vel(sys, pos.cdof, qd)
        with jax.named_scope("rne"):
            bias = dynamics.rne(sys, pos.cinert, pos.cdof, cvel, cdof_dot, qd)
        with jax.named_scope("passive"):
            pas = dynamics.passive(sys, q, qd)
            if sys.ntendon:
                pas = pas + tendon.passive(sys, pos.ten_length, pos.ten_J, ten_velocity)
            # MuJoCo adds gravity compensation and fluid forces to qfrc_passive, and skips every
            # passive force when springs and dampers are both disabled (mj_passive's early return).
            dflags = sys.opt.disableflags
            no_passive = (dflags & mjtDisableBit.mjDSBL_SPRING) and (dflags & mjtDisableBit.mjDSBL_DAMPER)
            if sys.ngravcomp and not no_passive:
                pas = pas + dynamics.gravcomp(sys, pos.frames.xipos, pos.subtree_com, pos.cdof)
            if sys.opt.has_fluid and not no_passive:
                fr = pos.frames
                pas = pas + fluid.fluid(sys, sys.opt.density, sys.opt.viscosity, sys.opt.wind, fr.xipos,
                                        fr.ximat, pos.subtree_com, cvel, pos.cdof)
    with jax.named_scope("fwd_actuation"):
        actu = dynamics.actuation(sys, q, qd, act)
    with jax.named_scope("fwd_acceleration"):
        qfrc_smooth = pas - bias + actu.qfrc
        qacc_smooth = dynamics.solve(pos.mass_matrix, pos.mass_matrix_factor, qfrc_smooth)
    if constraint.layout(sys).nefc == 0:
        zero = jnp.zeros(0, qd.dtype)
        return _Acceleration(actu, ten_velocity, cvel, cdof_dot, bias, pas, qacc_smooth, qacc_smooth, zero,
                             jnp.zeros_like(qd))
    with jax.named_scope("fwd_constraint"):
        with jax.named_scope("make_constraint"):
            rows = constraint.make_rows(sys, q, pos.cdof, pos.subtree_com, pos.contact, pos.ten_length,
                                       pos.ten_J)
            aref = constraint.reference_acceleration(rows, qd)
        prob = solver.Problem(M=pos.mass_matrix, qfrc_smooth=qfrc_smooth, qacc_smooth=qacc_smooth, J=rows.J,
                              D=rows.D, R=rows.R, aref=aref, floss=rows.floss)
        cfg = solver_config(sys)
        with jax.named_scope("solve"):
            qacc = solver.solve(cfg, prob, qacc_warmstart)
        with jax.named_scope("constraint_force"):
            efc_force = solver.constraint_force(cfg, prob, qacc)
            qfrc_constraint = com.mm(rows.J.T, efc_force)
    return _Acceleration(actu, ten_velocity, cvel, cdof_dot, bias, pas, qacc_smooth, qacc, efc_force,
                         qfrc_constraint)


def _body_velocity(sys: System, xpos: jax.Array, sub: jax.Array, cvel: jax.Array) -> Motion:
    """World angular velocity and linear velocity of each body origin, from com-based cvel."""
    with jax.named_scope("body_velocity"):
        offset = xpos - sub[structure(sys).root]
        return Motion(ang=cvel[:, :3], vel=point_velocity(cvel, offset))


def _make_state(sys: System, q: jax.Array, qd: jax.Array, mocap: _Mocap, time: jax.Array, pos: _Position,
                acc: _Acceleration, xd: Motion, sensordata: jax.Array) -> State:
    fr = pos.frames
    with jax.named_scope("contact_force"):
        force = constraint.contact_force(sys, pos.contact, acc.efc_force)
    contact = dataclasses.replace(pos.contact, force=force)
    return State(
        q=q, qd=qd, mocap_pos=mocap.pos, mocap_quat=mocap.quat, x=Transform(pos=fr.xpos, rot=fr.xquat), xd=xd,
        time=time, ctrl=acc.act.ctrl,
        xanchor=fr.xanchor, xaxis=fr.xaxis, xipos=fr.xipos, ximat=fr.ximat, geom_xpos=fr.geom_xpos,
        geom_xmat=fr.geom_xmat, subtree_com=pos.subtree_com, cinert=pos.cinert, cdof=pos.cdof,
        mass_matrix=pos.mass_matrix, mass_matrix_factor=pos.mass_matrix_factor,
        actuator_force=acc.act.force, qfrc_bias=acc.qfrc_bias, qfrc_passive=acc.qfrc_passive,
        qfrc_actuator=acc.act.qfrc, qacc_smooth=acc.qacc_smooth, qacc=acc.qacc,
        contact=contact, efc_force=acc.efc_force, qfrc_constraint=acc.qfrc_constraint,
        qacc_warmstart=acc.qacc, sensordata=sensordata, ten_length=pos.ten_length, ten_J=pos.ten_J,
        ten_velocity=acc.ten_velocity,
    )


def _sensors(sys: System, fwd: State, acc: _Acceleration, previous: jax.Array) -> jax.Array:
    """(nsensordata,) sensor values at `fwd`: the state after MuJoCo's mj_forward at a step's start.

    Every stage's sensors describe that point (its positions, velocities and the transition's
    forces), as MuJoCo's do after mj_step, which integrates after computing them. Models without
    sensors trace nothing; with sensors disabled the values stay `previous` (MuJoCo leaves them).
    """
    if sys.nsensor == 0 or sys.opt.disableflags & mjtDisableBit.mjDSBL_SENSOR:
        return previous
    with jax.named_scope("sensor_pos"):
        values = sensor.position(sys, fwd)
    with jax.named_scope("sensor_vel"):
        values |= sensor.velocity(sys, fwd, acc.cvel)
    with jax.named_scope("sensor_acc"):
        values |= sensor.acceleration(sys, fwd, acc.cvel, acc.cdof_dot)
        return sensor.assemble(sys, values)


def _checked(fn: str, name: str, x: Any, shape: tuple[int, ...], what: str, dtype: Any) -> jax.Array:
    """`x` as a `dtype` array, or ValueError naming the argument when its shape or dtype is wrong.

    Shapes are static under jit and vmap (vmap hides the batch axis), so this costs nothing at run time.
    """
    got = tuple(jnp.shape(x))
    if got != shape:
        raise ValueError(f"brax_physics.{fn}: {name} has shape {got}, expected {shape} ({what})")
    kind = getattr(x, "dtype", None)
    if kind is not None and not jnp.issubdtype(kind, jnp.floating):
        raise ValueError(f"brax_physics.{fn}: {name} must be floating point, got dtype {kind}")
    return jnp.asarray(x, dtype)


def init(sys: System, q: jax.Array | None = None, qd: jax.Array | None = None,
         act: jax.Array | None = None) -> State:
    """Fully populated `State` at `q` (nq,) (default qpos0) and `qd` (nv,) (default zeros).

    Force and acceleration fields are evaluated with control `act` (nu,) (default zeros). Mocap
    bodies start at their model pose (body_pos/body_quat), as after MuJoCo's mj_resetData.
    """
    dtype = sys.qpos0.dtype
    q = sys.qpos0 if q is None else _checked("init", "q", q, (sys.nq,), "sys.nq", dtype)
    qd = jnp.zeros(sys.nv, dtype) if qd is None else _checked("init", "qd", qd, (sys.nv,), "sys.nv", dtype)
    act = (jnp.zeros(sys.nu, dtype) if act is None
           else _checked("init", "act", act, (sys.nu,), "sys.nu", dtype))
    mb = kinematics.mocap_bodies(sys)
    mocap = _Mocap(sys.body_pos[mb], sys.body_quat[mb])
    pos = _position(sys, q, mocap)
    acc = _acceleration(sys, q, qd, act, pos, jnp.zeros(sys.nv, dtype))
    xd = _body_velocity(sys, pos.frames.xpos, pos.subtree_com, acc.cvel)
    no_data = jnp.zeros(sys.nsensordata, dtype)
    state = _make_state(sys, q, qd, mocap, jnp.zeros((), dtype), pos, acc, xd, no_data)
    return state.replace(sensordata=_sensors(sys, state, acc, no_data))


def _velocity_derivative(sys: System, act: dynamics.Actuation, ten_J: jax.Array) -> jax.Array:
    """d(qfrc_passive + qfrc_actuator)/d qd used by the implicit updates: its (nv,) diagonal, or the
    (nv, nv) matrix under implicitfast when the model has tendons (their dampers couple dofs).

    Euler's implicit damping is MuJoCo's: dof damping only (mj_EulerSkip leaves tendon dampers
    explicit); implicitfast adds actuator velocity gains and tendon dampers (mjd_smooth_vel).
    """
    dflags = sys.opt.disableflags
    qdv = jnp.zeros(sys.nv, sys.dof_damping.dtype)
    if not dflags & mjtDisableBit.mjDSBL_DAMPER:
        qdv = qdv - sys.dof_damping
    implicitfast = sys.opt.integrator == mjtIntegrator.mjINT_IMPLICITFAST
    if implicitfast and sys.nu and not dflags & mjtDisableBit.mjDSBL_ACTUATION:
        gear = sys.actuator_gear[:, 0]
        qdv = qdv.at[structure(sys).act_dof].add(gear * gear * act.dforce_dvel)
    if implicitfast and sys.ntendon and not dflags & mjtDisableBit.mjDSBL_DAMPER:
        return jnp.diag(qdv) + tendon.damping_derivative(sys, ten_J)
    return qdv


def step(sys: System, state: State, act: jax.Array) -> State:
    """Advance `state` by one timestep `sys.dt` under control `act` (nu,).

    Integrator `sys.opt.integrator`: Euler (semi-implicit, with MuJoCo's implicit joint damping),
    RK4, or implicitfast (damping and actuator velocity gains implicit); the acceleration they
    integrate includes the constraint forces (contacts, joint limits, friction loss).
    The returned state's frames, velocities and contact geometry describe its new `q`/`qd`; its
    force and acceleration fields (`efc_force`, `contact.force` included) are those evaluated at
    the previous `q`/`qd` (for RK4: of the first stage).
    Mocap bodies sit at `state.mocap_pos`/`mocap_quat` throughout the step (set them beforehand with
    `state.replace`, as MuJoCo's d.mocap_pos before mj_step); the state returned carries them on.
    """
    h = sys.opt.timestep
    q0, v0 = state.q, state.qd
    _checked("step", "state.q", q0, (sys.nq,), "sys.nq", q0.dtype)
    _checked("step", "state.qd", v0, (sys.nv,), "sys.nv", v0.dtype)
    act = _checked("step", "act", act, (sys.nu,), "sys.nu", v0.dtype)
    mocap = _Mocap(state.mocap_pos, state.mocap_quat)
    # the user may have moved the mocap bodies since the state's position stage was computed
    pos0 = _position(sys, q0, mocap) if sys.nmocap else _state_position(state)
    acc = _acceleration(sys, q0, v0, act, pos0, state.qacc_warmstart)
    a0 = acc.qacc
    sensordata = state.sensordata
    if sys.nsensor:
        fwd = _make_state(sys, q0, v0, mocap, state.time, pos0, acc, state.xd, sensordata)
        sensordata = _sensors(sys, fwd, acc, sensordata)

    with jax.named_scope("integrate"):
        if sys.opt.integrator == mjtIntegrator.mjINT_RK4:
            def deriv(q: jax.Array, v: jax.Array, warm: jax.Array) -> jax.Array:
                return _acceleration(sys, q, v, act, _position(sys, q, mocap), warm).qacc

            q2, v2 = integrator.integrate_pos(sys, q0, v0, 0.5 * h), v0 + 0.5 * h * a0
            a2 = deriv(q2, v2, a0)
            q3, v3 = integrator.integrate_pos(sys, q0, v2, 0.5 * h), v0 + 0.5 * h * a2
            a3 = deriv(q3, v3, a2)
            q4, v4 = integrator.integrate_pos(sys, q0, v3, h), v0 + h * a3
            a4 = deriv(q4, v4, a3)
            qd = v0 + h * integrator.rk4_combine([a0, a2, a3, a4])
            q = integrator.integrate_pos(sys, q0, integrator.rk4_combine([v0, v2, v3, v4]), h)
        else:
            euler = sys.opt.integrator == mjtIntegrator.mjINT_EULER
            if euler and sys.opt.disableflags & mjtDisableBit.mjDSBL_EULERDAMP:
                qd = v0 + h * a0
            else:
                qdv = _velocity_derivative(sys, acc.act, pos0.ten_J)
                qd = integrator.implicit_velocity(state.mass_matrix, v0, a0, qdv, h)
            q = integrator.integrate_pos(sys, q0, qd, h)

    # The new state's position stage and body velocities, for its q and qd.
    pos = _position(sys, q, mocap)
    with jax.named_scope("fwd_velocity"), jax.named_scope("com_vel"):
        cvel, _ = com.com_vel(sys, pos.cdof, qd)
    xd = _body_velocity(sys, pos.frames.xpos, pos.subtree_com, cvel)
    return _make_state(sys, q, qd, mocap, state.time + h, pos, acc, xd, sensordata)


def forward_kinematics(sys: System, q: jax.Array, mocap_pos: jax.Array | None = None,
                       mocap_quat: jax.Array | None = None) -> Transform:
    """(nbody,) world frames of all bodies (world body 0 included) at positions `q` (nq,).

    Mocap bodies sit at `mocap_pos` (nmocap, 3) and `mocap_quat` (nmocap, 4) (default: the model's).
    """
    q = _checked("forward_kinematics", "q", q, (sys.nq,), "sys.nq", sys.qpos0.dtype)
    with jax.named_scope("kinematics"):
        fr = kinematics.kinematics(sys, q, mocap_pos, mocap_quat)
    return Transform(pos=fr.xpos, rot=fr.xquat)

