"""Unit quaternions in (w, x, y, z) order, MuJoCo's convention.

Every function acts on the last axis and broadcasts over any leading axes, so the same code
serves one rotation, a batch, or a `vmap`. Angles are radians. A quaternion `q` maps local
(body) coordinates to world coordinates: `rotate(v_local, q) == v_world`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from brax_math.safe import normalize, safe_norm
from brax_math.vector import _cross_parts, _join, _match_batch, _parts

_AXIS_INDEX = {"x": 0, "y": 1, "z": 2}


def quat_identity(shape: tuple[int, ...] = (), dtype: jnp.dtype | None = None) -> jax.Array:
    """Identity quaternions of shape `shape + (4,)`."""
    q = jnp.zeros((*shape, 4), dtype=dtype or jnp.float32)
    return q.at[..., 0].set(1.0)


def quat_mul(u: jax.Array, v: jax.Array) -> jax.Array:
    """Hamilton product `u ⊗ v` of (..., 4) quaternions: rotate by `v`, then by `u`."""
    u, v = _match_batch(u, 1, v, 1)
    if u.dtype == v.dtype:  # lax's operations: the same equations, a fraction of the tracing
        (uw, ux, uy, uz), (vw, vx, vy, vz) = _components(u), _components(v)
        add, sub, mul = lax.add, lax.sub, lax.mul
        return jnp.stack([
            sub(sub(sub(mul(uw, vw), mul(ux, vx)), mul(uy, vy)), mul(uz, vz)),
            sub(add(add(mul(uw, vx), mul(ux, vw)), mul(uy, vz)), mul(uz, vy)),
            add(add(sub(mul(uw, vy), mul(ux, vz)), mul(uy, vw)), mul(uz, vx)),
            add(sub(add(mul(uw, vz), mul(ux, vy)), mul(uy, vx)), mul(uz, vw)),
        ], axis=-1)
    uw, ux, uy, uz = u[..., 0], u[..., 1], u[..., 2], u[..., 3]
    vw, vx, vy, vz = v[..., 0], v[..., 1], v[..., 2], v[..., 3]
    return jnp.stack(
        [
            uw * vw - ux * vx - uy * vy - uz * vz,
            uw * vx + ux * vw + uy * vz - uz * vy,
            uw * vy - ux * vz + uy * vw + uz * vx,
            uw * vz + ux * vy - uy * vx + uz * vw,
        ],
        axis=-1,
    )


def _components(q: jax.Array) -> list[jax.Array]:
    """The components of `q` along its last axis, that axis dropped (`q[..., i]`)."""
    last = q.ndim - 1
    return [lax.squeeze(lax.slice_in_dim(q, i, i + 1, axis=last), (last,)) for i in range(q.shape[-1])]


def quat_conj(q: jax.Array) -> jax.Array:
    """Conjugate (w, -x, -y, -z); the inverse of a unit quaternion."""
    return jnp.concatenate([q[..., :1], -q[..., 1:]], axis=-1)


def quat_inv(q: jax.Array) -> jax.Array:
    """Inverse of a (not necessarily unit) quaternion: conj(q) / |q|^2."""
    return quat_conj(q) / jnp.sum(q * q, axis=-1, keepdims=True)


def quat_normalize(q: jax.Array) -> jax.Array:
    """Scale (..., 4) quaternions to unit length (zero stays zero)."""
    return normalize(q)


def quat_canonical(q: jax.Array) -> jax.Array:
    """The representative of `q` or `-q` with w >= 0 (both encode the same rotation)."""
    return jnp.where(q[..., :1] < 0, -q, q)


def rotate(vec: jax.Array, quat: jax.Array) -> jax.Array:
    """Rotate (..., 3) vectors by unit (..., 4) quaternions: local -> world."""
    vec, quat = _match_batch(vec, 1, quat, 1)
    # v' = v + 2w (r x v) + 2 r x (r x v): cheaper than forming the matrix or two products.
    v = _parts(vec)
    w, *r = _parts(quat)
    t = tuple(2.0 * c for c in _cross_parts(r, v))
    return _join([vi + w * ti + ui for vi, ti, ui in zip(v, t, _cross_parts(r, t), strict=True)])


def inv_rotate(vec: jax.Array, quat: jax.Array) -> jax.Array:
    """Rotate (..., 3) vectors by the inverse of unit quaternions: world -> local."""
    return rotate(vec, quat_conj(quat))


def quat_to_mat(q: jax.Array) -> jax.Array:
    """Rotation matrices (..., 3, 3) of unit quaternions (..., 4); columns are the local axes."""
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    xx, yy, zz = x * x, y * y, z * z
    xy, xz, yz = x * y, x * z, y * z
    wx, wy, wz = w * x, w * y, w * z
    rows = [
        jnp.stack([1 - 2 * (yy + zz), 2 * (xy - wz), 2 * (xz + wy)], axis=-1),
        jnp.stack([2 * (xy + wz), 1 - 2 * (xx + zz), 2 * (yz - wx)], axis=-1),
        jnp.stack([2 * (xz - wy), 2 * (yz + wx), 1 - 2 * (xx + yy)], axis=-1),
    ]
    return jnp.stack(rows, axis=-2)


def mat_to_quat(m: jax.Array) -> jax.Array:
    """Unit quaternions (..., 4) with w >= 0 of rotation matrices (..., 3, 3)."""
    m00, m11, m22 = m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]
    tr = m00 + m11 + m22
    # Four candidate formulas, each well conditioned when its pivot is the largest (Shepperd).
    # All four are computed and one is selected, so the function stays branch-free under jit.
    cands = jnp.stack(
        [
            jnp.stack([1 + tr, m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0],
                       m[..., 1, 0] - m[..., 0, 1]], axis=-1),
            jnp.stack([m[..., 2, 1] - m[..., 1, 2], 1 + m00 - m11 - m22, m[..., 0, 1] + m[..., 1, 0],
                       m[..., 0, 2] + m[..., 2, 0]], axis=-1),
            jnp.stack([m[..., 0, 2] - m[..., 2, 0], m[..., 0, 1] + m[..., 1, 0], 1 - m00 + m11 - m22,
                       m[..., 1, 2] + m[..., 2, 1]], axis=-1),
            jnp.stack([m[..., 1, 0] - m[..., 0, 1], m[..., 0, 2] + m[..., 2, 0], m[..., 1, 2] + m[..., 2, 1],
                       1 - m00 - m11 + m22], axis=-1),
        ],
        axis=-2,
    )
    pivots = jnp.stack([tr, m00, m11, m22], axis=-1)
    best = jnp.argmax(pivots, axis=-1)
    q = jnp.take_along_axis(cands, best[..., None, None], axis=-2)[..., 0, :]
    return quat_canonical(normalize(q))


def quat_exp(rotvec: jax.Array) -> jax.Array:
    """Quaternion (..., 4) of a rotation vector (..., 3) (axis times angle)."""
    angle = safe_norm(rotvec)
    # sin(a/2)/a written with jnp.sinc (sin(pi t)/(pi t)) stays exact and differentiable at a = 0.
    scale = 0.5 * jnp.sinc(angle / (2.0 * jnp.pi))
    return jnp.concatenate([jnp.cos(0.5 * angle)[..., None], scale[..., None] * rotvec], axis=-1)


def quat_log(q: jax.Array) -> jax.Array:
    """Rotation vector (..., 3) of unit quaternions, angle in [0, pi]."""
    q = quat_canonical(q)
    vnorm = safe_norm(q[..., 1:])
    angle = 2.0 * jnp.arctan2(vnorm, q[..., 0])
    # angle / vnorm -> 2 as vnorm -> 0; the guarded ratio keeps value and gradient finite there.
    small = vnorm < 1e-6
    safe_vnorm = jnp.where(small, jnp.ones_like(vnorm), vnorm)
    ratio = jnp.where(small, 2.0 + jnp.zeros_like(vnorm), angle / safe_vnorm)
    return ratio[..., None] * q[..., 1:]


def axis_angle_to_quat(axis: jax.Array, angle: jax.Array) -> jax.Array:
    """Quaternion (..., 4) rotating by `angle` (...) radians about `axis` (..., 3), normalized here."""
    axis, angle = _match_batch(axis, 1, jnp.asarray(angle), 0)
    half = 0.5 * angle
    return jnp.concatenate([jnp.cos(half)[..., None], jnp.sin(half)[..., None] * normalize(axis)], axis=-1)


def quat_to_axis_angle(q: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Unit axis (..., 3) and angle (...) in [0, pi] of unit quaternions; identity gives axis 0."""
    rv = quat_log(q)
    return normalize(rv), safe_norm(rv)


