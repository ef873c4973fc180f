"""Symmetric positive definite factors and solves, the precision constant and MINVAL.

The solves are `lax.custom_linear_solve`s, so their derivatives are implicit (the JVP solves again
with the same factor, reverse mode transposes the solve) and flow through the matrix-vector
product with `a`, never through the factorization, whose output is not differentiable on its own
(`cholesky` stops gradients). How a factor or solve is computed on each platform and batch size
(LAPACK, unrolled columns, written-out forms) is `lowering.factor`'s, by the `Lowering` settings.
"""

from __future__ import annotations

import functools
from typing import Final

import jax
import jax.numpy as jnp

from brax_physics._src.lowering import factor, settings
from brax_physics._src.lowering.settings import Lowering

_HI: Final = jax.lax.Precision.HIGHEST

MINVAL: Final = 1e-15
"""MuJoCo's mjMINVAL: the smallest value treated as nonzero (weights, widths, regularizers)."""

def diagonal(m: jax.Array) -> jax.Array:
    """(..., n) diagonal of (..., n, n) `m`, as a strided slice of the flattened matrix.

    `jnp.diagonal` selects with an (n, n) mask built from iotas; XLA hoists such a loop-invariant
    mask out of the simulation loop, where it stays allocated for the whole rollout.
    """
    n = m.shape[-1]
    return m.reshape(*m.shape[:-2], n * n)[..., ::n + 1]


def add_diagonal(m: jax.Array, d: jax.Array, *, batch_last: bool = False) -> jax.Array:
    """(..., n, n) `m` + diag(`d`) for `d` (..., n) (same leading axes), without an (n, n) diagonal
    matrix or mask; with `batch_last`, `m` (n, n, ...) and `d` (n, ...) carry their batch axes last.

    `d` is spread over the flattened matrix by an interior pad (n zeros between entries), which
    fuses into the addition; `jnp.diag(d)` of a loop-invariant `d` became a matrix XLA hoisted
    out of the simulation loop and kept allocated throughout.
    """
    n = m.shape[0] if batch_last else m.shape[-1]
    if n == 0:
        return m
    zero = jnp.zeros((), d.dtype)
    if batch_last:
        spread = jax.lax.pad(d, zero, [(0, 0, n)] + [(0, 0, 0)] * (d.ndim - 1))  # n + (n - 1) n = n²
        return m + spread.reshape(n, n, *d.shape[1:])
    spread = jax.lax.pad(d, zero, [(0, 0, 0)] * (d.ndim - 1) + [(0, 0, n)])
    return m + spread.reshape(*d.shape[:-1], n, n)


def _matvec(a: jax.Array, x: jax.Array) -> jax.Array:
    return jnp.matmul(a, x, precision=_HI)


def spd_solve(a: jax.Array, b: jax.Array, lowering: Lowering | None = None) -> jax.Array:
    """(n,) solution x of a x = b for symmetric positive definite a (n, n) and b (n,); differentiable.
    `lowering`: the settings of its forms (None: those in effect, `settings.current`)."""
    solve = factor.spd_solve_fn(lowering or settings.current())
    out: jax.Array = jax.lax.custom_linear_solve(functools.partial(_matvec, a), b,
                                                 lambda _, r: solve(a, r), symmetric=True)
    return out


def cholesky(a: jax.Array, lowering: Lowering | None = None) -> jax.Array:
    """(n, n) lower Cholesky factor of symmetric positive definite a (n, n) for `cho_solve`; its strict
    upper triangle is unspecified (`jnp.tril` it to read the factor as a matrix); carries no gradient."""
    low: jax.Array = factor.cholesky_fn(lowering or settings.current())(jax.lax.stop_gradient(a))
    return low


def cho_solve(a: jax.Array, low: jax.Array, b: jax.Array, lowering: Lowering | None = None) -> jax.Array:
    """(n,) solution x of a x = b given a's factor `low` from `cholesky`; differentiable in a and b."""
    solve = factor.cho_solve_fn(lowering or settings.current())
    out: jax.Array = jax.lax.custom_linear_solve(functools.partial(_matvec, a), b,
                                                 lambda _, r: solve(low, r), symmetric=True)
    return out
