"""Quaternion routines against scipy's Rotation (scalar-last, converted to our w-first order)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads
from scipy.spatial.transform import Rotation

import brax_math as bm

N = 16
ATOL = 2e-6


def _wxyz(r: Rotation) -> np.ndarray:
    return np.roll(r.as_quat(), 1, axis=-1)


def _same_rotation(q1: Any, q2: Any) -> None:
    """Quaternions equal up to the global sign (q and -q are the same rotation)."""
    dots = np.abs(np.sum(np.asarray(q1) * np.asarray(q2), axis=-1))
    np.testing.assert_allclose(dots, 1.0, atol=ATOL)


@pytest.fixture(scope="module")
def rots() -> Rotation:
    return Rotation.random(N, random_state=7)


@pytest.fixture(scope="module", params=[1.0, -1.0], ids=["w+", "w-"])
def quats(request: pytest.FixtureRequest, rots: Rotation) -> jax.Array:
    """Both signs of every quaternion: results must not depend on the representative."""
    return jnp.asarray(request.param * _wxyz(rots), dtype=jnp.float32)


@pytest.fixture(scope="module")
def vecs() -> jax.Array:
    return jnp.asarray(np.random.default_rng(3).normal(size=(N, 3)), dtype=jnp.float32)


def test_quat_mul_matches_scipy_composition(rots: Rotation, quats: jax.Array) -> None:
    other = Rotation.random(N, random_state=8)
    got = bm.quat_mul(quats, jnp.asarray(_wxyz(other), dtype=jnp.float32))
    _same_rotation(got, _wxyz(rots * other))


def test_rotate_and_inverse(rots: Rotation, quats: jax.Array, vecs: jax.Array) -> None:
    np.testing.assert_allclose(bm.rotate(vecs, quats), rots.apply(np.asarray(vecs)), atol=1e-5)
    np.testing.assert_allclose(
        bm.inv_rotate(vecs, quats), rots.apply(np.asarray(vecs), inverse=True), atol=1e-5
    )


def test_mixed_dtypes_promote(rots: Rotation, quats: jax.Array, vecs: jax.Array) -> None:
    """Operands of two float dtypes take jax.numpy's promotion (the same-dtype case runs on lax's
    operations): a float16 operand gives float32 results, the float32 answers to float16 rounding."""
    other = jnp.asarray(_wxyz(Rotation.random(N, random_state=8)), dtype=jnp.float16)
    v16 = vecs.astype(jnp.float16)
    with jax.numpy_dtype_promotion("standard"):  # the suite may run under strict promotion
        got, rotated = bm.quat_mul(quats, other), bm.rotate(v16, quats)
    assert got.dtype == rotated.dtype == jnp.float32
    np.testing.assert_allclose(got, bm.quat_mul(quats, other.astype(jnp.float32)), atol=2e-3)
    np.testing.assert_allclose(rotated, bm.rotate(v16.astype(jnp.float32), quats), atol=1e-5)


def test_rotate_single_quat_over_batch_of_vectors(rots: Rotation, vecs: jax.Array) -> None:
    q = jnp.asarray(_wxyz(rots[0]), dtype=jnp.float32)
    np.testing.assert_allclose(bm.rotate(vecs, q), rots[0].apply(np.asarray(vecs)), atol=1e-5)


def test_inverse_and_conjugate(rots: Rotation, quats: jax.Array) -> None:
    _same_rotation(bm.quat_inv(quats), _wxyz(rots.inv()))
    _same_rotation(bm.quat_conj(quats), _wxyz(rots.inv()))
    # quat_inv also inverts non-unit quaternions.
    scaled = 3.0 * quats
    np.testing.assert_allclose(
        bm.quat_mul(scaled, bm.quat_inv(scaled)), np.tile([1.0, 0, 0, 0], (N, 1)), atol=ATOL
    )


def test_matrix_round_trip(rots: Rotation, quats: jax.Array) -> None:
    mats = bm.quat_to_mat(quats)
    np.testing.assert_allclose(mats, rots.as_matrix(), atol=ATOL)
    back = bm.mat_to_quat(jnp.asarray(rots.as_matrix(), dtype=jnp.float32))
    _same_rotation(back, _wxyz(rots))
    assert bool(jnp.all(back[:, 0] >= 0))


def test_mat_to_quat_every_pivot_branch() -> None:
    # 180-degree turns about x, y, z and the identity exercise each of Shepperd's four formulas.
    rots = Rotation.from_rotvec(np.array([[np.pi, 0, 0], [0, np.pi, 0], [0, 0, np.pi], [0, 0, 0]]))
    got = bm.mat_to_quat(jnp.asarray(rots.as_matrix(), dtype=jnp.float32))
    _same_rotation(got, _wxyz(rots))


def test_axis_angle(rots: Rotation, quats: jax.Array) -> None:
    rv = rots.as_rotvec()
    angle = np.linalg.norm(rv, axis=-1)
    axis = rv / angle[:, None]
    # Unnormalised axes are normalised internally.
    got = bm.axis_angle_to_quat(jnp.asarray(5.0 * axis, dtype=jnp.float32),
                                jnp.asarray(angle, dtype=jnp.float32))
    _same_rotation(got, _wxyz(rots))
    ax, an = bm.quat_to_axis_angle(quats)
    np.testing.assert_allclose(an, angle, atol=1e-5)
    np.testing.assert_allclose(ax, axis, atol=1e-5)


def test_exp_log(rots: Rotation, quats: jax.Array) -> None:
    rv = jnp.asarray(rots.as_rotvec(), dtype=jnp.float32)
    _same_rotation(bm.quat_exp(rv), _wxyz(rots))
    np.testing.assert_allclose(bm.quat_log(quats), rots.as_rotvec(), atol=1e-5)
    np.testing.assert_allclose(bm.quat_exp(jnp.zeros(3)), [1.0, 0, 0, 0])
    np.testing.assert_allclose(bm.quat_log(bm.quat_identity()), [0.0, 0, 0])


@pytest.mark.parametrize("seq", ["xyz", "zyx", "XYZ", "ZYX", "zxz", "YXY"])
def test_euler_matches_scipy(rots: Rotation, quats: jax.Array, seq: str) -> None:
    angles = rots.as_euler(seq)
    np.testing.assert_allclose(bm.quat_to_euler(quats, seq), angles, atol=1e-5)
    _same_rotation(bm.euler_to_quat(jnp.asarray(angles, dtype=jnp.float32), seq), _wxyz(rots))


def test_euler_bad_sequence_names_it() -> None:
    with pytest.raises(ValueError, match="'xYz'"):
        bm.euler_to_quat(jnp.zeros(3), "xYz")
    with pytest.raises(ValueError, match="'xxz'"):
        bm.quat_to_euler(bm.quat_identity(), "xxz")


def test_relative_quat(rots: Rotation, quats: jax.Array) -> None:
    other = Rotation.random(N, random_state=9)
    rel = bm.relative_quat(quats, jnp.asarray(_wxyz(other), dtype=jnp.float32))
    _same_rotation(rel, _wxyz(rots.inv() * other))


def test_normalize_and_canonical(quats: jax.Array) -> None:
    np.testing.assert_allclose(bm.quat_normalize(2.5 * quats), quats, atol=ATOL)
    canon = bm.quat_canonical(quats)
    assert bool(jnp.all(canon[:, 0] >= 0))
    _same_rotation(canon, quats)


def test_integrate_matches_scipy_right_multiplication(rots: Rotation, quats: jax.Array,
                                                     vecs: jax.Array) -> None:
    dt = 0.01
    got = bm.quat_integrate(quats, vecs, dt)
    want = rots * Rotation.from_rotvec(np.asarray(vecs) * dt)
    _same_rotation(got, _wxyz(want))
    np.testing.assert_allclose(jnp.linalg.norm(got, axis=-1), 1.0, atol=ATOL)


ROUTINES: list[tuple[str, Callable[[jax.Array, jax.Array], jax.Array]]] = [
    ("quat_mul", lambda q, v: bm.quat_mul(q, bm.quat_exp(v))),
    ("rotate", lambda q, v: bm.rotate(v, q)),
    ("inv_rotate", lambda q, v: bm.inv_rotate(v, q)),
    ("quat_to_mat", lambda q, v: bm.quat_to_mat(q)),
    ("mat_to_quat", lambda q, v: bm.mat_to_quat(bm.quat_to_mat(q))),
    ("quat_log", lambda q, v: bm.quat_log(q)),
    ("quat_integrate", lambda q, v: bm.quat_integrate(q, v, 0.01)),
    ("euler", lambda q, v: bm.euler_to_quat(bm.quat_to_euler(q, "xyz"), "xyz")),
    ("relative_quat", lambda q, v: bm.relative_quat(q, bm.quat_exp(v))),
]


@pytest.mark.parametrize(("name", "fn"), ROUTINES, ids=[r[0] for r in ROUTINES])
def test_jit_and_vmap_agree_with_batched(
    name: str, fn: Callable[[jax.Array, jax.Array], jax.Array], quats: jax.Array, vecs: jax.Array
) -> None:
    batched = fn(quats, vecs)
    mapped = jax.jit(jax.vmap(fn))(quats, vecs)
    np.testing.assert_allclose(mapped, batched, atol=1e-5, err_msg=name)


def test_gradients_match_finite_differences(quats: jax.Array, vecs: jax.Array) -> None:
    q, v = quats[0].astype(jnp.float32), vecs[0]
    for f in (
        lambda a: bm.rotate(v, bm.quat_normalize(a)),
        lambda a: bm.quat_to_mat(bm.quat_normalize(a)),
        lambda a: bm.quat_log(bm.quat_normalize(a)),
    ):
        check_grads(f, (q,), order=1, modes=("fwd", "rev"), atol=2e-2, rtol=2e-2, eps=1e-3)
    check_grads(lambda w: bm.quat_integrate(q, w, 0.1), (v,), order=1, atol=2e-2, rtol=2e-2, eps=1e-3)


def test_gradients_finite_at_zero_rotation() -> None:
    g = jax.jacobian(bm.quat_exp)(jnp.zeros(3))
    np.testing.assert_allclose(g, np.vstack([np.zeros((1, 3)), 0.5 * np.eye(3)]), atol=1e-7)
    g_log = jax.jacobian(bm.quat_log)(bm.quat_identity())
    assert bool(jnp.all(jnp.isfinite(g_log)))
    np.testing.assert_allclose(g_log[:, 1:], 2.0 * np.eye(3), atol=1e-6)