def relative_quat(q_from: jax.Array, q_to: jax.Array) -> jax.Array:
    """Rotation `r` expressed in the `q_from` frame with `q_from ⊗ r == q_to`."""
    return quat_mul(quat_conj(q_from), q_to)


def quat_integrate(q: jax.Array, omega: jax.Array, dt: jax.Array | float) -> jax.Array:
    """Advance `q` by the body-local angular velocity `omega` for `dt`: normalize(q ⊗ exp(dt·ω)).

    Right multiplication because `omega` is expressed in the local frame, as MuJoCo's qvel for
    free and ball joints (`mj_integratePos`).
    """
    return normalize(quat_mul(q, quat_exp(omega * dt)))


def _parse_seq(seq: str) -> tuple[list[int], bool]:
    if len(seq) != 3 or not (seq.islower() or seq.isupper()) or any(c not in "xyzXYZ" for c in seq):
        raise ValueError(
            f"euler sequence {seq!r} must be 3 letters from x/y/z, all lower case (extrinsic) "
            "or all upper case (intrinsic), e.g. 'xyz' or 'ZYX'"
        )
    axes = [_AXIS_INDEX[c.lower()] for c in seq]
    if axes[0] == axes[1] or axes[1] == axes[2]:
        raise ValueError(f"euler sequence {seq!r} repeats an axis in consecutive positions")
    return axes, seq.islower()


