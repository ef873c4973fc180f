"""Narrow-phase colliders for one geom pair, written to reproduce MuJoCo 4.0.0's primitive routines.

Every collider has the signature
`fn(pos1, mat1, size1, pos2, mat2, size2, margin) -> (dist (K,), pos (K, 3), frame (K, 3, 3))`
for geom1 (the lower MuJoCo geom type) and geom2: world positions (3,), rotation matrices (3, 3)
(MuJoCo `geom_xmat` reshaped, columns are the geom's local axes), MuJoCo `geom_size` (3,), and the
detection margin () (geom margins plus gaps). Frame row 0 is the normal from geom1 to geom2, rows
1-2 the tangents. Slots a collider never fills have `dist = NO_CONTACT`; callers decide activity
with `dist < margin`, so colliders report true distances for separated shapes (useful gradients).
All functions are branch-free and meant to be `vmap`ped over the pairs of one type.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import jax
import jax.numpy as jnp
from brax_math import cross, safe_norm
from mujoco import mjtGeom

# Distance of an empty slot: far beyond any margin, yet finite so that downstream arithmetic
# on masked rows (powers in the impedance, differences) stays finite.
NO_CONTACT: Final = 1e6

# Below this length a direction is treated as undefined. MuJoCo uses 1e-15 in double precision;
# float32 rotation matrices carry ~1e-7 noise, so a larger threshold avoids random frames.
_MIN_LEN: Final = 1e-6

Collider = Callable[
    [jax.Array, jax.Array, jax.Array, jax.Array, jax.Array, jax.Array, jax.Array],
    tuple[jax.Array, jax.Array, jax.Array],
]


def _unit(v: jax.Array, fallback: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(v / |v|, |v|) with `fallback` where |v| is below _MIN_LEN; gradients stay finite."""
    n = safe_norm(v)
    ok = n > _MIN_LEN
    unit = v / jnp.where(ok, n, jnp.ones_like(n))[..., None]
    return jnp.where(ok[..., None], unit, fallback), n


def make_frame(normal: jax.Array, tangent: jax.Array | None = None) -> jax.Array:
    """(..., 3, 3) contact frame [n; t1; t2] from a unit normal (..., 3), as MuJoCo's mju_makeFrame.

    Without `tangent`, t1 starts from (0,1,0) (or (0,0,1) when |n_y| >= 0.5); otherwise from
    `tangent`. It is made orthogonal to n and normalized ((1,0,0) if it vanishes); t2 = n x t1.
    """
    dtype = normal.dtype
    if tangent is None:
        ey = jnp.broadcast_to(jnp.array([0.0, 1.0, 0.0], dtype), normal.shape)
        ez = jnp.broadcast_to(jnp.array([0.0, 0.0, 1.0], dtype), normal.shape)
        tangent = jnp.where((jnp.abs(normal[..., 1]) < 0.5)[..., None], ey, ez)
    t = tangent - jnp.sum(tangent * normal, axis=-1, keepdims=True) * normal
    ex = jnp.broadcast_to(jnp.array([1.0, 0.0, 0.0], dtype), normal.shape)
    t1, _ = _unit(t, ex)
    t2 = cross(normal, t1)
    return jnp.stack([normal, t1, t2], axis=-2)


