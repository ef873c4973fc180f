"""The generalized-coordinates pipeline: `init`, `step`, `forward_kinematics`.

Stage order follows MuJoCo's mj_forward: position (kinematics, com quantities, CRB mass matrix and
its factor), velocity (com velocities, passive forces, RNE bias), actuation, smooth acceleration.
Position-stage results are stored in `State` for the state's own `q`, so `step` computes them once
per step, at the end, for the new positions (and the next `step` reuses them).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from brax_math import Motion, Transform

from brax_physics._src import com, dynamics, integrator, kinematics
from brax_physics._src.state import State
from brax_physics._src.structure import structure
from brax_physics._src.system import (
    DSBL_ACTUATION,
    DSBL_DAMPER,
    DSBL_EULERDAMP,
    INT_EULER,
    INT_IMPLICITFAST,
    INT_RK4,
    System,
)


class _Position(NamedTuple):
    frames: kinematics.Frames
    subtree_com: jax.Array
    cinert: jax.Array
    cdof: jax.Array
    mass_matrix: jax.Array
    mass_matrix_factor: jax.Array


class _Acceleration(NamedTuple):
    act: dynamics.Actuation
    cvel: jax.Array
    qfrc_bias: jax.Array
    qfrc_passive: jax.Array
    qacc_smooth: jax.Array


def _position(sys: System, q: jax.Array) -> _Position:
    """Position stage at `q`."""
    fr = kinematics.kinematics(sys, q)
    sub = com.subtree_com(sys, fr.xipos)
    cin = com.cinert(sys, fr, sub)
    cd = com.cdof(sys, fr, sub)
    m = com.mass_matrix(sys, cin, cd)
    return _Position(fr, sub, cin, cd, m, dynamics.factor(m))


def _acceleration(sys: System, q: jax.Array, qd: jax.Array, act: jax.Array, cinert: jax.Array,
                  cdof: jax.Array, factor: jax.Array) -> _Acceleration:
    """Velocity, actuation and acceleration stages, given the position stage at `q`."""
    cvel, cdof_dot = com.com_vel(sys, cdof, qd)
    bias = dynamics.rne(sys, cinert, cdof, cvel, cdof_dot, qd)
    pas = dynamics.passive(sys, q, qd)
    actu = dynamics.actuation(sys, q, qd, act)
    qacc = dynamics.solve(factor, pas - bias + actu.qfrc)
    return _Acceleration(actu, cvel, bias, pas, qacc)


def _body_velocity(sys: System, xpos: jax.Array, sub: jax.Array, cvel: jax.Array) -> Motion:
    """World angular velocity and linear velocity of each body origin, from com-based cvel."""
    ang = cvel[:, :3]
    offset = xpos - sub[structure(sys).root]
    return Motion(ang=ang, vel=cvel[:, 3:] + jnp.cross(ang, offset))


def _make_state(sys: System, q: jax.Array, qd: jax.Array, time: jax.Array, pos: _Position,
                acc: _Acceleration, xd: Motion) -> State:
    fr = pos.frames
    return State(
        q=q, qd=qd, x=Transform(pos=fr.xpos, rot=fr.xquat), xd=xd, time=time, ctrl=acc.act.ctrl,
        xanchor=fr.xanchor, xaxis=fr.xaxis, xipos=fr.xipos, ximat=fr.ximat, geom_xpos=fr.geom_xpos,
        geom_xmat=fr.geom_xmat, subtree_com=pos.subtree_com, cinert=pos.cinert, cdof=pos.cdof,
        mass_matrix=pos.mass_matrix, mass_matrix_factor=pos.mass_matrix_factor,
        actuator_force=acc.act.force, qfrc_bias=acc.qfrc_bias, qfrc_passive=acc.qfrc_passive,
        qfrc_actuator=acc.act.qfrc, qacc_smooth=acc.qacc_smooth, qacc=acc.qacc_smooth,
    )


def init(sys: System, q: jax.Array | None = None, qd: jax.Array | None = None,
         act: jax.Array | None = None) -> State:
    """Fully populated `State` at `q` (nq,) (default qpos0) and `qd` (nv,) (default zeros).

    Force and acceleration fields are evaluated with control `act` (nu,) (default zeros).
    """
    dtype = sys.qpos0.dtype
    q = sys.qpos0 if q is None else jnp.asarray(q, dtype)
    qd = jnp.zeros(sys.nv, dtype) if qd is None else jnp.asarray(qd, dtype)
    act = jnp.zeros(sys.nu, dtype) if act is None else jnp.asarray(act, dtype)
    pos = _position(sys, q)
    acc = _acceleration(sys, q, qd, act, pos.cinert, pos.cdof, pos.mass_matrix_factor)
    xd = _body_velocity(sys, pos.frames.xpos, pos.subtree_com, acc.cvel)
    return _make_state(sys, q, qd, jnp.zeros((), dtype), pos, acc, xd)


def _velocity_derivative(sys: System, act: dynamics.Actuation) -> jax.Array:
    """(nv,) diagonal of d(qfrc_passive + qfrc_actuator)/d qd used by the implicit updates."""
    dflags = sys.opt.disableflags
    qdv = jnp.zeros(sys.nv, sys.dof_damping.dtype)
    if not dflags & DSBL_DAMPER:
        qdv = qdv - sys.dof_damping
    if sys.opt.integrator == INT_IMPLICITFAST and sys.nu and not dflags & DSBL_ACTUATION:
        gear = sys.actuator_gear[:, 0]
        qdv = qdv.at[structure(sys).act_dof].add(gear * gear * act.dforce_dvel)
    return qdv


def step(sys: System, state: State, act: jax.Array) -> State:
    """Advance `state` by one timestep `sys.dt` under control `act` (nu,).

    Integrator `sys.opt.integrator`: Euler (semi-implicit, with MuJoCo's implicit joint damping),
    RK4, or implicitfast (damping and actuator velocity gains implicit). Contacts, joint limits
    and other constraints are not simulated yet: geoms are carried for rendering only.
    The returned state's frames and velocities describe its new `q`/`qd`; its force and
    acceleration fields are those evaluated at the previous `q`/`qd` (for RK4: of the first stage).
    """
    h = sys.opt.timestep
    q0, v0 = state.q, state.qd
    act = jnp.asarray(act, v0.dtype)
    acc = _acceleration(sys, q0, v0, act, state.cinert, state.cdof, state.mass_matrix_factor)
    a0 = acc.qacc_smooth

    if sys.opt.integrator == INT_RK4:
        def deriv(q: jax.Array, v: jax.Array) -> jax.Array:
            p = _position(sys, q)
            return _acceleration(sys, q, v, act, p.cinert, p.cdof, p.mass_matrix_factor).qacc_smooth

        q2, v2 = integrator.integrate_pos(sys, q0, v0, 0.5 * h), v0 + 0.5 * h * a0
        a2 = deriv(q2, v2)
        q3, v3 = integrator.integrate_pos(sys, q0, v2, 0.5 * h), v0 + 0.5 * h * a2
        a3 = deriv(q3, v3)
        q4, v4 = integrator.integrate_pos(sys, q0, v3, h), v0 + h * a3
        a4 = deriv(q4, v4)
        qd = v0 + h * integrator.rk4_combine([a0, a2, a3, a4])
        q = integrator.integrate_pos(sys, q0, integrator.rk4_combine([v0, v2, v3, v4]), h)
    else:
        if sys.opt.integrator == INT_EULER and sys.opt.disableflags & DSBL_EULERDAMP:
            qd = v0 + h * a0
        else:
            qdv = _velocity_derivative(sys, acc.act)
            qd = integrator.implicit_velocity(state.mass_matrix, v0, a0, qdv, h)
        q = integrator.integrate_pos(sys, q0, qd, h)

    pos = _position(sys, q)
    cvel, _ = com.com_vel(sys, pos.cdof, qd)
    xd = _body_velocity(sys, pos.frames.xpos, pos.subtree_com, cvel)
    return _make_state(sys, q, qd, state.time + h, pos, acc, xd)


def forward_kinematics(sys: System, q: jax.Array) -> Transform:
    """(nbody,) world frames of all bodies (world body 0 included) at positions `q` (nq,)."""
    fr = kinematics.kinematics(sys, jnp.asarray(q, sys.qpos0.dtype))
    return Transform(pos=fr.xpos, rot=fr.xquat)

