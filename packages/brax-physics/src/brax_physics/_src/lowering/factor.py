"""The platform forms of `linalg`'s factors and solves, and the `custom_vmap` rules that pick them.

Unbatched they call LAPACK, or for n <= `small_n` a few plain array ops (which beat a library
call's fixed cost). Under `vmap`, for n <= `unroll_max_n` and batches of `unroll_min_batch` or
more, the solves run as whole-array operations on (n, n, batch) arrays with the batch as the minor
axis, each one SIMD loop over the batch that fuses with its neighbours, where a batched LAPACK
call runs matrix by matrix: `spd_solve` factors by a right-looking Cholesky unrolled over columns,
and it and `cho_solve` substitute row by row in a `fori_loop`. `cholesky` factors left-looking, one
kernel per column (`_factor_left`), there and for n up to `factor_unroll_max_n` from
`factor_unroll_min_batch` systems on. Above `unroll_max_n`, from `substitute_min_batch` on, the
substitution is the same batch-last loop on the transposed factor (LAPACK's where LAPACK factored):
LAPACK's triangular solves also go matrix by matrix.

Batched LAPACK calls never use XLA's thread pool: jaxlib's CPU kernels split a batch whose work
reaches `POOL_MIN_WORK` over the intra-op pool and block their own pool thread until the pieces
finish; once as many such calls run at once as the pool has threads, every thread waits and the
process hangs for good. So a batched call here takes at most as many systems as stay under that
work, one call per chunk when the batch is larger, each on the thread that calls it. A vmap
around another vmap batches a chunk's call again, past the limit; the pipeline vmaps once. The
split is the CPU's alone (`platforms.choose`): lowered for a GPU or TPU, each call takes the
whole batch.
So do the column and substitution forms (`loop_platforms`): on a GPU each trip of their loop over
rows is a round of kernel launches, where cuSOLVER's batched factor and cuBLAS's batched triangular
solves are a few kernels each. For n <= `graph_max_n` a GPU (`graph_platforms`) takes neither: the
left-looking factor and the substitution written out without a loop, since the host launches each
library call between the CUDA graphs that hold the rest of the step. Where `spd_solve` calls the
library it factors the system with its right side appended (`augment`): the factor's last row is
the forward substitution, and one triangular solve is left.

Every function takes the settings `s` first; the rules bind them when they are traced (a rule or a
platform form may run after the pipeline's entry point has returned).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Final

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jax import custom_batching, lax

from brax_physics._src import platforms
from brax_physics._src.lowering.settings import Lowering

POOL_MIN_WORK: Final = 200_000
"""jaxlib's kMinWorkPerTask: a batched LAPACK call whose batch times its flop estimate (n³/3 for a
factor, n² for a triangular solve) is below it runs on the calling thread (a fact of jaxlib, not a
choice: above it calls can deadlock the pool)."""


@functools.cache
def _bind(fn: Callable[..., jax.Array], s: Lowering) -> Callable[..., jax.Array]:
    """`fn` with its settings bound, one object per (fn, s), so that a form is the same each trace."""
    return functools.partial(fn, s)


def _factor_columns(a: jax.Array) -> jax.Array:
    """(n, n, B) lower Cholesky factor of a (n, n, B), batch last.

    Right-looking, unrolled: peel a column, update the trailing block (~4n operations; a
    fixed-shape loop over columns was slower). A matrix that is not positive definite gives
    NaN, as LAPACK's factor does.
    """
    n = a.shape[0]
    if n == 0:  # a model without degrees of freedom
        return a
    rest, cols = a, []
    for j in range(n):
        d = jnp.sqrt(rest[0, 0])
        c = rest[1:, 0] / d[None]
        cols.append(jnp.pad(jnp.concatenate([d[None], c]), ((j, 0), (0, 0))))
        rest = rest[1:, 1:] - c[:, None, :] * c[None, :, :]
    return jnp.stack(cols, axis=1)


def _factor_left(a: jax.Array) -> jax.Array:
    """(n, n, B) lower Cholesky factor of symmetric a (n, n, B), batch last, read from a's upper
    triangle (as `_lapack_factor` reads it); zeros above the diagonal.

    Left-looking, unrolled: column j is a's row j from the diagonal on, less its products with the
    columns before it, each column one kernel (an optimization barrier) that reads the earlier
    columns' buffers. Without the barriers XLA fuses every column into its consumers and computes
    it again in each; the right-looking `_factor_columns` copies a shrinking trailing block per
    column. Subtractions in column order, then one division: the operations of `_factor_columns`.
    A matrix that is not positive definite gives NaN, as LAPACK's factor does.
    """
    # Written in lax primitives: its ~n³/6 operations are traced once per program, and jax.numpy's
    # indexing and broadcasting cost several times more Python per operation.
    n = a.shape[0]
    rows = lax.slice_in_dim
    cols: list[jax.Array] = []  # cols[k]: (n - k, *B), rows k.. of column k
    for j in range(n):
        s = lax.squeeze(rows(rows(a, j, j + 1), j, n, axis=1), (0,))
        dims = tuple(range(s.ndim))
        for k in range(j):
            c = cols[k]
            s = lax.sub(s, lax.mul(rows(c, j - k, n - k),
                                   lax.broadcast_in_dim(rows(c, j - k, j - k + 1), s.shape, dims)))
        d = lax.sqrt(rows(s, 0, 1))
        below = rows(s, 1, n - j)
        col = lax.concatenate([d, lax.div(below, lax.broadcast_in_dim(d, below.shape, dims))], 0)
        cols.append(lax.optimization_barrier(col))  # type: ignore[no-untyped-call]  # untyped in jax
    return jnp.stack([jnp.pad(c, ((j, 0), (0, 0))) for j, c in enumerate(cols)], axis=1)


def _factor_left_front(a: jax.Array) -> jax.Array:
    """(B, n, n) `_factor_left` factors of (B, n, n) matrices, batch first outside."""
    return jnp.moveaxis(_factor_left(jnp.moveaxis(a, 0, -1)), -1, 0)


def _substitute(s: Lowering, low: jax.Array, b: jax.Array, unroll: bool = False) -> jax.Array:
    """(n, B) solution of L Lᵀ x = b for L (n, n, B) lower triangular and b (n, B), batch last.

    Forward then back substitution, one row per trip of a `fori_loop` (a loop compiles faster than
    the unrolled form, and ran faster too on a CPU), or written out row by row when `unroll` (the
    same operations, no loop); systems of n <= `small_n` unrolled.
    """
    n = low.shape[0]
    if n == 0:  # a model without degrees of freedom
        return b
    if n <= s.small_n:
        return _substitute_unrolled(low, b)
    row = jnp.arange(n)[:, None]

    def at(x: jax.Array, j: jax.Array, axis: int = 0) -> jax.Array:
        # dynamic_slice, not dynamic_index_in_dim: the latter wraps negative indices, a scalar
        # kernel of its own in every trip
        return jax.lax.dynamic_slice_in_dim(x, j, 1, axis)

    # Each trip: the entry's quotient (a (1, B) kernel: XLA never fuses a divide into a consumer
    # that broadcasts it), then one elementwise update that selects the entry instead of writing
    # it with a dynamic_update_slice (a kernel of its own) and reads the right side only at the
    # element it writes, so it updates in place. Taking the quotient inside that update (n divides
    # per column, on selects) made it read r[j] while writing r: a copy of r per trip, slower.
    def forward(j: jax.Array, r: jax.Array) -> jax.Array:  # L y = b: finalize y_j, update below
        col = at(low, j, 1)[:, 0]
        y = at(r, j) / at(col, j)
        out: jax.Array = jnp.where(row == j, y, jnp.where(row > j, r - col * y, r))
        return out

    def backward(i: jax.Array, r: jax.Array) -> jax.Array:  # Lᵀ x = y from the last row up
        j = n - 1 - i
        lrow = at(low, j)[0]  # row j of L is column j of Lᵀ: update the rows above by it
        x = at(r, j) / at(lrow, j)
        out: jax.Array = jnp.where(row == j, x, jnp.where(row < j, r - lrow * x, r))
        return out

    if unroll:
        r = b
        for j in range(n):
            r = forward(jnp.int32(j), r)
        for j in range(n):
            r = backward(jnp.int32(j), r)
        return r
    y = jax.lax.fori_loop(0, n, forward, b)
    x: jax.Array = jax.lax.fori_loop(0, n, backward, y)
    return x


def _substitute_unrolled(low: jax.Array, b: jax.Array) -> jax.Array:
    """`_substitute` for small n, unrolled; the back substitution by dot products (the
    order of operations the recorded PPO digests of the inverted pendulum were computed with)."""
    n = low.shape[0]
    row = jnp.arange(n)[:, None]

    def at(x: jax.Array, j: jax.Array) -> jax.Array:
        out: jax.Array = jax.lax.dynamic_index_in_dim(x, j, keepdims=False)
        return out

    def forward(j: jax.Array, r: jax.Array) -> jax.Array:
        col = jax.lax.dynamic_index_in_dim(low, j, axis=1, keepdims=False)
        y = at(r, j) / at(col, j)
        below = jnp.where(row > j, r - col * y[None], r)
        out: jax.Array = jax.lax.dynamic_update_index_in_dim(below, y, j, 0)
        return out

    def backward(i: jax.Array, r: jax.Array) -> jax.Array:
        j = n - 1 - i
        col = jax.lax.dynamic_index_in_dim(low, j, axis=1, keepdims=False)  # row j of Lᵀ
        done = jnp.sum(jnp.where(row > j, col * r, 0.0), axis=0)
        out: jax.Array = jax.lax.dynamic_update_index_in_dim(r, (at(r, j) - done) / at(col, j), j, 0)
        return out

    y = jax.lax.fori_loop(0, n, forward, b, unroll=True)
    x: jax.Array = jax.lax.fori_loop(0, n, backward, y, unroll=True)
    return x


def batch_front(axis_size: int, in_batched: list[bool], *xs: jax.Array) -> list[jax.Array]:
    """The operands of a vmap rule, each broadcast to the batch (batch axis first)."""
    pairs = zip(xs, in_batched, strict=True)
    return [x if b else jnp.broadcast_to(x, (axis_size, *x.shape)) for x, b in pairs]


def _lapack_factor(a: jax.Array) -> jax.Array:
    """LAPACK's factor of symmetric `a`, its strict upper triangle left as LAPACK leaves it.

    Factors `a`ᵀ: LAPACK takes column-major storage, which is a row-major matrix's transpose, so
    XLA passes the buffer as it is instead of copying it to a transposed layout (and then keeping
    the mass matrix in both layouts through the solver's loop). Only the lower triangle is read,
    of `a`ᵀ here, that is `a`'s upper triangle (the Newton Hessian's two triangles may differ by
    roundoff). The primitive skips `jax.lax.linalg.cholesky`'s masking of the upper triangle:
    the triangular solves never read it, and XLA kept the mask allocated for the whole rollout.
    """
    low: jax.Array = jax.lax.linalg.cholesky_p.bind(jnp.swapaxes(a, -1, -2))
    return low


def _inline_map(fn: Callable[..., jax.Array], work: int, *xs: jax.Array) -> jax.Array:
    """vmap of a LAPACK `fn` (flop estimate `work` per system) over axis 0 of `xs`, on the CPU as
    calls small enough to run on the calling thread: one per chunk of the batch, independent of
    each other (a `lax.map` over the chunks, one at a time, ran the step slower). Other platforms
    (cuSOLVER, TPU) get the whole batch in one call, as their batched kernels want."""
    batch, chunk = xs[0].shape[0], max(1, (POOL_MIN_WORK - 1) // max(1, work))
    whole = jax.vmap(fn)
    if batch <= chunk:
        return whole(*xs)

    def chunked(*ys: jax.Array) -> jax.Array:
        return jnp.concatenate([whole(*(y[i:i + chunk] for y in ys)) for i in range(0, batch, chunk)])

    return platforms.choose(whole, {"cpu": chunked}, *xs)


def _lapack_factors(a: jax.Array) -> jax.Array:
    """(B, n, n) LAPACK factors of a (B, n, n), batch first, never on the thread pool."""
    n = a.shape[-1]
    return _inline_map(_lapack_factor, n * n * n // 3, a)


def _lapack_substitutes(low: jax.Array, b: jax.Array) -> jax.Array:
    """(B, n) LAPACK solutions given factors (B, n, n) and right sides (B, n), never on the thread pool."""
    n = low.shape[-1]
    return _inline_map(_lapack_substitute, n * n, low, b)


def _lapack_substitute(low: jax.Array, b: jax.Array) -> jax.Array:
    x: jax.Array = jsl.cho_solve((low, True), b)
    return x


def _augmented(a: jax.Array, b: jax.Array) -> jax.Array:
    """(B, n + 1, n + 1) [[a, b], [bᵀ, c]] of a (B, n, n) and b (B, n), c far above any bᵀa⁻¹b.

    Its Cholesky factor is [[L, 0], [(L⁻¹b)ᵀ, √(c − |L⁻¹b|²)]] with L a's factor: the factor's
    last row is the forward substitution, computed by the factorization itself. c only enters its
    own pivot, so L and L⁻¹b are as without it.
    """
    corner = jnp.full((*b.shape[:-1], 1, 1), np.finfo(a.dtype).max / 4, a.dtype)
    top = jnp.concatenate([a, b[..., :, None]], axis=-1)
    return jnp.concatenate([top, jnp.concatenate([b[..., None, :], corner], axis=-1)], axis=-2)


def _lapack_back(low: jax.Array, y: jax.Array) -> jax.Array:
    """(n,) solution x of Lᵀ x = y for lower triangular L (n, n): one triangular solve."""
    x: jax.Array = jax.lax.linalg.triangular_solve(low, y[:, None], left_side=True, lower=True,
                                                   transpose_a=True)
    return x[:, 0]


def _augmented_factors(a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
    """LAPACK factors L (B, n, n) of a (B, n, n) and L⁻¹b (B, n), both from one factor of
    `_augmented(a, b)`, never on the thread pool."""
    n = a.shape[-1]
    low = _lapack_factors(_augmented(a, b))
    return low[:, :n, :n], low[:, n, :n]




def _factor(s: Lowering, a: jax.Array) -> jax.Array:
    """(n, n) factor of one matrix (vmap batches it as is): plain array ops for tiny n, else LAPACK."""
    if a.shape[-1] <= s.small_n:
        return _factor_columns(a[..., None])[..., 0]
    return _lapack_factor(a)


def _solve_with(s: Lowering, low: jax.Array, b: jax.Array) -> jax.Array:
    """(n,) solve of one system given its factor (vmap batches it as is): tiny n array ops, else LAPACK."""
    if low.shape[-1] <= s.small_n:
        return _substitute(s, low[..., None], b[:, None])[:, 0]
    return _lapack_substitute(low, b)


def _form(s: Lowering, n: int, axis_size: int) -> str:
    """How a batch of `axis_size` systems of size `n` is solved under vmap (see the module docstring)."""
    if n <= s.unroll_max_n:
        return "columns" if axis_size >= s.unroll_min_batch else "lapack"
    return "substitute" if axis_size >= s.substitute_min_batch else "lapack"


def _substitute_front(s: Lowering, low: jax.Array, b: jax.Array, unroll: bool = False) -> jax.Array:
    """(B, n) solutions given factors `low` (B, n, n) and right sides `b` (B, n), batch first."""
    x = _substitute(s, jnp.moveaxis(low, 0, -1), jnp.moveaxis(b, 0, -1), unroll)
    return jnp.moveaxis(x, -1, 0)


def _graph_substitute(s: Lowering, low: jax.Array, b: jax.Array) -> jax.Array:
    """`_substitute_front` written out row by row (`graph_platforms`)."""
    return _substitute_front(s, low, b, unroll=True)


def _graph_solve(s: Lowering, a: jax.Array, b: jax.Array) -> jax.Array:
    """(B, n) solutions of (B, n, n) systems by the left-looking factor and the written-out
    substitution: no loop, no library call (`graph_platforms`)."""
    low = _factor_left(jnp.moveaxis(a, 0, -1))
    return jnp.moveaxis(_substitute(s, low, jnp.moveaxis(b, 0, -1), unroll=True), -1, 0)


def _loop_or_library(s: Lowering, n: int, loop: Callable[..., jax.Array], library: Callable[..., jax.Array],
                     *xs: jax.Array) -> jax.Array:
    """`loop(*xs)`, a column or substitution loop over the n rows, in programs lowered for
    `loop_platforms`; others get `library(*xs)`, the whole batch in cuSOLVER's factor and cuBLAS's
    triangular solves, since on a GPU each trip of the loop is a round of kernel launches."""
    if n <= s.small_n:  # tiny systems: the loops are unrolled on every platform
        return loop(*xs)
    return platforms.choose(library, dict.fromkeys(s.loop_platforms, loop), *xs)


def _or_graph(s: Lowering, n: int, chosen: Callable[..., jax.Array], graph: Callable[..., jax.Array],
              *xs: jax.Array) -> jax.Array:
    """`graph(*xs)`, the form without loops or library calls, in programs lowered for
    `graph_platforms` when small_n < n <= graph_max_n; `chosen(*xs)` everywhere else."""
    if n <= s.small_n or n > s.graph_max_n:
        return chosen(*xs)
    return platforms.choose(chosen, dict.fromkeys(s.graph_platforms, graph), *xs)


def _columns_solve(s: Lowering, a: jax.Array, b: jax.Array) -> jax.Array:
    """(B, n) solutions of (B, n, n) systems by the column factor and substitution, batch-last inside."""
    x = _substitute(s, _factor_columns(jnp.moveaxis(a, 0, -1)), jnp.moveaxis(b, 0, -1))
    return jnp.moveaxis(x, -1, 0)


def _factor_then_substitute(s: Lowering, a: jax.Array, b: jax.Array) -> jax.Array:
    """(B, n) solutions of (B, n, n) systems by LAPACK's factor and the batch-last substitution."""
    return _substitute_front(s, _lapack_factors(a), b)


