"""Small symmetric positive definite solves, lowered by batch size (the Newton solver's hot path).

`spd_solve(a, b)` solves a x = b by Cholesky; `cho_solve(l, b)` solves with a given lower factor
(the factor itself stays LAPACK's: written out, storing all its entries costs more than the call).
Unbatched both call LAPACK. Under `vmap` (many
problems at once, as in a batch of simulated envs) and for small n it instead runs a Cholesky
and two substitutions written out entry by entry, each entry a vector over the batch with the
batch as the minor axis: every operation is then one SIMD loop over the batch and the whole solve
fuses into a few kernels. XLA's CPU lowering of a batched LAPACK factor and solve calls LAPACK
once per matrix, whose fixed cost dominates at n ~ 14 (ant, 1024 envs: 0.29 ms vs 0.76 ms per
factor + solve). The written-out form has ~n³/6 terms, so it is used only up to `UNROLL_MAX_N`
(compile time grows with n³).

Both take their tangents from LAPACK's rules, so gradients are exactly those of `jax.scipy.linalg`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
from jax import custom_batching

# Largest n written out entry by entry (about n³/6 multiply-adds traced: ~460 at 14, ~1400 at 20).
UNROLL_MAX_N = 16
# Smallest batch for the written-out form: below it LAPACK's per-matrix cost is small anyway.
UNROLL_MIN_BATCH = 8


def _lapack_solve(a: jax.Array, b: jax.Array) -> jax.Array:
    """Solve a x = b for a (n, n) and b (n,) by a LAPACK Cholesky factor and two triangular solves."""
    return jsl.cho_solve((jsl.cholesky(a, lower=True), True), b)


def _unrolled_factor(a: jax.Array) -> list[list[jax.Array]]:
    """Lower Cholesky factor of a (n, n, B), batch last, as rows of entries: out[i][k] = L[i, k], k <= i.

    Left-looking, entry by entry; a matrix that is not positive definite gets NaN entries, as
    from LAPACK's factor.
    """
    n = a.shape[0]
    low: list[list[jax.Array]] = [[] for _ in range(n)]
    for j in range(n):
        s = a[j, j]
        for k in range(j):
            s = s - low[j][k] * low[j][k]
        d = jnp.sqrt(s)
        low[j].append(d)
        inv = 1.0 / d
        for i in range(j + 1, n):
            s = a[i, j]
            for k in range(j):
                s = s - low[i][k] * low[j][k]
            low[i].append(s * inv)
    return low


def _unrolled_substitute(low: list[list[jax.Array]], b: jax.Array) -> jax.Array:
    """Solve L Lᵀ x = b for b (n, B), batch last, given the entries of L; returns (n, B)."""
    n = len(low)
    inv_diag = [1.0 / low[i][i] for i in range(n)]
    y: list[jax.Array] = []
    for i in range(n):  # L y = b
        s = b[i]
        for k in range(i):
            s = s - low[i][k] * y[k]
        y.append(s * inv_diag[i])
    x: list[jax.Array] = [y[0]] * n
    for i in reversed(range(n)):  # Lᵀ x = y
        s = y[i]
        for k in range(i + 1, n):
            s = s - low[k][i] * x[k]
        x[i] = s * inv_diag[i]
    return jnp.stack(x)


def _entries(l: jax.Array) -> list[list[jax.Array]]:
    """Rows of entries of a lower factor l (n, n, B)."""
    return [[l[i, k] for k in range(i + 1)] for i in range(l.shape[0])]


def _batched_operands(axis_size: int, in_batched: list[bool], *xs: jax.Array) -> list[jax.Array]:
    """The operands of a vmap rule, each with the batch axis in front."""
    return [x if b else jnp.broadcast_to(x, (axis_size, *x.shape)) for x, b in zip(xs, in_batched, strict=True)]


def _written_out(axis_size: int, n: int, ndim: int) -> bool:
    """Whether a batched problem of size n (one batch axis: `ndim` 3) takes the written-out form."""
    return ndim == 3 and n <= UNROLL_MAX_N and axis_size >= UNROLL_MIN_BATCH


def _lapack_cho_solve(l: jax.Array, b: jax.Array) -> jax.Array:
    """Solve L Lᵀ x = b for l (..., n, n) and b (..., n) by two LAPACK triangular solves."""
    return jsl.cho_solve((l, True), b[..., None])[..., 0]


@custom_batching.custom_vmap
def _spd_solve_primal(a: jax.Array, b: jax.Array) -> jax.Array:
    return _lapack_solve(a, b)


@_spd_solve_primal.def_vmap
def _spd_solve_vmap(
    axis_size: int, in_batched: list[bool], a: jax.Array, b: jax.Array
) -> tuple[jax.Array, bool]:
    """Batched rule: the written-out batch-last solve for small n and large batches, else LAPACK."""
    a, b = _batched_operands(axis_size, in_batched, a, b)
    if not _written_out(axis_size, a.shape[-1], a.ndim):
        return jsl.cho_solve((jsl.cholesky(a, lower=True), True), b[..., None])[..., 0], True
    a_t = jnp.moveaxis(a, 0, -1)
    return jnp.moveaxis(_unrolled_substitute(_unrolled_factor(a_t), jnp.moveaxis(b, 0, -1)), -1, 0), True


@jax.custom_jvp
def spd_solve(a: jax.Array, b: jax.Array) -> jax.Array:
    """(n,) solution x of a x = b for symmetric positive definite a (n, n) and b (n,); differentiable."""
    out: jax.Array = _spd_solve_primal(a, b)
    return out


@spd_solve.defjvp
def _spd_solve_jvp(
    primals: tuple[jax.Array, jax.Array], tangents: tuple[jax.Array, jax.Array]
) -> tuple[jax.Array, jax.Array]:
    """Tangent from LAPACK's Cholesky and triangular-solve rules (linear, so reverse mode transposes it)."""
    _, dx = jax.jvp(_lapack_solve, primals, tangents)
    return spd_solve(*primals), dx


@custom_batching.custom_vmap
def _cho_solve_primal(l: jax.Array, b: jax.Array) -> jax.Array:
    return _lapack_cho_solve(l, b)


@_cho_solve_primal.def_vmap
def _cho_solve_vmap(
    axis_size: int, in_batched: list[bool], l: jax.Array, b: jax.Array
) -> tuple[jax.Array, bool]:
    l, b = _batched_operands(axis_size, in_batched, l, b)
    if not _written_out(axis_size, l.shape[-1], l.ndim):
        return _lapack_cho_solve(l, b), True
    x = _unrolled_substitute(_entries(jnp.moveaxis(l, 0, -1)), jnp.moveaxis(b, 0, -1))
    return jnp.moveaxis(x, -1, 0), True


@jax.custom_jvp
def cho_solve(l: jax.Array, b: jax.Array) -> jax.Array:
    """(n,) solution of L Lᵀ x = b given the lower factor l (n, n) and b (n,); differentiable."""
    out: jax.Array = _cho_solve_primal(l, b)
    return out


@cho_solve.defjvp
def _cho_solve_jvp(
    primals: tuple[jax.Array, jax.Array], tangents: tuple[jax.Array, jax.Array]
) -> tuple[jax.Array, jax.Array]:
    """Tangent from LAPACK's triangular-solve rules (linear in the tangents, transposable)."""
    _, dx = jax.jvp(_lapack_cho_solve, primals, tangents)
    return cho_solve(*primals), dx
