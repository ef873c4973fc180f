"""Time integration: position update on the joint manifold and the Euler/implicitfast velocity update."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from brax_math import quat_integrate
from mujoco import mjtJoint

from brax_physics._src import linalg
from brax_physics._src.dynamics import factor, solve
from brax_physics._src.kinematics import assemble_rows, take_rows
from brax_physics._src.structure import structure
from brax_physics._src.system import System


def integrate_pos(sys: System, q: jax.Array, v: jax.Array, h: jax.Array) -> jax.Array:
    """(nq,) positions advanced by velocity `v` (nv,) for time `h` (MuJoCo mj_integratePos).

    Quaternions (ball, free) turn by the body-local angular velocity: q ⊗ exp(h·ω), normalized.
    """
    st = structure(sys)
    parts, rows = [], []
    if st.scalar_qpos.size:
        parts.append(take_rows(q, st.scalar_qpos) + h * take_rows(v, st.scalar_dof))
        rows.append(st.scalar_qpos)
    if st.jnt_of_type[mjtJoint.mjJNT_BALL].size:
        qa, da = st.jnt_qpos[mjtJoint.mjJNT_BALL], st.jnt_dofs[mjtJoint.mjJNT_BALL]
        parts.append(quat_integrate(q[qa], v[da], h).reshape(-1))
        rows.append(qa)
    if st.jnt_of_type[mjtJoint.mjJNT_FREE].size:
        qa, da = st.jnt_qpos[mjtJoint.mjJNT_FREE], st.jnt_dofs[mjtJoint.mjJNT_FREE]
        parts.append((q[qa[:, :3]] + h * v[da[:, :3]]).reshape(-1))
        parts.append(quat_integrate(q[qa[:, 3:]], v[da[:, 3:]], h).reshape(-1))
        rows.extend([qa[:, :3], qa[:, 3:]])
    return assemble_rows(parts, rows, sys.nq) if parts else q


def implicit_velocity(m: jax.Array, qd: jax.Array, qacc: jax.Array, qdv: jax.Array,
                      h: jax.Array) -> jax.Array:
    """(nv,) new velocity v + h·(M − h·D)⁻¹·M·a, with D = d force / d qd given as its diagonal `qdv`
    (nv,) or in full (nv, nv).

    Written as v + h·a + h²·M̂⁻¹(D a), which is exactly v + h·a when D = 0 (no roundoff from
    a second solve) and needs only a factor of M̂ = M − h·D.
    """
    full = qdv.ndim == 2
    m_hat = m - h * qdv if full else linalg.add_diagonal(m, -(h * qdv))
    rhs = jnp.dot(qdv, qacc, precision=jax.lax.Precision.HIGHEST) if full else qdv * qacc
    return qd + h * qacc + (h * h) * solve(m_hat, factor(m_hat), rhs)


def rk4_combine(vs: list[jax.Array]) -> jax.Array:
    """Weighted sum (1/6, 1/3, 1/3, 1/6) of four RK4 stage values."""
    return (vs[0] + 2.0 * vs[1] + 2.0 * vs[2] + vs[3]) / 6.0

