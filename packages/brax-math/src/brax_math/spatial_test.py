"""Spatial algebra against independent oracles: homogeneous matrices, 6x6 spatial matrices built in
numpy (float64), point-mass bodies, finite differences and frame-independent power."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import brax_math as bm

N = 8


def _rand_transform(seed: int) -> bm.Transform:
    rng = np.random.default_rng(seed)
    rot = np.roll(Rotation.random(N, random_state=seed).as_quat(), 1, axis=-1)
    return bm.Transform(
        pos=jnp.asarray(rng.normal(size=(N, 3)), dtype=jnp.float32), rot=jnp.asarray(rot, dtype=jnp.float32)
    )


def _homogeneous(t: bm.Transform) -> np.ndarray:
    h = np.zeros((*t.pos.shape[:-1], 4, 4))
    h[..., :3, :3] = np.asarray(bm.quat_to_mat(t.rot))
    h[..., :3, 3] = np.asarray(t.pos)
    h[..., 3, 3] = 1.0
    return h


def _rand(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    """float32-representable random values, as float64 (the oracles compute in float64)."""
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32).astype(np.float64)


def _f32(x: np.ndarray) -> jax.Array:
    return jnp.asarray(x, dtype=jnp.float32)


def _skew(v: np.ndarray) -> np.ndarray:
    """(..., 3, 3) matrices with skew(a) @ b == cross(a, b)."""
    x, y, z = v[..., 0], v[..., 1], v[..., 2]
    o = np.zeros_like(x)
    return np.stack([np.stack([o, -z, y], -1), np.stack([z, o, -x], -1), np.stack([-y, x, o], -1)], -2)


def _crm(v: np.ndarray) -> np.ndarray:
    """(..., 6, 6) motion cross-product matrix of [ω; v] (Featherstone's crm in [ang; lin] order)."""
    w, lin = _skew(v[..., :3]), _skew(v[..., 3:])
    return np.concatenate(
        [np.concatenate([w, np.zeros_like(w)], -1), np.concatenate([lin, w], -1)], -2
    )


def _mv(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    out: np.ndarray = np.einsum("...ij,...j->...i", a, x)
    return out


@pytest.fixture(scope="module")
def ta() -> bm.Transform:
    return _rand_transform(1)


@pytest.fixture(scope="module")
def tb() -> bm.Transform:
    return _rand_transform(2)


def test_compose_matches_homogeneous_product(ta: bm.Transform, tb: bm.Transform) -> None:
    np.testing.assert_allclose(_homogeneous(ta.do(tb)), _homogeneous(ta) @ _homogeneous(tb), atol=1e-5)


def test_inverse_round_trips(ta: bm.Transform, tb: bm.Transform) -> None:
    ident = ta.do(ta.inv())
    np.testing.assert_allclose(ident.pos, 0.0, atol=1e-5)
    np.testing.assert_allclose(np.abs(ident.rot[:, 0]), 1.0, atol=1e-6)
    np.testing.assert_allclose(_homogeneous(ta.inv()), np.linalg.inv(_homogeneous(ta)), atol=1e-5)
    local = ta.to_local(tb)
    np.testing.assert_allclose(_homogeneous(ta.do(local)), _homogeneous(tb), atol=1e-5)
    np.testing.assert_allclose(_homogeneous(local), _homogeneous(ta.inv().do(tb)), atol=1e-5)


def test_apply_point_and_vector(ta: bm.Transform) -> None:
    p = _f32(_rand(3, (N, 3)))
    h = _homogeneous(ta)
    want = np.einsum("nij,nj->ni", h[:, :3, :3], np.asarray(p)) + h[:, :3, 3]
    np.testing.assert_allclose(ta.apply_point(p), want, atol=1e-5)
    np.testing.assert_allclose(ta.apply_vector(p), want - h[:, :3, 3], atol=1e-5)
    np.testing.assert_allclose(ta.inv_apply_point(ta.apply_point(p)), p, atol=1e-5)


def test_constructors() -> None:
    t = bm.Transform.create(pos=jnp.ones((2, 5, 3)))
    assert t.rot.shape == (2, 5, 4) and t.shape == (2, 5)
    np.testing.assert_allclose(t.rot[..., 0], 1.0)
    r = bm.Transform.create(rot=bm.quat_identity((4,)))
    assert r.pos.shape == (4, 3)
    z = bm.Transform.zero((3,))
    np.testing.assert_allclose(_homogeneous(z), np.tile(np.eye(4), (3, 1, 1)))
    with pytest.raises(ValueError, match="pos, rot"):
        bm.Transform.create()


def test_pytrees_jit_vmap_and_indexing(ta: bm.Transform, tb: bm.Transform) -> None:
    composed = jax.jit(jax.vmap(lambda a, b: a.do(b)))(ta, tb)
    np.testing.assert_allclose(composed.pos, ta.do(tb).pos, atol=1e-6)
    assert len(jax.tree.leaves(ta)) == 2
    np.testing.assert_allclose(ta[3].pos, ta.pos[3])
    with pytest.raises(dataclasses.FrozenInstanceError):
        ta.pos = jnp.zeros(3)  # type: ignore[misc]
    m = bm.Motion(ang=_f32(_rand(4, (N, 3))), vel=_f32(_rand(5, (N, 3))))
    doubled = jax.jit(lambda m: jax.tree.map(lambda x: 2 * x, m))(m)
    assert isinstance(doubled, bm.Motion) and m.shape == (N,)
    np.testing.assert_allclose(doubled[2].vel, 2 * m.vel[2])


@pytest.mark.parametrize("batch", [(N,), (2, N)])
def test_cross_products_match_spatial_matrices(batch: tuple[int, ...]) -> None:
    v, m, f = _rand(6, (*batch, 6)), _rand(7, (*batch, 6)), _rand(8, (*batch, 6))
    crm = _crm(v)
    np.testing.assert_allclose(bm.motion_cross(_f32(v), _f32(m)), _mv(crm, m), rtol=1e-5, atol=1e-5)
    # The force cross product is the negative transpose of the motion one (crf = -crmᵀ).
    crf = -np.swapaxes(crm, -1, -2)
    np.testing.assert_allclose(bm.force_cross(_f32(v), _f32(f)), _mv(crf, f), rtol=1e-5, atol=1e-5)
    # The duality that defines ×*: power of f on v ×ₘ m equals -(v ×* f) · m.
    lhs = np.sum(np.asarray(bm.motion_cross(_f32(v), _f32(m)), np.float64) * f, axis=-1)
    rhs = -np.sum(np.asarray(bm.force_cross(_f32(v), _f32(f)), np.float64) * m, axis=-1)
    np.testing.assert_allclose(lhs, rhs, rtol=1e-4, atol=1e-4)


def test_spatial_products_broadcast_one_operand_over_a_batch() -> None:
    """One motion (or inertia) against a batch, and a batch against one: each row as computed alone."""
    v, m = _f32(_rand(6, (N, 6))), _f32(_rand(7, (N, 6)))
    inert = _f32(_rand(9, (N, 10)))
    for fn, a, b in ((bm.motion_cross, v, m), (bm.force_cross, v, m), (bm.inertia_mul, inert, v)):
        whole = np.asarray(fn(a[0], b))
        np.testing.assert_array_equal(whole, np.stack([np.asarray(fn(a[0], b[k])) for k in range(N)]))
        whole = np.asarray(fn(a, b[0]))
        np.testing.assert_array_equal(whole, np.stack([np.asarray(fn(a[k], b[0])) for k in range(N)]))


def _point_body(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(N, 5) masses and (N, 5, 3) positions (from the reference point) of N rigid point-mass bodies."""
    rng = np.random.default_rng(seed)
    mass = rng.uniform(0.2, 2.0, size=(N, 5)).astype(np.float32).astype(np.float64)
    pos = rng.normal(size=(N, 1, 3)) + 0.5 * rng.normal(size=(N, 5, 3))
    pos = pos.astype(np.float32).astype(np.float64)
    return mass, pos


def _principal(mass: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Total mass (N,), principal moments (N, 3), principal axes (N, 3, 3) (columns) and com (N, 3)."""
    total = mass.sum(-1)
    com = np.einsum("nk,nki->ni", mass, pos) / total[:, None]
    r = pos - com[:, None, :]
    ic = np.einsum("nk,nkij->nij", mass, np.einsum("nki,nki->nk", r, r)[..., None, None] * np.eye(3)
                   - np.einsum("nki,nkj->nkij", r, r))
    moments, axes = np.linalg.eigh(ic)
    return total, moments, axes, com


def test_com_inertia_and_inertia_mul_give_the_momentum_of_point_masses() -> None:
    mass, pos = _point_body(9)
    total, moments, axes, com = _principal(mass, pos)
    inert = bm.com_inertia(_f32(total), _f32(moments), _f32(axes), _f32(com))
    assert inert.shape == (N, 10)
    # Rotational inertia about the reference point, straight from the point masses.
    i_o = np.einsum("nk,nkij->nij", mass, np.einsum("nki,nki->nk", pos, pos)[..., None, None] * np.eye(3)
                    - np.einsum("nki,nkj->nkij", pos, pos))
    want = np.stack([i_o[:, 0, 0], i_o[:, 1, 1], i_o[:, 2, 2], i_o[:, 0, 1], i_o[:, 0, 2], i_o[:, 1, 2]], -1)
    np.testing.assert_allclose(inert[:, :6], want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(inert[:, 6:9], total[:, None] * com, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(inert[:, 9], total, rtol=1e-6)
    # Momentum of the body moving with motion [ω; v] (v: velocity of the body-fixed reference point).
    motion = _rand(10, (N, 6))
    vel = motion[:, None, 3:] + np.cross(motion[:, None, :3], pos)  # (N, 5, 3) point velocities
    lin = np.einsum("nk,nki->ni", mass, vel)
    ang = np.einsum("nk,nki->ni", mass, np.cross(pos, vel))
    got = bm.inertia_mul(inert, _f32(motion))
    np.testing.assert_allclose(got, np.concatenate([ang, lin], -1), rtol=1e-4, atol=1e-4)


def test_inertia_mul_matches_the_spatial_inertia_matrix() -> None:
    """Featherstone's 6x6 inertia about the reference point, [ang; lin] order, from com quantities."""
    rng = np.random.default_rng(11)
    mass = rng.uniform(0.5, 3.0, size=N)
    a = rng.normal(size=(N, 3, 3))
    ic = a @ np.swapaxes(a, -1, -2) + np.eye(3)  # SPD inertia about the com, world axes
    c = rng.normal(size=(N, 3))
    cx = _skew(c)
    m = mass[:, None, None]
    mat = np.concatenate([np.concatenate([ic - m * cx @ cx, m * cx], -1),
                          np.concatenate([-m * cx, m * np.eye(3)], -1)], -2)
    i_o = mat[:, :3, :3]
    inert = np.concatenate(
        [i_o[:, [0, 1, 2], [0, 1, 2]], i_o[:, [0, 0, 1], [1, 2, 2]], mass[:, None] * c, mass[:, None]], -1)
    v = _rand(12, (N, 6))
    np.testing.assert_allclose(bm.inertia_mul(_f32(inert), _f32(v)), _mv(mat, v), rtol=1e-4, atol=1e-4)


def test_rotation_motion_is_the_derivative_of_a_rotation_about_the_axis() -> None:
    axis = _rand(13, (N, 3))
    axis /= np.linalg.norm(axis, axis=-1, keepdims=True)
    offset = _rand(14, (N, 3))  # reference point minus a point on the axis
    got = np.asarray(bm.rotation_motion(_f32(axis), _f32(offset)), np.float64)
    np.testing.assert_allclose(got[:, :3], axis, rtol=1e-6)
    # Central difference of the reference point's position under rotation by ±eps about the axis.
    eps = 1e-6
    moved = [Rotation.from_rotvec(s * eps * axis).apply(offset) for s in (1.0, -1.0)]
    np.testing.assert_allclose(got[:, 3:], (moved[0] - moved[1]) / (2 * eps), rtol=1e-4, atol=1e-5)


def test_point_velocity_and_spatial_force_match_plucker_transforms() -> None:
    m, r = _rand(15, (N, 6)), _rand(16, (N, 3))
    torque, force = _rand(17, (N, 3)), _rand(18, (N, 3))
    rx = _skew(r)
    eye, zero = np.broadcast_to(np.eye(3), rx.shape), np.zeros_like(rx)
    # Motion at the reference point -> the same motion at point r, and its dual for forces at r.
    x_motion = np.concatenate([np.concatenate([eye, zero], -1), np.concatenate([-rx, eye], -1)], -2)
    x_force = np.concatenate([np.concatenate([eye, rx], -1), np.concatenate([zero, eye], -1)], -2)
    vel = bm.point_velocity(_f32(m), _f32(r))
    np.testing.assert_allclose(vel, _mv(x_motion, m)[:, 3:], rtol=1e-5, atol=1e-5)
    f = bm.spatial_force(_f32(torque), _f32(force), _f32(r))
    np.testing.assert_allclose(f, _mv(x_force, np.concatenate([torque, force], -1)), rtol=1e-5, atol=1e-5)
    # Power is the same about either point.
    at_r = np.sum(m[:, :3] * torque, -1) + np.sum(np.asarray(vel, np.float64) * force, -1)
    at_ref = np.sum(m * np.asarray(f, np.float64), -1)
    np.testing.assert_allclose(at_ref, at_r, rtol=1e-4, atol=1e-4)
