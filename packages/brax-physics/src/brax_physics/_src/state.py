"""`State`: the simulation state and the quantities derived from it, as a JAX pytree."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from brax_math import Motion, Transform

from brax_physics._src import linalg
from brax_physics._src.collision.contact import Contact


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class State:
    """Dynamic state of a `System` (all leaves).

    Position-stage fields (`x`, `xanchor` ... `mass_matrix`, `ten_length`, `ten_J`,
    `actuator_length`, `actuator_moment`), `xd` and `actuator_velocity` always describe the current
    `q`/`qd`, and `act` is the current activation. Force and acceleration fields (`qfrc_*`,
    `actuator_force`, `act_dot`, `qacc*`, `ctrl`), `ten_velocity` and `sensordata` describe the
    transition that produced this state: after `step` they were evaluated at the previous `q`/`qd`
    (and time) with the control passed to `step` (as MuJoCo's `mjData` after `mj_step`); after
    `init` they are evaluated at the initial `q`/`qd` with zero control.
    Frames are MuJoCo's: arrays indexed by body include the world body 0.
    """

    q: jax.Array
    """(nq,) generalized positions (MuJoCo qpos)."""
    qd: jax.Array
    """(nv,) generalized velocities (MuJoCo qvel)."""
    mocap_pos: jax.Array
    """(nmocap, 3) positions of the mocap bodies in the world (MuJoCo mocap_pos); kinematics reads
    them in place of `body_pos`, `step` carries them unchanged: set them with `state.replace`."""
    mocap_quat: jax.Array
    """(nmocap, 4) orientations of the mocap bodies (MuJoCo mocap_quat, normalized when read)."""
    x: Transform
    """(nbody,) body frames in the world (MuJoCo xpos, xquat)."""
    xd: Motion
    """(nbody,) body velocities: world-frame angular velocity and linear velocity of the body origin."""
    time: jax.Array
    """() simulation time."""
    ctrl: jax.Array
    """(nu,) control of the last transition, after ctrlrange clamping."""
    act: jax.Array
    """(na,) actuator activations (MuJoCo act): integrated by `step` from `act_dot`, clamped to actrange."""
    act_dot: jax.Array
    """(na,) activation derivative of the last transition (MuJoCo act_dot)."""
    actuator_length: jax.Array
    """(nu,) transmission lengths at `q` (MuJoCo actuator_length)."""
    actuator_moment: jax.Array
    """(nu, nv) transmission moment arms at `q`, dense (MuJoCo actuator_moment; qfrc = momentᵀ force)."""
    actuator_velocity: jax.Array
    """(nu,) transmission velocities at `q`, `qd`: actuator_moment · qd (MuJoCo actuator_velocity)."""
    xanchor: jax.Array
    """(njnt, 3) joint anchors in the world."""
    xaxis: jax.Array
    """(njnt, 3) joint axes in the world (hinge and slide)."""
    xipos: jax.Array
    """(nbody, 3) body centers of mass in the world."""
    ximat: jax.Array
    """(nbody, 3, 3) inertial frame orientations (columns are principal axes)."""
    geom_xpos: jax.Array
    """(ngeom, 3) geom positions in the world."""
    geom_xmat: jax.Array
    """(ngeom, 3, 3) geom orientations."""
    subtree_com: jax.Array
    """(nbody, 3) center of mass of each body's subtree."""
    cinert: jax.Array
    """(nbody, 10) com-based inertia (Ixx, Iyy, Izz, Ixy, Ixz, Iyz, m·offset, m), MuJoCo layout."""
    cdof: jax.Array
    """(nv, 6) com-based motion axis of each dof [angular; linear]."""
    mass_matrix: jax.Array
    """(nv, nv) joint-space inertia including armature."""
    actuator_force: jax.Array
    """(nu,) actuator forces after forcerange clamping."""
    qfrc_bias: jax.Array
    """(nv,) Coriolis, centrifugal and gravity forces (c in M qacc + c = f)."""
    qfrc_passive: jax.Array
    """(nv,) passive forces: springs, dampers, gravity compensation and fluid forces."""
    qfrc_actuator: jax.Array
    """(nv,) actuator forces in joint space."""
    qacc_smooth: jax.Array
    """(nv,) acceleration without constraints."""
    qacc: jax.Array
    """(nv,) acceleration used by the integrator: qacc_smooth plus the constraint forces' effect."""
    contact: Contact
    """Contact slots (static count) at the current `q`: `dist`, `pos`, `frame`, `active`, ... are
    the geometry of this state's positions; `force` (ncon, 6) is the contact-frame force of the
    last transition (MuJoCo `mj_contactForce`), zero on inactive slots."""
    efc_force: jax.Array
    """(nefc,) constraint row forces of the last transition: equality constraints, friction loss,
    joint limits, then contact pyramid edges (inactive rows 0)."""
    qfrc_constraint: jax.Array
    """(nv,) constraint force in joint space, Jᵀ efc_force."""
    qacc_warmstart: jax.Array
    """(nv,) solver warm start for the next step (the last transition's qacc)."""
    sensordata: jax.Array
    """(nsensordata,) sensor values in MuJoCo's layout (`sys.sensor_adr`), after `sensor_cutoff`; all
    stages at the last transition's start, as `mjData.sensordata` after `mj_step` (look values up by
    name with `brax_physics.sensor`). Unchanged by `step` when sensors are disabled (mjDSBL_SENSOR)."""

    eq_active: jax.Array
    """(neq,) bool: which equality constraints are enforced (MuJoCo d.eq_active), initially
    `sys.eq_active0`. Switch them between steps with `state.replace(eq_active=...)` (same shape, so
    nothing recompiles); an inactive equality's rows carry no force."""
    ten_length: jax.Array
    """(ntendon,) tendon lengths at the current `q` (MuJoCo ten_length)."""
    ten_J: jax.Array  # noqa: N815 (MuJoCo's name)
    """(ntendon, nv) tendon Jacobians d ten_length / d qd at the current `q` (MuJoCo ten_J, dense)."""
    ten_velocity: jax.Array
    """(ntendon,) tendon velocities ten_J·qd of the last transition: evaluated at the previous `q`/`qd`
    like the force fields, as MuJoCo's `ten_velocity` after `mj_step` (after `init`: at the initial
    `q`/`qd`)."""

    def replace(self, **changes: Any) -> State:
        """Copy with the given fields replaced."""
        return dataclasses.replace(self, **changes)

    @property
    def mass_matrix_factor(self) -> jax.Array:
        """(nv, nv) lower Cholesky factor L of `mass_matrix` (L Lᵀ = M), factored on each access (the
        state does not carry it); no gradient (use `mass_matrix`)."""
        return jnp.tril(linalg.cholesky(self.mass_matrix))
