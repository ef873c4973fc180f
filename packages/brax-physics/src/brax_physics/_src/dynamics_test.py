"""Cholesky factor and solve of the mass matrix: the small-matrix column path and the LAPACK path."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from brax_physics._src.dynamics import factor, solve
from brax_physics._src.lowering.settings import DEFAULT

SMALL_N = DEFAULT.small_n


@pytest.mark.parametrize("n", [1, 2, SMALL_N, SMALL_N + 1, 9])
def test_factor_and_solve_match_numpy(n: int) -> None:
    rng = np.random.default_rng(n)
    a = rng.normal(size=(n, n))
    spd = a @ a.T + n * np.eye(n)
    b = rng.normal(size=n)
    m, rhs = jnp.asarray(spd, jnp.float32), jnp.asarray(b, jnp.float32)
    l = jax.jit(factor)(m)
    np.testing.assert_allclose(np.tril(l), np.linalg.cholesky(spd), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(jax.jit(solve)(m, l, rhs), np.linalg.solve(spd, b), rtol=1e-4, atol=1e-5)
    # Batched under vmap, as the pipeline runs it.
    batched = jax.vmap(lambda x, y: solve(x, factor(x), y))(jnp.stack([m, 2 * m]), jnp.stack([rhs, rhs]))
    np.testing.assert_allclose(batched[1], np.linalg.solve(2 * spd, b), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("n", [2, 7])
def test_solve_gradient_matches_finite_differences(n: int) -> None:
    """Gradients reach M through the solve (the factor itself carries none)."""
    rng = np.random.default_rng(n)
    a = rng.normal(size=(n, n))
    m = jnp.asarray(a @ a.T + n * np.eye(n), jnp.float32)
    b = jnp.asarray(rng.normal(size=n), jnp.float32)

    def loss(s: jax.Array) -> jax.Array:
        return jnp.sum(solve(m * s, factor(m * s), b) ** 2)

    eps = 1e-3
    fd = (loss(jnp.float32(1 + eps)) - loss(jnp.float32(1 - eps))) / (2 * eps)
    np.testing.assert_allclose(jax.grad(loss)(jnp.float32(1.0)), fd, rtol=1e-2)
    assert float(jnp.abs(jax.grad(lambda s: jnp.sum(factor(m * s)))(jnp.float32(1.0)))) == 0.0
