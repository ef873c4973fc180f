"""The generalized-coordinates pipeline: `init`, `step`, `forward_kinematics`.

Stage order follows MuJoCo's mj_forward: position (kinematics, com quantities, CRB mass matrix,
collision), velocity (com velocities, passive forces, RNE bias), actuation, smooth
acceleration, constraints (rows for friction loss, joint limits and contacts, then the Newton
solver). Position-stage results (collision included) are stored in `State` for the state's own `q`,
so `step` computes them once per step, at the end, for the new positions (and the next `step`
reuses them).

Every stage runs under a `jax.named_scope` named after MuJoCo's function for it (`fwd_position`
with `kinematics`, `com_pos`, `crb`, `collision`; `fwd_velocity` with `com_vel`, `rne`,
`passive`; `fwd_actuation`; `fwd_acceleration` with `factor_m` (the mass matrix is factored where
it is used, not stored in `State`); `fwd_constraint` with `make_constraint`,
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
import numpy as np
from brax_math import Motion, Transform, point_velocity
from mujoco import mjtDisableBit, mjtIntegrator, mjtSolver

from brax_physics._src import (
    com,
    constraint,
    dynamics,
    equality,
    fluid,
    integrator,
    island,
    kinematics,
    linalg,
    noslip,
    sensor,
    solver,
    tendon,
    transmission,
)
from brax_physics._src.collision.contact import Contact, collide, with_parameters
from brax_physics._src.lowering import settings
from brax_physics._src.state import State
from brax_physics._src.structure import structure
from brax_physics._src.system import System


class _Position(NamedTuple):
    frames: kinematics.Frames
    subtree_com: jax.Array
    cinert: jax.Array
    cdof: jax.Array
    mass_matrix: jax.Array
    contact: Contact
    ten_length: jax.Array
    ten_J: jax.Array  # noqa: N815 (MuJoCo's name)
    actuator_length: jax.Array
    actuator_moment: jax.Array


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
        with jax.named_scope("transmission"):
            trn = transmission.transmission(sys, fr, q, cd, sub, ten_length, ten_J)
    return _Position(fr, sub, cin, cd, m, con, ten_length, ten_J, trn.length, trn.moment)


def _state_position(state: State) -> _Position:
    """The position stage stored in `state` (for its own q)."""
    fr = kinematics.Frames(state.x.pos, state.x.rot, state.xanchor, state.xaxis, state.xipos, state.ximat,
                           state.geom_xpos, state.geom_xmat)
    return _Position(fr, state.subtree_com, state.cinert, state.cdof, state.mass_matrix, state.contact,
                     state.ten_length, state.ten_J, state.actuator_length, state.actuator_moment)


def solver_config(sys: System) -> solver.Config:
    """Static solver settings of `sys`."""
    o = sys.opt
    lay = constraint.layout(sys)
    return solver.Config(
        is_floss=tuple(bool(b) for b in lay.is_floss), tolerance=o.tolerance, ls_tolerance=o.ls_tolerance,
        warmstart=not o.disableflags & mjtDisableBit.mjDSBL_WARMSTART,
        is_eq=tuple(bool(b) for b in lay.is_eq) if lay.neq else (), cones=lay.cones,
        compact=lay.compact_groups, row_dof=_row_dof(sys),
        newton=o.solver != mjtSolver.mjSOL_CG, nisland=island.ntree(sys) if island.enabled(sys) else 1,
        lowering=sys.lowering,
    )


def solver_budget(sys: System) -> solver.Budget:
    """The solver budget of `sys` (its `opt` leaves, whole numbers stored as float32)."""
    o = sys.opt
    return solver.Budget(o.iterations.astype(jnp.int32), o.ls_iterations.astype(jnp.int32))


def _row_dof(sys: System) -> tuple[int, ...]:
    """Per row: its only dof, or -1 (`solver.Config.row_dof`)."""
    support = constraint.row_dofs(sys)
    count = support.sum(1)
    if not sys.nv:  # rows of a model without dofs (an explicit <pair> of world geoms) reach none
        return (-1,) * len(count)
    return tuple(int(d) if n == 1 else -1 for d, n in zip(support.argmax(1), count, strict=True))


def _mujoco_contact_order(sys: System) -> np.ndarray:
    """(ncon,) our contact slots in MuJoCo's d.contact order (mj_collision's).

    MuJoCo visits body pairs by (lower body id, higher body id), an explicit <pair> before the
    dynamic geom pairs of its body pair, and those by (lower geom id, higher geom id); a pair's
    contacts stay together. Our slots come grouped by geom types (collision.pairs).
    """
    body = np.asarray(sys.geom_bodyid, np.int64)
    keys = []
    for g in sys.contact_pairs.groups:
        lo, hi = np.minimum(g.geom1, g.geom2), np.maximum(g.geom1, g.geom2)
        b_lo, b_hi = np.minimum(body[lo], body[hi]), np.maximum(body[lo], body[hi])
        key = np.stack([b_lo, b_hi, g.pair_id < 0, lo, hi], axis=1)
        keys.append(np.repeat(key, g.ncon_per_pair, axis=0))
    if not keys:
        return np.zeros(0, np.int64)
    k = np.concatenate(keys)
    return np.lexsort(k.T[::-1])  # stable: a pair's slots keep their order


def noslip_config(sys: System) -> noslip.Config:
    """Static noslip settings and blocks of `sys` (read when `opt.noslip_iterations` > 0).

    Gauss-Seidel results depend on the order of the blocks: contacts go in MuJoCo's order.
    """
    lay = constraint.layout(sys)
    rank = np.empty(lay.ncon, np.int64)  # of each slot in MuJoCo's order (no slots: contacts disabled)
    rank[_mujoco_contact_order(sys) if lay.ncon else rank] = np.arange(lay.ncon)
    pairs: tuple[int, ...] = ()
    cones = lay.cones
    if lay.elliptic:
        cones = tuple(sorted(cones, key=lambda rows: rank[lay.row_con[rows[0] - lay.contact_start]]))
    else:
        first = np.flatnonzero(lay.row_sign > 0)  # first edge of each pair of opposite edges
        first = first[np.argsort(rank[lay.row_con[first]], kind="stable")]
        pairs = tuple(int(r) for r in lay.contact_start + first)
    return noslip.Config(iterations=sys.opt.noslip_iterations, floss=tuple(range(lay.neq, lay.limit_start)),
                         pairs=pairs, cones=cones)


def _acceleration(sys: System, q: jax.Array, qd: jax.Array, ctrl: jax.Array, act: jax.Array, pos: _Position,
                  qacc_warmstart: jax.Array, eq_active: jax.Array) -> _Acceleration:
    """Velocity, actuation, acceleration and constraint stages, given the position stage at `q`, for
    control `ctrl` (nu,), activations `act` (na,) and equality switches `eq_active` (neq,)."""
    with jax.named_scope("fwd_velocity"):
        ten_velocity = com.mm(pos.ten_J, qd) if sys.ntendon else jnp.zeros(0, qd.dtype)
        with jax.named_scope("com_vel"):
            cvel, cdof_dot = com.com_vel(sys, pos.cdof, qd)
        with jax.named_scope("rne"):
            bias = dynamics.rne(sys, pos.cinert, pos.cdof, cvel, cdof_dot, qd)
            if sys.tendon_bias:
                bias = bias + tendon.armature_bias(sys, q, qd, pos.frames, pos.subtree_com, pos.cdof,
                                                   pos.ten_J)
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
        trn = transmission.Transmission(pos.actuator_length, pos.actuator_moment)
        actu = dynamics.actuation(sys, trn, qd, ctrl, act)
    with jax.named_scope("fwd_acceleration"):
        with jax.named_scope("factor_m"):
            # factored where it is used, not stored with the position stage: a state that carries
            # M and its factor holds two (nv, nv) matrices per env between steps
            factor = dynamics.factor(pos.mass_matrix)
        qfrc_smooth = pas - bias + actu.qfrc
        qacc_smooth = dynamics.solve(pos.mass_matrix, factor, qfrc_smooth)
    if constraint.layout(sys).nefc == 0:
        zero = jnp.zeros(0, qd.dtype)
        return _Acceleration(actu, ten_velocity, cvel, cdof_dot, bias, pas, qacc_smooth, qacc_smooth, zero,
                             jnp.zeros_like(qd))
    with jax.named_scope("fwd_constraint"):
        with jax.named_scope("make_constraint"):
            eq, jdotv = None, None
            if constraint.layout(sys).neq:
                eq = equality.rows(sys, q, pos.frames, pos.cdof, pos.subtree_com, eq_active, pos.ten_length,
                                   pos.ten_J)
                jdotv = equality.jdotv(sys, pos.frames, pos.cdof, pos.subtree_com, cvel, cdof_dot, qd)
            rows = constraint.make_rows(sys, q, pos.cdof, pos.subtree_com, pos.contact, pos.ten_length,
                                       pos.ten_J, eq)
            aref = constraint.reference_acceleration(rows, qd, jdotv)
        with jax.named_scope("island"):
            if island.enabled(sys):
                dof_island, efc_island = island.islands(sys, rows.active)
            else:  # one problem of every dof and row
                dof_island, efc_island = jnp.zeros(sys.nv, jnp.int32), jnp.zeros(rows.D.shape, jnp.int32)
        prob = solver.Problem(M=pos.mass_matrix, qfrc_smooth=qfrc_smooth, qacc_smooth=qacc_smooth, J=rows.J,
                              D=rows.D, R=rows.R, aref=aref, floss=rows.floss, mu=rows.mu,
                              dof_island=dof_island, efc_island=efc_island)
        cfg = solver_config(sys)
        with jax.named_scope("solve"):
            qacc, jar = solver.solve_rows(cfg, prob, qacc_warmstart, solver_budget(sys))
        with jax.named_scope("constraint_force"):
            efc_force = solver.row_terms(cfg, prob, jar)[0]
            qfrc_constraint = com.mm(rows.J.T, efc_force)
        if sys.opt.noslip_iterations:
            with jax.named_scope("noslip"):
                efc_force = noslip.forces(noslip_config(sys), prob, factor, rows.active,
                                          efc_force, sys.opt.noslip_tolerance)
                # MuJoCo's dualFinish: the acceleration of the new forces
                qfrc_constraint = com.mm(rows.J.T, efc_force)
                qacc = qacc_smooth + dynamics.solve(pos.mass_matrix, factor, qfrc_constraint)
    return _Acceleration(actu, ten_velocity, cvel, cdof_dot, bias, pas, qacc_smooth, qacc, efc_force,
                         qfrc_constraint)


def _body_velocity(sys: System, xpos: jax.Array, sub: jax.Array, cvel: jax.Array) -> Motion:
    """World angular velocity and linear velocity of each body origin, from com-based cvel."""
    with jax.named_scope("body_velocity"):
        offset = xpos - sub[structure(sys).root]
        return Motion(ang=cvel[:, :3], vel=point_velocity(cvel, offset))


def _make_state(sys: System, q: jax.Array, qd: jax.Array, mocap: _Mocap, act: jax.Array, time: jax.Array,
                pos: _Position, acc: _Acceleration, xd: Motion, actuator_velocity: jax.Array,
                sensordata: jax.Array, eq_active: jax.Array, qacc_warmstart: jax.Array) -> State:
    fr = pos.frames
    with jax.named_scope("contact_force"):
        force = constraint.contact_force(sys, pos.contact, acc.efc_force)
    contact = dataclasses.replace(pos.contact, force=force)
    return State(
        q=q, qd=qd, mocap_pos=mocap.pos, mocap_quat=mocap.quat, x=Transform(pos=fr.xpos, rot=fr.xquat), xd=xd,
        time=time, ctrl=acc.act.ctrl, act=act, act_dot=acc.act.act_dot, actuator_length=pos.actuator_length,
        actuator_moment=pos.actuator_moment, actuator_velocity=actuator_velocity,
        xanchor=fr.xanchor, xaxis=fr.xaxis, xipos=fr.xipos, ximat=fr.ximat, geom_xpos=fr.geom_xpos,
        geom_xmat=fr.geom_xmat, subtree_com=pos.subtree_com, cinert=pos.cinert, cdof=pos.cdof,
        mass_matrix=pos.mass_matrix, actuator_force=acc.act.force, qfrc_bias=acc.qfrc_bias,
        qfrc_passive=acc.qfrc_passive,
        qfrc_actuator=acc.act.qfrc, qacc_smooth=acc.qacc_smooth, qacc=acc.qacc,
        contact=contact, efc_force=acc.efc_force, qfrc_constraint=acc.qfrc_constraint,
        qacc_warmstart=qacc_warmstart, sensordata=sensordata, eq_active=eq_active,
        ten_length=pos.ten_length, ten_J=pos.ten_J, ten_velocity=acc.ten_velocity,
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


@settings.lowered
def init(sys: System, q: jax.Array | None = None, qd: jax.Array | None = None,
         act: jax.Array | None = None, activation: jax.Array | None = None) -> State:
    """Fully populated `State` at `q` (nq,) (default qpos0) and `qd` (nv,) (default zeros), with
    actuator activations `activation` (na,) as `State.act` (default zeros, as MuJoCo's mj_resetData).

    Force and acceleration fields are evaluated with control `act` (nu,) (default zeros). Mocap
    bodies start at their model pose (body_pos/body_quat), as after MuJoCo's mj_resetData. Compiled
    once per model structure and argument shapes, so a call outside `jax.jit` is one program.
    """
    # Run op by op, the collision and constraint code would dispatch thousands of small XLA programs
    # (every primitive, loop and branch its own compile); users call init outside jit, as they call step
    # inside it. Inside a caller's jit, vmap or grad the nested jit is inlined. Array-likes without a
    # dtype (lists) become float arrays here, as `_checked` accepted them before.
    state: State = _init_compiled(sys, *_array_likes(q, qd, act, activation))
    return state


def _array_likes(*xs: Any) -> tuple[Any, ...]:
    """`xs` with array-likes that have no dtype (lists, floats) as float32 numpy arrays, for a jit call."""
    return tuple(x if x is None or hasattr(x, "dtype") else np.asarray(x, np.float32) for x in xs)


def _init(sys: System, q: jax.Array | None, qd: jax.Array | None, act: jax.Array | None,
          activation: jax.Array | None) -> State:
    """`init`'s body, traced once per (System treedef, argument shapes)."""
    dtype = sys.qpos0.dtype
    q = sys.qpos0 if q is None else _checked("init", "q", q, (sys.nq,), "sys.nq", dtype)
    qd = jnp.zeros(sys.nv, dtype) if qd is None else _checked("init", "qd", qd, (sys.nv,), "sys.nv", dtype)
    ctrl = (jnp.zeros(sys.nu, dtype) if act is None
            else _checked("init", "act", act, (sys.nu,), "sys.nu", dtype))
    a = (jnp.zeros(sys.na, dtype) if activation is None
         else _checked("init", "activation", activation, (sys.na,), "sys.na", dtype))
    eq_active = jnp.asarray(np.asarray(sys.eq_active0, bool).reshape(sys.neq))
    mb = kinematics.mocap_bodies(sys)
    mocap = _Mocap(sys.body_pos[mb], sys.body_quat[mb])
    pos = _position(sys, q, mocap)
    acc = _acceleration(sys, q, qd, ctrl, a, pos, jnp.zeros(sys.nv, dtype), eq_active)
    xd = _body_velocity(sys, pos.frames.xpos, pos.subtree_com, acc.cvel)
    no_data = jnp.zeros(sys.nsensordata, dtype)
    # MuJoCo's reset zeroes qacc_warmstart and mj_forward does not write it: only mj_step copies qacc
    state = _make_state(sys, q, qd, mocap, a, jnp.zeros((), dtype), pos, acc, xd, acc.act.velocity, no_data,
                        eq_active, jnp.zeros(sys.nv, dtype))
    return state.replace(sensordata=_sensors(sys, state, acc, no_data))


_init_compiled = jax.jit(_init)


def _velocity_derivative(sys: System, act: dynamics.Actuation, moment: jax.Array,
                         ten_J: jax.Array) -> jax.Array:
    """d(qfrc_passive + qfrc_actuator)/d qd used by the implicit updates: its (nv,) diagonal, or the
    (nv, nv) matrix under implicitfast where an actuator's moment spans several dofs (kept on the
    mass matrix's sparsity, as MuJoCo's) or the model has tendons (their dampers couple dofs).

    Euler's implicit damping is MuJoCo's: dof damping only (mj_EulerSkip leaves tendon dampers
    explicit); implicitfast adds actuator velocity gains and tendon dampers (mjd_smooth_vel).
    """
    dflags = sys.opt.disableflags
    qdv = jnp.zeros(sys.nv, sys.dof_damping.dtype)
    if not dflags & mjtDisableBit.mjDSBL_DAMPER:
        qdv = qdv - dynamics.dof_damping(sys)
    implicitfast = sys.opt.integrator == mjtIntegrator.mjINT_IMPLICITFAST
    full: jax.Array | None = None
    if implicitfast and sys.nu and not dflags & mjtDisableBit.mjDSBL_ACTUATION:
        if transmission.joint_only(sys):
            gear = sys.actuator_gear[:, 0]
            qdv = qdv.at[structure(sys).act_dof].add(gear * gear * act.dforce_dvel)
        else:
            # Σ_i dforce_i · moment_iᵀ moment_i
            d = jnp.einsum("ui,u,uj->ij", moment, act.dforce_dvel, moment,
                           precision=jax.lax.Precision.HIGHEST)
            anc = structure(sys).dof_anc
            full = jnp.where(jnp.asarray(anc | anc.T), d, 0.0)
    if implicitfast and sys.ntendon and not dflags & mjtDisableBit.mjDSBL_DAMPER:
        ten = tendon.damping_derivative(sys, ten_J)
        full = ten if full is None else full + ten
    if full is not None:
        return linalg.add_diagonal(full, qdv)
    return qdv


def _freebody_velocity(sys: System, fr: kinematics.Frames, m: jax.Array, v0: jax.Array, qfrc: jax.Array,
                       qdv: jax.Array, h: jax.Array, qd: jax.Array) -> jax.Array:
    """`qd` (nv,) with the velocities of standalone free bodies from implicitfast's local solve.

    MuJoCo's mj_implicitSkip solves each standalone free body's 6×6 block on its own, with
    M − h·(D + ∂bias/∂qvel): the gyroscopic derivative of its bias force, which the symmetric
    global solve drops (`integrator.free_body_bias_derivative`); the block is decoupled from the
    other dofs, so only its rows change.
    """
    jnt = np.asarray(sys.freebody_jnts)
    body = np.asarray(sys.jnt_bodyid)[jnt]
    adr = np.asarray(sys.jnt_dofadr)[jnt]
    idx = adr[:, None] + np.arange(6)[None, :]  # (nfree, 6)
    mb = m[idx[:, :, None], idx[:, None, :]]
    db = qdv[idx[:, :, None], idx[:, None, :]] if qdv.ndim == 2 else jax.vmap(jnp.diag)(qdv[idx])
    bias = integrator.free_body_bias_derivative(
        sys.body_mass[body], sys.body_inertia[body], fr.xquat[body], fr.ximat[body],
        fr.xipos[body] - fr.xpos[body], v0[idx[:, 3:]])
    qacc = jnp.linalg.solve(mb - h * db + h * bias, qfrc[idx][..., None])[..., 0]
    return qd.at[idx].set(v0[idx] + h * qacc)


@settings.lowered
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
    The position stage at `state.q` (frames, mass matrix, contacts' geometry) is the one stored in
    `state`, computed with the `System` the previous step (or `init`) was given; the contacts' model
    parameters come from `sys`. After changing other model leaves mid-episode (masses, body poses,
    geom sizes), the change acts fully from the next step on, unless the state is rebuilt with
    `init(sys, state.q, state.qd, activation=state.act)` (which also restarts `time` and the solver's
    warm start). Compiled as `init` is, so a call outside `jax.jit` is one program.
    """
    # Inside a caller's jit the nested jit is inlined, and its trace is cached: the env's step, a
    # rollout's scan and a test's oracle step trace the physics once per model structure and shapes.
    new: State = _step_compiled(sys, state, *_array_likes(act))
    return new


def _step(sys: System, state: State, act: jax.Array) -> State:
    """`step`'s body, traced once per (System treedef, argument shapes)."""
    h = sys.opt.timestep
    q0, v0 = state.q, state.qd
    _checked("step", "state.q", q0, (sys.nq,), "sys.nq", q0.dtype)
    _checked("step", "state.qd", v0, (sys.nv,), "sys.nv", v0.dtype)
    ctrl = _checked("step", "act", act, (sys.nu,), "sys.nu", v0.dtype)
    act0 = _checked("step", "state.act", state.act, (sys.na,), "sys.na", v0.dtype)
    mocap = _Mocap(state.mocap_pos, state.mocap_quat)
    # the user may have moved the mocap bodies since the state's position stage was computed
    if sys.nmocap:
        pos0 = _position(sys, q0, mocap)
    else:  # the contacts' model parameters from the model, so the step needs only their geometry
        pos0 = _state_position(state)
        pos0 = pos0._replace(contact=with_parameters(sys, pos0.contact))
    eq_active = state.eq_active
    if eq_active.shape != (sys.neq,):
        raise ValueError(f"brax_physics.step: state.eq_active has shape {eq_active.shape}, expected "
                         f"({sys.neq},) (sys.neq)")
    acc = _acceleration(sys, q0, v0, ctrl, act0, pos0, state.qacc_warmstart, eq_active)
    a0 = acc.qacc
    sensordata = state.sensordata
    if sys.nsensor:
        fwd = _make_state(sys, q0, v0, mocap, act0, state.time, pos0, acc, state.xd, acc.act.velocity,
                          sensordata, eq_active, state.qacc_warmstart)
        sensordata = _sensors(sys, fwd, acc, sensordata)
    # activations advance only while actuation is enabled (MuJoCo's mj_advance)
    has_act = sys.na > 0 and not sys.opt.disableflags & mjtDisableBit.mjDSBL_ACTUATION

    with jax.named_scope("integrate"):
        if sys.opt.integrator == mjtIntegrator.mjINT_RK4:
            # every stage starts its solver from the step's warm start (mj_forwardSkip reads
            # qacc_warmstart, which only mj_advance writes: the last stage's qacc)
            def deriv(q: jax.Array, v: jax.Array, a: jax.Array) -> tuple[jax.Array, ...]:
                stage = _acceleration(sys, q, v, ctrl, a, _position(sys, q, mocap), state.qacc_warmstart,
                                      eq_active)
                return stage.qacc, stage.act.act_dot

            # Stages 2-4 start from the step's start, moved by the stage before's rates over a
            # fraction of h: one stage in a three-trip loop, so the program holds one forward pass
            # for them, not three. Stage activations are not clamped; the final update is
            # mj_nextActivation's.
            Rates = tuple[jax.Array, jax.Array, jax.Array]  # (v, qacc, act_dot) of a stage

            def stage(prev: Rates, c: jax.Array) -> tuple[Rates, Rates]:
                v, a, d = prev
                ch = c * h
                q_c, v_c = integrator.integrate_pos(sys, q0, v, ch), v0 + ch * a
                a_c, d_c = deriv(q_c, v_c, act0 + ch * d)
                return (v_c, a_c, d_c), (v_c, a_c, d_c)

            d0 = acc.act.act_dot
            fractions = jnp.asarray([0.5, 0.5, 1.0], v0.dtype)
            _, (vs, accs, dots) = jax.lax.scan(stage, (v0, a0, d0), fractions)
            (v2, v3, v4), (a2, a3, a4), (d2, d3, d4) = list(vs), list(accs), list(dots)
            warm = a4
            qd = v0 + h * integrator.rk4_combine([a0, a2, a3, a4])
            q = integrator.integrate_pos(sys, q0, integrator.rk4_combine([v0, v2, v3, v4]), h)
            act_dot = integrator.rk4_combine([d0, d2, d3, d4])
        else:
            warm = a0
            # the implicit updates integrate the forces, qfrc_smooth + qfrc_constraint, as MuJoCo's
            # do; they equal M·qacc only where the solver converged (not at 1-4 iterations)
            qfrc = acc.qfrc_passive - acc.qfrc_bias + acc.act.qfrc + acc.qfrc_constraint
            dflags = sys.opt.disableflags
            if sys.opt.integrator == mjtIntegrator.mjINT_IMPLICITFAST:
                qdv = _velocity_derivative(sys, acc.act, pos0.actuator_moment, pos0.ten_J)
                qd = integrator.implicit_velocity(state.mass_matrix, v0, qfrc, qdv, h)
                if sys.freebody_jnts:
                    qd = _freebody_velocity(sys, pos0.frames, state.mass_matrix, v0, qfrc, qdv, h, qd)
            elif dflags & (mjtDisableBit.mjDSBL_EULERDAMP | mjtDisableBit.mjDSBL_DAMPER):
                qd = v0 + h * a0
            else:
                # MuJoCo's Euler is implicit when a dof has damping or a joint an actuator
                qdv = _velocity_derivative(sys, acc.act, pos0.actuator_moment, pos0.ten_J)
                qd = integrator.implicit_velocity(state.mass_matrix, v0, qfrc, qdv, h)
                if not any(a >= 0 for a in sys.jnt_actuatorid):
                    qd = jnp.where(jnp.any(qdv != 0), qd, v0 + h * a0)
            q = integrator.integrate_pos(sys, q0, qd, h)
            act_dot = acc.act.act_dot
        new_act = dynamics.next_activation(sys, act0, act_dot) if has_act else act0

    # The new state's position stage and body velocities, for its q and qd.
    pos = _position(sys, q, mocap)
    with jax.named_scope("fwd_velocity"), jax.named_scope("com_vel"):
        cvel, _ = com.com_vel(sys, pos.cdof, qd)
    xd = _body_velocity(sys, pos.frames.xpos, pos.subtree_com, cvel)
    vel = transmission.velocity(sys, pos.actuator_moment, qd)
    return _make_state(sys, q, qd, mocap, new_act, state.time + h, pos, acc, xd, vel, sensordata, eq_active,
                       warm)


_step_compiled = jax.jit(_step)


@settings.lowered
def forward_kinematics(sys: System, q: jax.Array, mocap_pos: jax.Array | None = None,
                       mocap_quat: jax.Array | None = None) -> Transform:
    """(nbody,) world frames of all bodies (world body 0 included) at positions `q` (nq,).

    Mocap bodies sit at `mocap_pos` (nmocap, 3) and `mocap_quat` (nmocap, 4) (default: the model's).
    Compiled as `init` is, so a call outside `jax.jit` is one program.
    """
    x: Transform = _forward_kinematics_compiled(sys, *_array_likes(q, mocap_pos, mocap_quat))
    return x


@settings.lowered
def contacts(sys: System, q: jax.Array, mocap_pos: jax.Array | None = None,
             mocap_quat: jax.Array | None = None) -> Contact:
    """The contacts of collision detection at positions `q` (nq,) (`Contact.active` marks those MuJoCo
    would instantiate), with the mocap bodies at `mocap_pos`/`mocap_quat` (default: the model's):
    e.g. to reject initial states that penetrate. Compiled as `init` is."""
    found: Contact = _contacts_compiled(sys, *_array_likes(q, mocap_pos, mocap_quat))
    return found


def _contacts(sys: System, q: jax.Array, mocap_pos: jax.Array | None,
              mocap_quat: jax.Array | None) -> Contact:
    """`contacts`' body, traced once per (System treedef, argument shapes)."""
    q = _checked("contacts", "q", q, (sys.nq,), "sys.nq", sys.qpos0.dtype)
    mb = kinematics.mocap_bodies(sys)
    mocap = _Mocap(sys.body_pos[mb] if mocap_pos is None else jnp.asarray(mocap_pos),
                   sys.body_quat[mb] if mocap_quat is None else jnp.asarray(mocap_quat))
    return _position(sys, q, mocap).contact


_contacts_compiled = jax.jit(_contacts)


def _forward_kinematics(sys: System, q: jax.Array, mocap_pos: jax.Array | None,
                        mocap_quat: jax.Array | None) -> Transform:
    """`forward_kinematics`' body, traced once per (System treedef, argument shapes)."""
    q = _checked("forward_kinematics", "q", q, (sys.nq,), "sys.nq", sys.qpos0.dtype)
    with jax.named_scope("kinematics"):
        fr = kinematics.kinematics(sys, q, mocap_pos, mocap_quat)
    return Transform(pos=fr.xpos, rot=fr.xquat)


_forward_kinematics_compiled = jax.jit(_forward_kinematics)

