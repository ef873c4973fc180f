"""Cholesky factor and solve: both the unrolled small-matrix path and the LAPACK path."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from brax_physics._src.dynamics import _UNROLL_MAX, factor, solve


@pytest.mark.parametrize("n", [1, 2, _UNROLL_MAX, _UNROLL_MAX + 1, 9])
def test_factor_and_solve_match_numpy(n: int) -> None:
    rng = np.random.default_rng(n)
    a = rng.normal(size=(n, n))
    spd = a @ a.T + n * np.eye(n)
    b = rng.normal(size=n)
    m, rhs = jnp.asarray(spd, jnp.float32), jnp.asarray(b, jnp.float32)
    l = jax.jit(factor)(m)
    np.testing.assert_allclose(l, np.linalg.cholesky(spd), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(jax.jit(solve)(l, rhs), np.linalg.solve(spd, b), rtol=1e-4, atol=1e-5)
    # Batched under vmap, as the pipeline runs it.
    batched = jax.vmap(lambda x, y: solve(factor(x), y))(jnp.stack([m, 2 * m]), jnp.stack([rhs, rhs]))
    np.testing.assert_allclose(batched[1], np.linalg.solve(2 * spd, b), rtol=1e-4, atol=1e-5)


def test_unrolled_solve_gradient_matches_finite_differences() -> None:
    m = jnp.asarray([[2.0, 0.3], [0.3, 1.5]])
    b = jnp.asarray([0.7, -0.2])
    g = jax.grad(lambda s: jnp.sum(solve(factor(m * s), b) ** 2))(jnp.float32(1.0))
    eps = 1e-3
    fd = (jnp.sum(solve(factor(m * (1 + eps)), b) ** 2) - jnp.sum(solve(factor(m * (1 - eps)), b) ** 2)) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-2)