def _pad(
    dist: jax.Array, pos: jax.Array, frame: jax.Array, k: int
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Append empty slots so a collider returns exactly `k` contacts."""
    extra = k - dist.shape[0]
    dist = jnp.concatenate([dist, jnp.full((extra,), NO_CONTACT, dist.dtype)])
    pos = jnp.concatenate([pos, jnp.zeros((extra, 3), pos.dtype)])
    eye = jnp.broadcast_to(jnp.eye(3, dtype=frame.dtype), (extra, 3, 3))
    return dist, pos, jnp.concatenate([frame, eye])


def _first_k(valid: jax.Array, k: int) -> tuple[jax.Array, jax.Array]:
    """Indices (k,) of the first k True entries of `valid` (N,) in order, and which slots are filled."""
    rank = jnp.cumsum(valid.astype(jnp.int32)) - 1
    slots = jnp.arange(k, dtype=jnp.int32)
    hit = valid[None, :] & (rank[None, :] == slots[:, None])  # (k, N)
    return jnp.argmax(hit, axis=1), jnp.any(hit, axis=1)


def _sphere_sphere(
    c1: jax.Array, r1: jax.Array, c2: jax.Array, r2: jax.Array, z1: jax.Array, z2: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """One sphere-sphere contact (dist (), pos (3,), normal (3,)).

    Coincident centers take the normal z1 x z2 and then (1,0,0), as MuJoCo does.
    """
    ex = jnp.array([1.0, 0.0, 0.0], c1.dtype)
    fallback, _ = _unit(cross(z1, z2), ex)
    n, cdist = _unit(c2 - c1, fallback)
    dist = cdist - r1 - r2
    pos = c1 + n * (r1 + 0.5 * dist)
    return dist, pos, n


def _one(dist: jax.Array, pos: jax.Array, frame: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Add the leading contact axis to a single contact."""
    return dist[None], pos[None], frame[None]


# ----------------------------------------------------------------------------------------------
# plane (geom1) against convex shapes: normal is the plane's local z, origin its position.


def plane_sphere(
    pos1: jax.Array, mat1: jax.Array, size1: jax.Array,
    pos2: jax.Array, mat2: jax.Array, size2: jax.Array, margin: jax.Array,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Plane-sphere: 1 contact at the sphere point deepest along -n."""
    del size1, mat2, margin
    n = mat1[:, 2]
    r = size2[0]
    dist = jnp.dot(pos2 - pos1, n) - r
    pos = pos2 - n * (r + 0.5 * dist)
    return _one(dist, pos, make_frame(n))


def plane_capsule(
    pos1: jax.Array, mat1: jax.Array, size1: jax.Array,
    pos2: jax.Array, mat2: jax.Array, size2: jax.Array, margin: jax.Array,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Plane-capsule: 2 contacts, the end-cap spheres at +axis then -axis; t1 = capsule axis."""
    del size1, margin
    n = mat1[:, 2]
    axis = mat2[:, 2]
    r, h = size2[0], size2[1]
    ends = pos2[None, :] + jnp.array([1.0, -1.0], pos2.dtype)[:, None] * (h * axis)[None, :]
    dist = (ends - pos1[None, :]) @ n - r
    pos = ends - n[None, :] * (r + 0.5 * dist)[:, None]
    frame = make_frame(jnp.broadcast_to(n, (2, 3)), jnp.broadcast_to(axis, (2, 3)))
    return dist, pos, frame


def plane_ellipsoid(
    pos1: jax.Array, mat1: jax.Array, size1: jax.Array,
    pos2: jax.Array, mat2: jax.Array, size2: jax.Array, margin: jax.Array,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Plane-ellipsoid: 1 contact at the ellipsoid's support point along -n."""
    del size1, margin
    n = mat1[:, 2]
    # With S = diag(size), the surface point whose outward normal is -n is -S² n_l / |S n_l|
    # in the ellipsoid frame (n_l = Rᵀ n); |S n_l| >= min(size) > 0, so no guard is needed.
    s_n = size2 * (mat2.T @ n)
    tip = pos2 - mat2 @ (size2 * s_n) / safe_norm(s_n)
    dist = jnp.dot(tip - pos1, n)
    pos = tip - n * (0.5 * dist)
    return _one(dist, pos, make_frame(n))


def _box_corners(size: jax.Array) -> jax.Array:
    """(8, 3) local box corners in MuJoCo's order: bit 0 -> x, bit 1 -> y, bit 2 -> z sign."""
    bits = jnp.arange(8)
    signs = jnp.stack([(bits >> i) & 1 for i in range(3)], axis=1).astype(size.dtype) * 2.0 - 1.0
    return signs * size[None, :]


def plane_box(
    pos1: jax.Array, mat1: jax.Array, size1: jax.Array,
    pos2: jax.Array, mat2: jax.Array, size2: jax.Array, margin: jax.Array,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Plane-box: up to 4 contacts, the first corners (MuJoCo's corner order) within `margin`.

    Like MuJoCo, corners above the box center along n are never used.
    """
    del size1
    n = mat1[:, 2]
    corners = _box_corners(size2) @ mat2.T  # relative to the box center, world axes
    center_dist = jnp.dot(pos2 - pos1, n)
    ldist = corners @ n
    cdist = center_dist + ldist
    valid = (cdist <= margin) & (ldist <= 0)
    idx, ok = _first_k(valid, 4)
    dist = jnp.where(ok, cdist[idx], NO_CONTACT)
    pos = pos2[None, :] + corners[idx] - n[None, :] * (0.5 * cdist[idx])[:, None]
    return dist, pos, make_frame(jnp.broadcast_to(n, (4, 3)))


def plane_cylinder(
    pos1: jax.Array, mat1: jax.Array, size1: jax.Array,
    pos2: jax.Array, mat2: jax.Array, size2: jax.Array, margin: jax.Array,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Plane-cylinder: up to 4 rim contacts within `margin`.

    Slots: the deepest rim point of the lower disk, the two rim points at +-120 degrees from it,
    and the deepest rim point of the other disk (MuJoCo's count and points on every tested pose:
    standing 3, lying 2, tilted 1).
    """
    del size1
    n = mat1[:, 2]
    axis = mat2[:, 2]
    r, h = size2[0], size2[1]
    # Orient the axis toward the plane so `axis * h` reaches the lower disk.
    s = jnp.where(jnp.dot(axis, n) > 0, -1.0, 1.0).astype(pos2.dtype)
    a = axis * s
    # Rim direction pointing most against n; arbitrary (local x) when the cylinder stands upright.
    radial, _ = _unit(-(n - jnp.dot(n, a) * a), mat2[:, 0])
    perp = cross(a, radial)
    cos120, sin120 = -0.5, 0.8660254037844386
    p_low = pos2 + a * h
    pts = jnp.stack([
        p_low + r * radial,
        p_low + r * (cos120 * radial + sin120 * perp),
        p_low + r * (cos120 * radial - sin120 * perp),
        pos2 - a * h + r * radial,
    ])
    d = (pts - pos1[None, :]) @ n
    dist = jnp.where(d <= margin, d, NO_CONTACT)
    pos = pts - n[None, :] * (0.5 * d)[:, None]
    return dist, pos, make_frame(jnp.broadcast_to(n, (4, 3)))


# ----------------------------------------------------------------------------------------------
# sphere and capsule pairs


def sphere_sphere(
    pos1: jax.Array, mat1: jax.Array, size1: jax.Array,
    pos2: jax.Array, mat2: jax.Array, size2: jax.Array, margin: jax.Array,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Sphere-sphere: 1 contact on the center line, pos midway between the surfaces."""
    del margin
    dist, pos, n = _sphere_sphere(pos1, size1[0], pos2, size2[0], mat1[:, 2], mat2[:, 2])
    return _one(dist, pos, make_frame(n))


def sphere_capsule(
    pos1: jax.Array, mat1: jax.Array, size1: jax.Array,
    pos2: jax.Array, mat2: jax.Array, size2: jax.Array, margin: jax.Array,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Sphere-capsule: 1 contact between the sphere and the closest point of the capsule segment."""
    del margin
    axis = mat2[:, 2]
    x = jnp.clip(jnp.dot(pos1 - pos2, axis), -size2[1], size2[1])
    dist, pos, n = _sphere_sphere(pos1, size1[0], pos2 + x * axis, size2[0], mat1[:, 2], axis)
    return _one(dist, pos, make_frame(n))


def sphere_cylinder(
    pos1: jax.Array, mat1: jax.Array, size1: jax.Array,
    pos2: jax.Array, mat2: jax.Array, size2: jax.Array, margin: jax.Array,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Sphere-cylinder: 1 contact with the side, a cap or the rim, whichever is closest.

    Sphere center c in the cylinder frame: axial coordinate x, radial distance ρ. Beside the
    cylinder (|x| < h) it touches the side (a sphere centered on the axis at x, of the cylinder's
    radius); above or below a cap (ρ < R) the cap plane; otherwise the rim circle point nearest to
    it. A center inside the cylinder leaves through the side or the cap of least penetration.
    """
    del margin
    dtype = pos1.dtype
    axis = mat2[:, 2]
    r, big_r, h = size1[0], size2[0], size2[1]
    v = pos1 - pos2
    x = jnp.dot(v, axis)
    radial_v = v - x * axis
    radial, rho = _unit(radial_v, mat2[:, 0])
    side = jnp.abs(x) < h
    cap = rho < big_r
    inside = side & cap
    cap_first = (h - jnp.abs(x)) < (big_r - rho)  # inside: the face of least penetration
    use_side = side & ~(inside & cap_first)
    use_cap = cap & ~(inside & ~cap_first)
    sgn = jnp.where(x >= 0, 1.0, -1.0).astype(dtype)
    # side: sphere-sphere against the axis point at x, radius R (normal from the sphere inward)
    d_side, p_side, n_side = _sphere_sphere(pos1, r, pos2 + x * axis, big_r, mat1[:, 2], axis)
    # cap: plane of the cap facing the sphere
    n_cap = -sgn * axis
    d_cap = jnp.abs(x) - h - r
    p_cap = pos1 + n_cap * (r + 0.5 * d_cap)
    # rim: the circle point nearest the center, a sphere of zero radius
    rim = pos2 + sgn * h * axis + big_r * radial
    d_rim, p_rim, n_rim = _sphere_sphere(pos1, r, rim, jnp.zeros((), dtype), mat1[:, 2], axis)
    dist = jnp.where(use_side, d_side, jnp.where(use_cap, d_cap, d_rim))
    pos = jnp.where(use_side, p_side, jnp.where(use_cap, p_cap, p_rim))
    n = jnp.where(use_side, n_side, jnp.where(use_cap, n_cap, n_rim))
    return _one(dist, pos, make_frame(n))


def capsule_capsule(
    pos1: jax.Array, mat1: jax.Array, size1: jax.Array,
    pos2: jax.Array, mat2: jax.Array, size2: jax.Array, margin: jax.Array,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Capsule-capsule: 1 contact at the closest segment points, 2 when the axes are parallel.

    Parallel means |sin(angle)| < 1e-4 (MuJoCo's threshold, found by bisection). The two
    parallel contacts start from capsule1's -axis then +axis end: that end's closest point on
    segment 2, and that point's closest point back on segment 1 (duplicates are possible, as in
    MuJoCo).
    """
    del margin
    dtype = pos1.dtype
    z1, z2 = mat1[:, 2], mat2[:, 2]
    a1, a2 = z1 * size1[1], z2 * size2[1]
    dif = pos1 - pos2
    ma = jnp.dot(a1, a1)
    mb = -jnp.dot(a1, a2)
    mc = jnp.dot(a2, a2)
    u = -jnp.dot(a1, dif)
    v = jnp.dot(a2, dif)
    # |a1 x a2|^2 equals ma*mc - mb^2 without float32 cancellation.
    c12 = cross(a1, a2)
    det = jnp.dot(c12, c12)
    ma_safe = jnp.where(ma > 0, ma, jnp.ones_like(ma))
    mc_safe = jnp.where(mc > 0, mc, jnp.ones_like(mc))
    parallel = det < 1e-8 * ma * mc

    # General configuration: unconstrained minimizer, then MuJoCo's clamping sequence.
    det_safe = jnp.where(parallel, jnp.ones_like(det), det)
    x1 = (mc * u - mb * v) / det_safe
    x2 = (ma * v - mb * u) / det_safe
    x2 = jnp.where(x1 > 1, (v - mb) / mc_safe, jnp.where(x1 < -1, (v + mb) / mc_safe, x2))
    x1 = jnp.clip(x1, -1.0, 1.0)
    x1 = jnp.where(
        x2 > 1,
        jnp.clip((u - mb) / ma_safe, -1.0, 1.0),
        jnp.where(x2 < -1, jnp.clip((u + mb) / ma_safe, -1.0, 1.0), x1),
    )
    x2 = jnp.clip(x2, -1.0, 1.0)
    d_g, p_g, n_g = _sphere_sphere(pos1 + x1 * a1, size1[0], pos2 + x2 * a2, size2[0], z1, z2)

    # Parallel axes: one contact from each end of segment 1.
    def from_end(e: float) -> tuple[jax.Array, jax.Array, jax.Array]:
        y2 = jnp.clip((v - e * mb) / mc_safe, -1.0, 1.0)
        y1 = jnp.clip((u - y2 * mb) / ma_safe, -1.0, 1.0)
        return _sphere_sphere(pos1 + y1 * a1, size1[0], pos2 + y2 * a2, size2[0], z1, z2)

    d_lo, p_lo, n_lo = from_end(-1.0)
    d_hi, p_hi, n_hi = from_end(1.0)
    dist = jnp.where(parallel, jnp.stack([d_lo, d_hi]), jnp.stack([d_g, jnp.asarray(NO_CONTACT, dtype)]))
    pos = jnp.where(parallel, jnp.stack([p_lo, p_hi]), jnp.stack([p_g, p_g]))
    n = jnp.where(parallel, jnp.stack([n_lo, n_hi]), jnp.stack([n_g, n_g]))
    return dist, pos, make_frame(n)


# ----------------------------------------------------------------------------------------------
# box pairs


def _box_sdf(q: jax.Array, size: jax.Array) -> jax.Array:
    """Signed distance (...) of box-frame points q (..., 3) to a box of half-extents `size` (3,)."""
    d = jnp.abs(q) - size
    outside = safe_norm(jnp.maximum(d, 0.0))
    return outside + jnp.minimum(jnp.max(d, axis=-1), 0.0)


def _sphere_box_local(
    c: jax.Array, r: jax.Array, size: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Sphere (center c in the box frame, radius r) vs box: dist (), pos (3,), normal (3,), box frame.

    The normal points from the sphere into the box. A center inside the box uses the face of
    least penetration, as MuJoCo does.
    """
    dtype = c.dtype
    clamped = jnp.clip(c, -size, size)
    n_out, d0 = _unit(clamped - c, jnp.zeros(3, dtype))
    inside = d0 <= _MIN_LEN
    depth = size - jnp.abs(c)
    k = jnp.argmin(depth)
    onehot = jnp.arange(3) == k
    sign = jnp.where(c[k] >= 0, 1.0, -1.0).astype(dtype)
    n_in = jnp.where(onehot, -sign, 0.0).astype(dtype)
    n = jnp.where(inside, n_in, n_out)
    dist = jnp.where(inside, -jnp.min(depth), d0) - r
    pos = c + n * (r + 0.5 * dist)
    return dist, pos, n


def sphere_box(
    pos1: jax.Array, mat1: jax.Array, size1: jax.Array,
    pos2: jax.Array, mat2: jax.Array, size2: jax.Array, margin: jax.Array,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Sphere-box: 1 contact between the sphere and the closest point of the box."""
    del mat1, margin
    c = mat2.T @ (pos1 - pos2)
    dist, pos, n = _sphere_box_local(c, size1[0], size2)
    n = mat2 @ n
    return _one(dist, mat2 @ pos + pos2, make_frame(n))


_GOLDEN_ITERS: Final = 36


def _segment_box_param(c: jax.Array, a: jax.Array, size: jax.Array) -> jax.Array:
    """Parameter t in [-1, 1] minimizing the box signed distance of c + t a (box frame).

    The signed distance of a convex set is convex along a line, so a golden-section search
    converges; gradients flow through the distance evaluated at t, not through t (envelope theorem).
    """
    invphi = 0.6180339887498949
    c, a, size = jax.lax.stop_gradient((c, a, size))

    def f(t: jax.Array) -> jax.Array:
        return _box_sdf(c + t * a, size)

    def body(_: int, lohi: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        lo, hi = lohi
        m1 = hi - invphi * (hi - lo)
        m2 = lo + invphi * (hi - lo)
        left = f(m1) <= f(m2)
        return jnp.where(left, lo, m1), jnp.where(left, m2, hi)

    one = jnp.ones((), c.dtype)
    lo, hi = jax.lax.fori_loop(0, _GOLDEN_ITERS, body, (-one, one))
    t = 0.5 * (lo + hi)
    # The ends are the usual minimizers (resting, end-first); the search may stop a hair short.
    cand = jnp.stack([-one, t, one])
    vals = jax.vmap(f)(cand)
    return cand[jnp.argmin(vals)]


def capsule_box(
    pos1: jax.Array, mat1: jax.Array, size1: jax.Array,
    pos2: jax.Array, mat2: jax.Array, size2: jax.Array, margin: jax.Array,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Capsule-box: 1 contact at the segment point closest to the box, or 2 when lying on a face.

    Lying on a face (the whole segment outside the plane of the face the closest-point normal
    points into): contacts at the two ends of the part of the segment over that face, the one
    nearer the closest point first (-axis end when flat), as MuJoCo reports a capsule resting on
    a box. Elsewhere MuJoCo's second-contact rule differs (see the tests' documented deviations).
    """
    del margin
    dtype = pos1.dtype
    r, h = size1[0], size1[1]
    c = mat2.T @ (pos1 - pos2)
    a = mat2.T @ (mat1[:, 2] * h)
    t = _segment_box_param(c, a, size2)
    d_c, p_c, n_c = _sphere_box_local(c + t * a, r, size2)

    # Face mode: the face is the one the closest-point normal mostly points into; the whole
    # segment must lie outside that face's plane (a segment dipping into the box gets 1 contact).
    k = jnp.argmax(jnp.abs(n_c))
    sgn = jnp.where(n_c[k] > 0, -1.0, 1.0).astype(dtype)  # side of the box the capsule is on
    ends_k = sgn * jnp.stack([c[k] - a[k], c[k] + a[k]])
    face = jnp.all(ends_k >= size2[k])
    # Clip the segment to the slab of the face's two in-plane axes.
    other = jnp.arange(3) != k
    moving = other & (jnp.abs(a) > _MIN_LEN)
    a_safe = jnp.where(moving, a, jnp.ones_like(a))
    ta = (-size2 - c) / a_safe
    tb = (size2 - c) / a_safe
    big = jnp.asarray(2.0, dtype)
    t_lo = jnp.maximum(jnp.max(jnp.where(moving, jnp.minimum(ta, tb), -big)), -1.0)
    t_hi = jnp.minimum(jnp.min(jnp.where(moving, jnp.maximum(ta, tb), big)), 1.0)
    face = face & (t_lo < t_hi)
    # The clipped end nearer the closest point comes first, as MuJoCo lists the closest contact first.
    near_lo = jnp.abs(t - t_lo) <= jnp.abs(t - t_hi)
    t_first = jnp.where(near_lo, t_lo, t_hi)
    t_second = jnp.where(near_lo, t_hi, t_lo)
    d_1, p_1, n_1 = _sphere_box_local(c + t_first * a, r, size2)
    d_2, p_2, n_2 = _sphere_box_local(c + t_second * a, r, size2)

    # The first contact is the closest point, moved to the clipped end when that end is as close
    # (a capsule lying flat has a whole segment of closest points; MuJoCo reports its ends).
    snap = face & (d_1 <= d_c + 1e-6 * jnp.max(size2))
    d_0 = jnp.where(snap, d_1, d_c)
    p_0 = jnp.where(snap, p_1, p_c)
    n_0 = jnp.where(snap, n_1, n_c)
    dist = jnp.stack([d_0, jnp.where(face, d_2, jnp.asarray(NO_CONTACT, dtype))])
    pos = jnp.stack([p_0, p_2])
    n = jnp.stack([n_0, n_2])
    return dist, pos @ mat2.T + pos2[None, :], make_frame(n @ mat2.T)


def _closest_lines(
    p1: jax.Array, d1: jax.Array, p2: jax.Array, d2: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Closest points of the segments p1 + s d1 and p2 + t d2 (s, t in [-1, 1])."""
    w = p1 - p2
    a, b, c = jnp.dot(d1, d1), jnp.dot(d1, d2), jnp.dot(d2, d2)
    d, e = jnp.dot(d1, w), jnp.dot(d2, w)
    den = a * c - b * b
    den_ok = den > 1e-12 * a * c
    s = jnp.where(den_ok, (b * e - c * d) / jnp.where(den_ok, den, jnp.ones_like(den)), 0.0)
    s = jnp.clip(s, -1.0, 1.0)
    t = jnp.clip((b * s + e) / jnp.where(c > 0, c, jnp.ones_like(c)), -1.0, 1.0)
    s = jnp.clip((b * t - d) / jnp.where(a > 0, a, jnp.ones_like(a)), -1.0, 1.0)
    return p1 + s * d1, p2 + t * d2


# An edge-edge axis is chosen only if its separation, scaled by this factor, still beats the best
# face axis: faces give the stable multi-point manifold and MuJoCo clearly prefers them (a 5%
# preference reproduces its choices in the tests; the exact rule is not documented).
_EDGE_FACTOR: Final = 1.05


def box_box(
    pos1: jax.Array, mat1: jax.Array, size1: jax.Array,
    pos2: jax.Array, mat2: jax.Array, size2: jax.Array, margin: jax.Array,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Box-box: separating-axis test, then up to 8 face-clipping contacts or 1 edge-edge contact.

    Face contact: points of the overlap polygon of the reference face (on the axis's box) and the
    most anti-parallel face of the other box, projected on the reference plane; each point's
    dist is the other face's height above it and pos is midway. Contacts within `margin` are
    kept, first 8 in candidate order (order differs from MuJoCo's; match by position).
    """
    dtype = pos1.dtype
    d = pos2 - pos1
    edge_axes = cross(mat1.T[:, None, :], mat2.T[None, :, :]).reshape(9, 3)
    edge_unit, edge_len = _unit(edge_axes, jnp.zeros(3, dtype))
    axes = jnp.concatenate([mat1.T, mat2.T, edge_unit])  # (15, 3)
    r1 = jnp.abs(axes @ mat1) @ size1
    r2 = jnp.abs(axes @ mat2) @ size2
    sep = jnp.abs(axes @ d) - r1 - r2
    # Near-parallel edge pairs have no defined cross-product axis; their faces cover them.
    axis_ok = jnp.concatenate([jnp.ones(6, bool), edge_len > 1e-4])
    sep = jnp.where(axis_ok, sep, -1e30)
    scale = jnp.max(jnp.concatenate([size1, size2]))
    face_best = jnp.argmax(sep[:6])
    edge_best = 6 + jnp.argmax(sep[6:])
    use_edge = sep[edge_best] * _EDGE_FACTOR > sep[face_best]
    best = jnp.where(use_edge, edge_best, face_best)
    axis = axes[best]
    n = axis * jnp.where(jnp.dot(axis, d) >= 0, 1.0, -1.0).astype(dtype)  # from box1 to box2

    # ---- face contact: reference box owns the axis; its normal points to the incident box.
    ref_is_1 = face_best < 3
    pr = jnp.where(ref_is_1, pos1, pos2)
    pi = jnp.where(ref_is_1, pos2, pos1)
    Rr = jnp.where(ref_is_1, mat1, mat2)
    Ri = jnp.where(ref_is_1, mat2, mat1)
    sr = jnp.where(ref_is_1, size1, size2)
    si = jnp.where(ref_is_1, size2, size1)
    fax = axes[face_best]
    nr = fax * jnp.where(jnp.dot(fax, pi - pr) >= 0, 1.0, -1.0).astype(dtype)
    kr = face_best % 3
    idx3 = jnp.arange(3)
    # In-plane axes of the reference face, in cyclic order after kr.
    ka, kb = (kr + 1) % 3, (kr + 2) % 3
    ea, eb = Rr[:, ka], Rr[:, kb]
    sa, sb = sr[ka], sr[kb]
    fc = pr + nr * jnp.sum(jnp.where(idx3 == kr, sr, 0.0))
    # Incident face: most anti-parallel to nr.
    dots = Ri.T @ nr
    ki = jnp.argmax(jnp.abs(dots))
    si_sign = jnp.where(dots[ki] > 0, -1.0, 1.0).astype(dtype)
    m_i = Ri[:, ki] * si_sign
    ic = pi + m_i * si[ki]
    kc, kd = (ki + 1) % 3, (ki + 2) % 3
    ec, ed = Ri[:, kc] * si[kc], Ri[:, kd] * si[kd]
    sq = jnp.array([[-1, -1], [1, -1], [1, 1], [-1, 1]], dtype)  # cyclic quad order
    vi = ic[None, :] + sq[:, :1] * ec[None, :] + sq[:, 1:] * ed[None, :]  # (4, 3)

    def to2d(x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        rel = x - fc[None, :]
        return rel @ ea, rel @ eb, rel @ nr

    tol = 1e-5 * scale
    # (1) incident vertices inside the reference rectangle.
    va, vb, vh = to2d(vi)
    in1 = (jnp.abs(va) <= sa + tol) & (jnp.abs(vb) <= sb + tol)
    # (2) reference corners under the incident face: project along nr onto the incident plane.
    ca = sq[:, 0] * sa
    cb = sq[:, 1] * sb
    corners = fc[None, :] + ca[:, None] * ea[None, :] + cb[:, None] * eb[None, :]
    denom = jnp.dot(nr, m_i)
    denom = jnp.where(jnp.abs(denom) > _MIN_LEN, denom, jnp.ones_like(denom))
    ch = ((ic[None, :] - corners) @ m_i) / denom
    on_inc = corners + ch[:, None] * nr[None, :] - ic[None, :]
    sc, sd = si[kc], si[kd]
    in2 = (jnp.abs(on_inc @ Ri[:, kc]) <= sc + tol) & (jnp.abs(on_inc @ Ri[:, kd]) <= sd + tol)
    # (3) incident edges crossing the reference rectangle's edge lines.
    P = vi
    Q = jnp.roll(vi, -1, axis=0)
    pa, pb, ph = to2d(P)
    qa, qb, qh = to2d(Q)
    # Lines: a = +-sa (bounded by |b| <= sb) and b = +-sb (bounded by |a| <= sa).
    lines_val = jnp.stack([-sa, sa, -sb, sb])
    on_a = jnp.array([True, True, False, False])
    p_coord = jnp.where(on_a[:, None], pa[None, :], pb[None, :])  # (4 lines, 4 edges)
    q_coord = jnp.where(on_a[:, None], qa[None, :], qb[None, :])
    p_other = jnp.where(on_a[:, None], pb[None, :], pa[None, :])
    q_other = jnp.where(on_a[:, None], qb[None, :], qa[None, :])
    bound = jnp.where(on_a, sb, sa)[:, None]
    dcoord = q_coord - p_coord
    dsafe = jnp.where(jnp.abs(dcoord) > 1e-12, dcoord, jnp.ones_like(dcoord))
    tt = (lines_val[:, None] - p_coord) / dsafe
    other_val = p_other + tt * (q_other - p_other)
    in3 = (jnp.abs(dcoord) > 1e-12) & (tt >= 0) & (tt <= 1) & (jnp.abs(other_val) <= bound + tol)
    eh = ph[None, :] + tt * (qh - ph)[None, :]
    ea3 = jnp.where(on_a[:, None], lines_val[:, None], other_val)
    eb3 = jnp.where(on_a[:, None], other_val, lines_val[:, None])

    cand_a = jnp.concatenate([va, ca, ea3.reshape(16)])
    cand_b = jnp.concatenate([vb, cb, eb3.reshape(16)])
    cand_h = jnp.concatenate([vh, ch, eh.reshape(16)])
    valid = jnp.concatenate([in1, in2, in3.reshape(16)]) & (cand_h <= margin)
    # Drop points that coincide with an earlier valid one (shared vertices of the two quads).
    close = (jnp.abs(cand_a[:, None] - cand_a[None, :]) <= tol) & (
        jnp.abs(cand_b[:, None] - cand_b[None, :]) <= tol
    )
    earlier = jnp.tril(jnp.ones((24, 24), bool), k=-1)
    valid = valid & ~jnp.any(close & earlier & valid[None, :], axis=1)
    sel, ok = _first_k(valid, 8)
    fh = cand_h[sel]
    fpos = (
        fc[None, :]
        + cand_a[sel][:, None] * ea[None, :]
        + cand_b[sel][:, None] * eb[None, :]
        + (0.5 * fh)[:, None] * nr[None, :]
    )
    fdist = jnp.where(ok, fh, NO_CONTACT)

    # ---- edge-edge contact: the supporting edges of both boxes along n.
    i1 = (best - 6) // 3
    i2 = (best - 6) % 3
    s1 = jnp.where((mat1.T @ n) >= 0, 1.0, -1.0).astype(dtype) * size1
    s2 = jnp.where((mat2.T @ n) >= 0, -1.0, 1.0).astype(dtype) * size2
    c1 = pos1 + mat1 @ jnp.where(idx3 == i1, 0.0, s1)
    c2 = pos2 + mat2 @ jnp.where(idx3 == i2, 0.0, s2)
    e1 = mat1[:, i1] * jnp.sum(jnp.where(idx3 == i1, size1, 0.0))
    e2 = mat2[:, i2] * jnp.sum(jnp.where(idx3 == i2, size2, 0.0))
    q1, q2 = _closest_lines(c1, e1, c2, e2)
    edist = jnp.dot(q2 - q1, n)
    epos = 0.5 * (q1 + q2)

    dist = jnp.where(use_edge, jnp.concatenate([edist[None], jnp.full((7,), NO_CONTACT, dtype)]), fdist)
    pos = jnp.where(use_edge, jnp.broadcast_to(epos, (8, 3)), fpos)
    return dist, pos, make_frame(jnp.broadcast_to(n, (8, 3)))


def _types(t1: mjtGeom, t2: mjtGeom) -> tuple[int, int]:
    """A `COLLIDERS` key: the two `mujoco.mjtGeom` codes as plain ints (as the pair tables hold them)."""
    return int(t1), int(t2)


COLLIDERS: Final[dict[tuple[int, int], tuple[Collider, int]]] = {
    _types(mjtGeom.mjGEOM_PLANE, mjtGeom.mjGEOM_SPHERE): (plane_sphere, 1),
    _types(mjtGeom.mjGEOM_PLANE, mjtGeom.mjGEOM_CAPSULE): (plane_capsule, 2),
    _types(mjtGeom.mjGEOM_PLANE, mjtGeom.mjGEOM_ELLIPSOID): (plane_ellipsoid, 1),
    _types(mjtGeom.mjGEOM_PLANE, mjtGeom.mjGEOM_BOX): (plane_box, 4),
    _types(mjtGeom.mjGEOM_PLANE, mjtGeom.mjGEOM_CYLINDER): (plane_cylinder, 4),
    _types(mjtGeom.mjGEOM_SPHERE, mjtGeom.mjGEOM_SPHERE): (sphere_sphere, 1),
    _types(mjtGeom.mjGEOM_SPHERE, mjtGeom.mjGEOM_CAPSULE): (sphere_capsule, 1),
    _types(mjtGeom.mjGEOM_SPHERE, mjtGeom.mjGEOM_CYLINDER): (sphere_cylinder, 1),
    _types(mjtGeom.mjGEOM_SPHERE, mjtGeom.mjGEOM_BOX): (sphere_box, 1),
    _types(mjtGeom.mjGEOM_CAPSULE, mjtGeom.mjGEOM_CAPSULE): (capsule_capsule, 2),
    _types(mjtGeom.mjGEOM_CAPSULE, mjtGeom.mjGEOM_BOX): (capsule_box, 2),
    _types(mjtGeom.mjGEOM_BOX, mjtGeom.mjGEOM_BOX): (box_box, 8),
}
"""Collider and contact count K per supported (type1, type2) of `mujoco.mjtGeom` codes, type1 <= type2."""