def _lapack_solve(s: Lowering, a: jax.Array, b: jax.Array) -> jax.Array:
    """(B, n) solutions of (B, n, n) systems by LAPACK's (cuSOLVER's) factor and triangular solves
    (with `augment`, one: the factor does the forward substitution)."""
    if s.augment:
        low, y = _augmented_factors(a, b)
        return _inline_map(_lapack_back, low.shape[-1] ** 2, low, y)
    return _lapack_substitutes(_lapack_factors(a), b)


def _chosen_solve(s: Lowering, axis_size: int, a: jax.Array, b: jax.Array) -> jax.Array:
    """(B, n) solutions of (B, n, n) systems, batch first, by `_form`'s choice."""
    how, n = _form(s, a.shape[-1], axis_size), a.shape[-1]
    if how == "columns":
        return _loop_or_library(s, n, _bind(_columns_solve, s), _bind(_lapack_solve, s), a, b)
    if how == "substitute":
        return _loop_or_library(s, n, _bind(_factor_then_substitute, s), _bind(_lapack_solve, s), a, b)
    if n <= s.small_n:
        out: jax.Array = jax.vmap(lambda m, r: _solve_with(s, _factor(s, m), r))(a, b)
        return out
    return _lapack_solve(s, a, b)


def _chosen_factors(s: Lowering, axis_size: int, a: jax.Array) -> jax.Array:
    """(B, n, n) factors of (B, n, n) matrices, batch first, by the module docstring's rule."""
    n = a.shape[-1]
    if n <= s.small_n:
        out: jax.Array = jax.vmap(functools.partial(_factor, s))(a)
        return out
    if n <= s.factor_unroll_max_n and axis_size >= (s.unroll_min_batch if n <= s.unroll_max_n
                                                    else s.factor_unroll_min_batch):
        return _loop_or_library(s, n, _factor_left_front, _lapack_factors, a)
    return _lapack_factors(a)


