"""Spatial algebra against homogeneous matrices, explicit 6x6 forms and physical invariants."""

from __future__ import annotations

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


def _rand_vec(seed: int, shape: tuple[int, ...] = (N, 3)) -> jax.Array:
    return jnp.asarray(np.random.default_rng(seed).normal(size=shape), dtype=jnp.float32)


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
    p = _rand_vec(3)
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


def test_pytree_jit_vmap_and_indexing(ta: bm.Transform, tb: bm.Transform) -> None:
    composed = jax.jit(jax.vmap(lambda a, b: a.do(b)))(ta, tb)
    np.testing.assert_allclose(composed.pos, ta.do(tb).pos, atol=1e-6)
    assert len(jax.tree.leaves(ta)) == 2
    np.testing.assert_allclose(ta[3].pos, ta.pos[3])
    with pytest.raises(dataclasses_error()):
        ta.pos = jnp.zeros(3)  # type: ignore[misc]


def dataclasses_error() -> type[Exception]:
    import dataclasses

    return dataclasses.FrozenInstanceError


def test_motion_cross_products_match_matrix_forms() -> None:
    m = bm.Motion(ang=_rand_vec(4), vel=_rand_vec(5))
    n = bm.Motion(ang=_rand_vec(6), vel=_rand_vec(7))
    f = bm.Force(ang=_rand_vec(8), vel=_rand_vec(9))
    X = m.cross_matrix()
    np.testing.assert_allclose(m.cross(n).as_vector(), jnp.einsum("nij,nj->ni", X, n.as_vector()), atol=1e-5)
    # The force cross product is the negative transpose of the motion one.
    want = jnp.einsum("nji,nj->ni", -X, f.as_vector())
    np.testing.assert_allclose(m.cross_force(f).as_vector(), want, atol=1e-5)
    # Power of a force on m x n equals -(m x* f) . n (the duality that defines x*).
    np.testing.assert_allclose(m.cross(n).dot(f), -n.dot(m.cross_force(f)), atol=1e-4)


def test_six_vector_arithmetic_and_layout() -> None:
    v = _rand_vec(10, (N, 6))
    m = bm.Motion.from_vector(v)
    np.testing.assert_allclose((m + m - m).as_vector(), v, atol=1e-6)
    np.testing.assert_allclose((-m).as_vector(), -v)
    np.testing.assert_allclose((m * 2.0).as_vector(), 2 * v)
    np.testing.assert_allclose((m * jnp.arange(N, dtype=jnp.float32)).as_vector(), np.asarray(v) * np.arange(N)[:, None])
    assert bm.Force.zero((2, 3)).as_vector().shape == (2, 3, 6)
    assert m.shape == (N,)


def test_transform_of_motion_and_force(ta: bm.Transform) -> None:
    m = bm.Motion(ang=_rand_vec(11), vel=_rand_vec(12))
    f = bm.Force(ang=_rand_vec(13), vel=_rand_vec(14))
    X = ta.motion_matrix()
    np.testing.assert_allclose(ta.apply_motion(m).as_vector(), jnp.einsum("nij,nj->ni", X, m.as_vector()), atol=1e-5)
    # Power is frame independent.
    np.testing.assert_allclose(ta.apply_motion(m).dot(ta.apply_force(f)), m.dot(f), rtol=1e-4, atol=1e-4)
    # Shifting the reference point: velocity of a rigid body at another point.
    off = _rand_vec(15)
    np.testing.assert_allclose(m.shift(off).vel, m.vel + np.cross(m.ang, off), atol=1e-6)
    np.testing.assert_allclose(m.shift(off).dot(f.shift(off)), m.dot(f), rtol=1e-4, atol=1e-4)


def test_inertia_matrix_parallel_axis_and_momentum(ta: bm.Transform) -> None:
    rng = np.random.default_rng(16)
    diag = jnp.asarray(rng.uniform(0.5, 2.0, size=(N, 3)), dtype=jnp.float32)
    i = jax.vmap(jnp.diag)(diag)
    mass = jnp.asarray(rng.uniform(1.0, 3.0, size=N), dtype=jnp.float32)
    inertia = bm.Inertia(transform=ta, i=i, mass=mass)
    mat = inertia.as_matrix()
    # Parallel axis theorem for the rotational block about F's origin.
    r = np.asarray(bm.quat_to_mat(ta.rot))
    c = np.asarray(ta.pos)
    m_ = np.asarray(mass)
    i_c = r @ np.asarray(i) @ np.swapaxes(r, -1, -2)
    want = i_c + m_[:, None, None] * (np.einsum("ni,ni->n", c, c)[:, None, None] * np.eye(3) - np.einsum("ni,nj->nij", c, c))
    np.testing.assert_allclose(mat[:, :3, :3], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mat, np.swapaxes(np.asarray(mat), -1, -2), atol=1e-5)
    # mul agrees with the matrix, and kinetic energy is positive.
    mot = bm.Motion(ang=_rand_vec(17), vel=_rand_vec(18))
    np.testing.assert_allclose(inertia.mul(mot).as_vector(), jnp.einsum("nij,nj->ni", mat, mot.as_vector()), rtol=1e-4, atol=1e-4)
    assert bool(jnp.all(mot.dot(inertia.mul(mot)) > 0))
    # Kinetic energy does not depend on the frame the inertia and motion are written in.
    moved = inertia.transform_by(_rand_transform(19))
    t = _rand_transform(19)
    np.testing.assert_allclose(
        t.apply_motion(mot).dot(moved.mul(t.apply_motion(mot))), mot.dot(inertia.mul(mot)), rtol=1e-3
    )
    assert inertia.shape == (N,)
