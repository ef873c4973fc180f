"""Fluid forces of MuJoCo's inertia-box model (`opt.density`, `opt.viscosity`, `opt.wind`).

Each body moves through the medium as its equivalent inertia box: the box with the body's mass
and principal inertia. MuJoCo's computation chapter ("Fluid forces", inertia model) gives the
forces in the box frame: quadratic drag from the density, Stokes-like viscous resistance from
the viscosity, both acting at the body's centre of mass. The ellipsoid model (per-geom
`fluidshape`) is rejected at load time.
"""

from __future__ import annotations

from typing import Final

import jax
import jax.numpy as jnp
from brax_math import point_velocity, spatial_force

from brax_physics._src.structure import structure
from brax_physics._src.system import System

_HI: Final = jax.lax.Precision.HIGHEST


def inertia_box(mass: jax.Array, inertia: jax.Array) -> jax.Array:
    """(nbody, 3) half-sizes of the equivalent inertia boxes of bodies with `mass` (nbody,) and
    principal `inertia` (nbody, 3); massless bodies get zero boxes."""
    ixx, iyy, izz = inertia[:, 0], inertia[:, 1], inertia[:, 2]
    heavy = mass > 1e-15
    scale = jnp.where(heavy, 1.5 / jnp.where(heavy, mass, 1.0), 0.0)[:, None]
    sums = jnp.stack([iyy + izz - ixx, izz + ixx - iyy, ixx + iyy - izz], axis=-1)
    # Clamped at zero: rounding can make a degenerate (rod-like) box's sum slightly negative.
    sq = jnp.maximum(scale * sums, 0.0)
    # Double where keeps sqrt's infinite slope at 0 out of gradients of flat boxes.
    pos = sq > 0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, sq, 1.0)), 0.0)


def local_fluid_wrench(box: jax.Array, ang: jax.Array, lin: jax.Array, density: jax.Array,
                       viscosity: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Torque and force (each (nbody, 3), box frame) on boxes with half-sizes `box` moving with
    angular `ang` and linear `lin` velocity (box frame, at the centre of mass) through the medium."""
    r_eq = jnp.sum(box, axis=-1, keepdims=True) / 3.0
    # Viscous resistance of the equivalent sphere: f = -6πβ r v, g = -8πβ r³ ω.
    torque = -8.0 * jnp.pi * viscosity * r_eq**3 * ang
    force = -6.0 * jnp.pi * viscosity * r_eq * lin
    # Quadratic drag: f_i = -2ρ r_j r_k |v_i| v_i, g_i = -ρ/2 r_i (r_j⁴ + r_k⁴) |ω_i| ω_i.
    rj, rk = jnp.roll(box, -1, axis=-1), jnp.roll(box, -2, axis=-1)
    force = force - 2.0 * density * rj * rk * jnp.abs(lin) * lin
    torque = torque - 0.5 * density * box * (rj**4 + rk**4) * jnp.abs(ang) * ang
    return torque, force


def fluid(sys: System, density: jax.Array, viscosity: jax.Array, wind: jax.Array, xipos: jax.Array,
          ximat: jax.Array, subtree_com: jax.Array, cvel: jax.Array, cdof: jax.Array) -> jax.Array:
    """(nv,) generalized fluid forces (MuJoCo `qfrc_fluid`) in a medium of `density`, `viscosity` and
    `wind` (3,), from the position-stage frames (xipos (nbody,3), ximat (nbody,3,3), subtree_com
    (nbody,3), cdof (nv,6)) and the com-based body velocities cvel (nbody,6)."""
    st = structure(sys)
    com = subtree_com[st.root]
    ang_w = cvel[:, :3]
    lin_w = point_velocity(cvel, xipos - com) - wind[None]
    to_local = jnp.swapaxes(ximat, -1, -2)
    ang = jnp.einsum("bij,bj->bi", to_local, ang_w, precision=_HI)
    lin = jnp.einsum("bij,bj->bi", to_local, lin_w, precision=_HI)
    box = inertia_box(sys.body_mass, sys.body_inertia)
    torque, force = local_fluid_wrench(box, ang, lin, density, viscosity)
    torque = jnp.einsum("bij,bj->bi", ximat, torque, precision=_HI)
    force = jnp.einsum("bij,bj->bi", ximat, force, precision=_HI)
    # The wrench acts at xipos; about the tree's com point it gains the moment (xipos - com) x f.
    wrench = spatial_force(torque, force, xipos - com)
    # Only bodies a dof moves feel it through that dof (world body 0 has no dofs).
    per_body = jnp.matmul(wrench, cdof.T, precision=_HI)  # (nbody, nv)
    return jnp.sum(jnp.asarray(st.body_dof) * per_body, axis=0)
