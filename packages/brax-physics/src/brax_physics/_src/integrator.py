"""Time integration: position update on the joint manifold and the Euler/implicitfast velocity update."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from brax_math import quat_integrate, quat_to_mat
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


def implicit_velocity(m: jax.Array, qd: jax.Array, qfrc: jax.Array, qdv: jax.Array,
                      h: jax.Array) -> jax.Array:
    """(nv,) new velocity v + h·(M − h·D)⁻¹·qfrc (MuJoCo's implicit updates), with `qfrc` (nv,) the
    smooth plus constraint forces and D = d force / d qd given as its diagonal `qdv` (nv,) or in full
    (nv, nv)."""
    m_hat = m - h * qdv if qdv.ndim == 2 else linalg.add_diagonal(m, -(h * qdv))
    return qd + h * solve(m_hat, factor(m_hat), qfrc)


def rk4_combine(vs: list[jax.Array]) -> jax.Array:
    """Weighted sum (1/6, 1/3, 1/3, 1/6) of four RK4 stage values."""
    return (vs[0] + 2.0 * vs[1] + 2.0 * vs[2] + vs[3]) / 6.0



def _skew(v: jax.Array) -> jax.Array:
    """(..., 3, 3) [v]ₓ, the cross-product matrix of `v` (..., 3)."""
    z = jnp.zeros_like(v[..., 0])
    return jnp.stack([jnp.stack([z, -v[..., 2], v[..., 1]], -1),
                      jnp.stack([v[..., 2], z, -v[..., 0]], -1),
                      jnp.stack([-v[..., 1], v[..., 0], z], -1)], -2)


def free_body_bias_derivative(mass: jax.Array, inertia: jax.Array, xquat: jax.Array, ximat: jax.Array,
                              s: jax.Array, qvel_rot: jax.Array) -> jax.Array:
    """(n, 6, 6) B = ∂qfrc_bias/∂qvel of standalone free bodies: implicitfast solves their block with
    M − h·D + h·B (MuJoCo's mjd_freeMhat). `mass` (n,), `inertia` (n, 3) principal moments,
    `xquat` (n, 4) body orientation, `ximat` (n, 3, 3) inertial frame, `s` (n, 3) the com's offset
    from the body origin (world), `qvel_rot` (n, 3) the free joint's angular velocity (local).

    With ω = R·qvel_rot, the bias is [f; Rᵀ(s × f + τ)], f = m ω × (ω × s), τ = ω × I_w ω: its
    linear-velocity columns vanish and its angular ones are [−m·K·R; Rᵀ·C·R] with
    K = s ωᵀ − (ω·s)·1 + [ω × s]ₓ and C = −m[s]ₓK + [ω]ₓI_w − [I_w ω]ₓ.
    """
    hi = jax.lax.Precision.HIGHEST
    r = quat_to_mat(xquat)
    w = jnp.einsum("nij,nj->ni", r, qvel_rot, precision=hi)
    iw = jnp.einsum("nij,nj,nkj->nik", ximat, inertia, ximat, precision=hi)
    ws = jnp.cross(w, s)
    iww = jnp.einsum("nij,nj->ni", iw, w, precision=hi)
    eye = jnp.eye(3, dtype=w.dtype)
    k = s[:, :, None] * w[:, None, :] - jnp.sum(w * s, -1)[:, None, None] * eye[None] + _skew(ws)
    lin = jnp.matmul(k, r, precision=hi)
    c = (-mass[:, None, None] * jnp.matmul(_skew(s), k, precision=hi) + jnp.matmul(_skew(w), iw, precision=hi)
         - _skew(iww))
    rot = jnp.matmul(jnp.swapaxes(r, -1, -2), jnp.matmul(c, r, precision=hi), precision=hi)
    out = jnp.zeros((w.shape[0], 6, 6), w.dtype)
    return out.at[:, :3, 3:].set(-mass[:, None, None] * lin).at[:, 3:, 3:].set(rot)
