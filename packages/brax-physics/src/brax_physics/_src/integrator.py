"""Time integration: position update on the joint manifold and the Euler/implicitfast velocity update."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from brax_math import quat_integrate
from mujoco import mjtJoint

from brax_physics._src.dynamics import factor, solve
from brax_physics._src.structure import structure
from brax_physics._src.system import System


def integrate_pos(sys: System, q: jax.Array, v: jax.Array, h: jax.Array) -> jax.Array:
    """(nq,) positions advanced by velocity `v` (nv,) for time `h` (MuJoCo mj_integratePos).

    Quaternions (ball, free) turn by the body-local angular velocity: q ⊗ exp(h·ω), normalized.
    """
    st = structure(sys)
    out = q
    if st.scalar_qpos.size:
        out = out.at[st.scalar_qpos].add(h * v[st.scalar_dof])
    if st.jnt_of_type[mjtJoint.mjJNT_BALL].size:
        qa, da = st.jnt_qpos[mjtJoint.mjJNT_BALL], st.jnt_dofs[mjtJoint.mjJNT_BALL]
        out = out.at[qa].set(quat_integrate(q[qa], v[da], h))
    if st.jnt_of_type[mjtJoint.mjJNT_FREE].size:
        qa, da = st.jnt_qpos[mjtJoint.mjJNT_FREE], st.jnt_dofs[mjtJoint.mjJNT_FREE]
        out = out.at[qa[:, :3]].add(h * v[da[:, :3]])
        out = out.at[qa[:, 3:]].set(quat_integrate(q[qa[:, 3:]], v[da[:, 3:]], h))
    return out


def implicit_velocity(m: jax.Array, qd: jax.Array, qacc: jax.Array, qdv: jax.Array,
                      h: jax.Array) -> jax.Array:
    """(nv,) new velocity v + h·(M − h·Q)⁻¹·M·a, Q = d force / d qd: `qdv` its (nv,) diagonal or (nv, nv).

    Written as v + h·a + h²·M̂⁻¹(Q a), which is exactly v + h·a when Q = 0 (no roundoff from
    a second solve) and needs only a factor of M̂ = M − h·Q.
    """
    dense = qdv.ndim == 2
    m_hat = m - h * (qdv if dense else jnp.diag(qdv))
    # Make M̂ depend on qacc, so its LAPACK factor cannot run next to the solves that produce
    # qacc: two batched LAPACK calls at once can deadlock jaxlib 0.10 (see `linalg`). Values are
    # unchanged (a NaN qacc makes qd NaN either way); XLA dropped an optimization_barrier here.
    m_hat = jnp.where(jnp.isnan(qacc[:1, None]), jnp.nan, m_hat)
    qa = jnp.matmul(qdv, qacc, precision=jax.lax.Precision.HIGHEST) if dense else qdv * qacc
    return qd + h * qacc + (h * h) * solve(m_hat, factor(m_hat), qa)


def rk4_combine(vs: list[jax.Array]) -> jax.Array:
    """Weighted sum (1/6, 1/3, 1/3, 1/6) of four RK4 stage values."""
    return (vs[0] + 2.0 * vs[1] + 2.0 * vs[2] + vs[3]) / 6.0

