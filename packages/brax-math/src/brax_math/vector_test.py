"""Cross products: NumPy's values, broadcasting, gradients and the bad-shape error."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import brax_math as bm


def test_cross_matches_numpy_and_jnp_bit_for_bit() -> None:
    rng = np.random.default_rng(0)
    a = rng.normal(size=(5, 7, 3)).astype(np.float32)
    b = rng.normal(size=(5, 7, 3)).astype(np.float32)
    got = np.asarray(bm.cross(a, b))
    want = np.cross(a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # op by op, the same products and differences as jnp.cross
    np.testing.assert_array_equal(got, np.asarray(jnp.cross(a, b)))


def test_cross_broadcasts_leading_axes() -> None:
    rng = np.random.default_rng(1)
    a = rng.normal(size=(4, 1, 3)).astype(np.float32)
    b = rng.normal(size=(1, 6, 3)).astype(np.float32)
    got = bm.cross(a, b)
    assert got.shape == (4, 6, 3)
    np.testing.assert_allclose(got, np.cross(a, b), rtol=1e-5, atol=1e-6)
    single = bm.cross(a[0, 0], b[0])  # one vector against a batch, under rank promotion "raise"
    with jax.numpy_rank_promotion("raise"):
        assert bm.cross(a[0, 0], b[0]).shape == (6, 3)
    np.testing.assert_allclose(single, np.cross(a[0, 0], b[0]), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(bm.cross(np.array([1.0, 0, 0]), np.array([0.0, 1, 0])), [0.0, 0.0, 1.0])


def test_cross_under_jit_vmap_and_grad() -> None:
    rng = np.random.default_rng(2)
    a = jnp.asarray(rng.normal(size=(8, 3)), jnp.float32)
    b = jnp.asarray(rng.normal(size=(8, 3)), jnp.float32)
    np.testing.assert_allclose(jax.jit(jax.vmap(bm.cross))(a, b), np.cross(a, b), rtol=1e-5, atol=1e-6)
    # d(a x b)/da is -[b]x: the gradient of sum(c * (a x b)) in a is b x c
    c = jnp.asarray(rng.normal(size=(3,)), jnp.float32)
    g = jax.grad(lambda x: jnp.sum(c * bm.cross(x, b[0])))(a[0])
    np.testing.assert_allclose(g, np.cross(b[0], c), rtol=1e-5, atol=1e-6)
    check_grads(bm.cross, (a[0], b[0]), order=2, atol=1e-2, rtol=1e-2, eps=1e-3)


def test_cross_rejects_non_3_vectors_naming_the_shapes() -> None:
    msg = r"cross: operands must be \(\.\.\., 3\) vectors, got shapes \(2,\) and \(3,\)"
    with pytest.raises(ValueError, match=msg):
        bm.cross(jnp.zeros(2), jnp.zeros(3))