def euler_to_quat(angles: jax.Array, seq: str = "xyz") -> jax.Array:
    """Quaternion (..., 4) from Euler angles (..., 3) in radians.

    Uses scipy's convention: lower-case `seq` is extrinsic (rotations about the fixed world axes,
    applied in order), upper-case is intrinsic (about the moving axes). Note that MJCF's
    `eulerseq` uses the opposite letter case.
    """
    axes, extrinsic = _parse_seq(seq)
    eye = jnp.eye(3, dtype=angles.dtype)
    qs = [axis_angle_to_quat(eye[a], angles[..., i]) for i, a in enumerate(axes)]
    if extrinsic:
        return quat_mul(qs[2], quat_mul(qs[1], qs[0]))
    return quat_mul(qs[0], quat_mul(qs[1], qs[2]))


def _wrap_angle(t: jax.Array) -> jax.Array:
    """Map angles to (-pi, pi]."""
    return jnp.arctan2(jnp.sin(t), jnp.cos(t))


def quat_to_euler(q: jax.Array, seq: str = "xyz") -> jax.Array:
    """Euler angles (..., 3) in radians of unit quaternions; inverse of `euler_to_quat`.

    First and third angles lie in (-pi, pi]; the middle one in [-pi/2, pi/2] for Tait-Bryan
    sequences and [0, pi] for proper Euler sequences. At gimbal lock the split between the
    first and third angle is arbitrary (the rotation is still exact).
    """
    axes, extrinsic = _parse_seq(seq)
    # Quaternion-to-Euler for any sequence (Bernardes & Viollet, 2022), written for extrinsic
    # order; an intrinsic sequence is the extrinsic reversed sequence with reversed angles.
    if not extrinsic:
        axes = axes[::-1]
    i, j, k = axes
    proper = i == k
    if proper:
        k = 3 - i - j
    sign = float((i - j) * (j - k) * (k - i) // 2)
    a, b, c, d = q[..., 0], q[..., 1 + i], q[..., 1 + j], sign * q[..., 1 + k]
    if not proper:
        a, b, c, d = a - c, b + d, c + a, d - b
    theta2 = 2.0 * jnp.arctan2(jnp.hypot(c, d), jnp.hypot(a, b))
    half_sum = jnp.arctan2(b, a)
    half_diff = jnp.arctan2(d, c)
    theta1 = half_sum - half_diff
    theta3 = half_sum + half_diff
    if not proper:
        theta3 = sign * theta3
        theta2 = theta2 - jnp.pi / 2
    out = jnp.stack([_wrap_angle(theta1), theta2, _wrap_angle(theta3)], axis=-1)
    return out if extrinsic else out[..., ::-1]
