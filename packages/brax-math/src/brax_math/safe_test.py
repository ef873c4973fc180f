"""Safe numerics: finite values and correct gradients, especially at zero."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.test_util import check_grads

import brax_math as bm


def test_safe_norm_values_and_zero_gradient() -> None:
    x = jnp.asarray([[3.0, 4.0, 0.0], [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(bm.safe_norm(x), [5.0, 0.0])
    assert bm.safe_norm(x, keepdims=True).shape == (2, 1)
    g = jax.grad(lambda v: bm.safe_norm(v))(jnp.zeros(3))
    np.testing.assert_array_equal(g, np.zeros(3))
    check_grads(bm.safe_norm, (x[0],), order=2, atol=1e-2, rtol=1e-2, eps=1e-3)


def test_normalize() -> None:
    x = jnp.asarray([[3.0, 4.0, 0.0], [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(bm.normalize(x), [[0.6, 0.8, 0.0], [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(bm.normalize(x.T, axis=0), [[0.6, 0.0], [0.8, 0.0], [0.0, 0.0]])
    g = jax.jacobian(bm.normalize)(jnp.zeros(3))
    assert bool(jnp.all(jnp.isfinite(g)))
    check_grads(bm.normalize, (jnp.asarray([0.3, -1.2, 2.0]),), order=1, atol=1e-2, rtol=1e-2, eps=1e-3)


def test_safe_div() -> None:
    num = jnp.asarray([1.0, 2.0, 3.0])
    den = jnp.asarray([2.0, 0.0, -1.0])
    np.testing.assert_allclose(bm.safe_div(num, den), [0.5, 0.0, -3.0])
    np.testing.assert_allclose(bm.safe_div(num, den, fallback=7.0), [0.5, 7.0, -3.0])
    g = jax.grad(lambda d: jnp.sum(bm.safe_div(num, d)))(den)
    np.testing.assert_allclose(g, [-0.25, 0.0, -3.0])


def test_safe_arc_functions() -> None:
    x = jnp.asarray([-1.5, -1.0, -0.3, 0.0, 0.7, 1.0, 1.0000001])
    np.testing.assert_allclose(bm.safe_arccos(x), np.arccos(np.clip(np.asarray(x), -1, 1)), atol=1e-6)
    np.testing.assert_allclose(bm.safe_arcsin(x), np.arcsin(np.clip(np.asarray(x), -1, 1)), atol=1e-6)
    for f in (bm.safe_arccos, bm.safe_arcsin):
        g = jax.vmap(jax.grad(f))(x)
        assert bool(jnp.all(jnp.isfinite(g)))
        check_grads(f, (jnp.asarray(0.4),), order=1, atol=1e-2, rtol=1e-2, eps=1e-3)
    # Interior derivative is the analytic one.
    np.testing.assert_allclose(jax.grad(bm.safe_arccos)(0.6), -1.0 / np.sqrt(1 - 0.36), rtol=1e-5)
    np.testing.assert_allclose(jax.grad(bm.safe_arcsin)(0.6), 1.0 / np.sqrt(1 - 0.36), rtol=1e-5)


def test_jit_and_vmap() -> None:
    x = jnp.asarray(np.random.default_rng(0).normal(size=(5, 3)), dtype=jnp.float32)
    xs = np.asarray(x)
    np.testing.assert_allclose(jax.jit(jax.vmap(bm.safe_norm))(x), np.linalg.norm(xs, axis=-1), rtol=1e-6)
    np.testing.assert_allclose(jax.jit(jax.vmap(bm.normalize))(x), bm.normalize(x), rtol=1e-6)
    arccos = jax.jit(jax.vmap(bm.safe_arccos))(x[:, 0] / 10)
    np.testing.assert_allclose(arccos, np.arccos(xs[:, 0] / 10), rtol=1e-5)
    div = jax.jit(jax.vmap(bm.safe_div))(x[:, 0], x[:, 1])
    np.testing.assert_allclose(div, xs[:, 0] / xs[:, 1], rtol=1e-5)


def test_all_finite_checks_inexact_leaves_only() -> None:
    """NaN or inf in any float or complex leaf makes it False; integer and bool leaves are ignored."""
    ok = {"a": jnp.ones(3), "b": (jnp.zeros((2, 2)), jnp.arange(3)), "c": jnp.asarray(True)}
    assert bool(bm.all_finite(ok))
    assert bool(bm.all_finite({}))
    assert not bool(bm.all_finite({**ok, "a": jnp.asarray([1.0, jnp.nan, 0.0])}))
    assert not bool(bm.all_finite((jnp.asarray([jnp.inf]),)))
    assert not bool(bm.all_finite(jnp.asarray([1 + 0j, complex(0, float("inf"))])))
    assert bool(jax.jit(bm.all_finite)(ok))