def _chosen_substitutes(s: Lowering, axis_size: int, low: jax.Array, b: jax.Array) -> jax.Array:
    """(B, n) solutions given factors (B, n, n) and right sides (B, n), by `_form`'s choice."""
    how, n = _form(s, low.shape[-1], axis_size), low.shape[-1]
    if how in ("columns", "substitute"):
        return _loop_or_library(s, n, _bind(_substitute_front, s), _lapack_substitutes, low, b)
    if n <= s.small_n:
        out: jax.Array = jax.vmap(functools.partial(_solve_with, s))(low, b)
        return out
    return _lapack_substitutes(low, b)


@functools.cache
def spd_solve_fn(s: Lowering) -> custom_batching.custom_vmap:
    """(n,) solution of a (n, n) x = b (symmetric positive definite), in the forms `s` picks under vmap."""

    @custom_batching.custom_vmap
    def solve(a: jax.Array, b: jax.Array) -> jax.Array:
        return _solve_with(s, _factor(s, a), b)

    @solve.def_vmap
    def _(axis_size: int, in_batched: list[bool], a: jax.Array, b: jax.Array) -> tuple[jax.Array, bool]:
        a, b = batch_front(axis_size, in_batched, a, b)
        chosen = functools.partial(_chosen_solve, s, axis_size)
        return _or_graph(s, a.shape[-1], chosen, _bind(_graph_solve, s), a, b), True

    return solve


@functools.cache
def cholesky_fn(s: Lowering) -> custom_batching.custom_vmap:
    """(n, n) lower factor of symmetric positive definite a (n, n), in the forms `s` picks under vmap."""

    @custom_batching.custom_vmap
    def factor(a: jax.Array) -> jax.Array:
        return _factor(s, a)

    @factor.def_vmap
    def _(axis_size: int, in_batched: list[bool], a: jax.Array) -> tuple[jax.Array, bool]:
        (a,) = batch_front(axis_size, in_batched, a)
        chosen = functools.partial(_chosen_factors, s, axis_size)
        return _or_graph(s, a.shape[-1], chosen, _factor_left_front, a), True

    return factor


@functools.cache
def cho_solve_fn(s: Lowering) -> custom_batching.custom_vmap:
    """(n,) solution given a factor (n, n) from `cholesky_fn` and b (n,), in `s`'s forms under vmap."""

    @custom_batching.custom_vmap
    def solve(low: jax.Array, b: jax.Array) -> jax.Array:
        return _solve_with(s, low, b)

    @solve.def_vmap
    def _(axis_size: int, in_batched: list[bool], low: jax.Array, b: jax.Array) -> tuple[jax.Array, bool]:
        low, b = batch_front(axis_size, in_batched, low, b)
        chosen = functools.partial(_chosen_substitutes, s, axis_size)
        return _or_graph(s, low.shape[-1], chosen, _bind(_graph_substitute, s), low, b), True

    return solve
