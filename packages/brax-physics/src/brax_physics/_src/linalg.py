"""Symmetric positive definite factors and solves, and how they lower under vmap.

Unbatched they call LAPACK, or for n <= `SMALL_N` a few plain array ops (which beat a LAPACK
call's fixed cost). Under `vmap`, for n <= `UNROLL_MAX_N` and batches of `UNROLL_MIN_BATCH` or
more, the solves run as whole-array operations on (n, n, batch) arrays with the batch as the minor
axis, each one SIMD loop over the batch that fuses with its neighbours, where a batched LAPACK
call runs matrix by matrix:
`spd_solve` (the Newton solver's, several per step) factors by a right-looking Cholesky unrolled
over columns, and it and `cho_solve` substitute row by row in a `fori_loop`. `cholesky` (the mass
matrix's factor and the implicit-damping one, each once per step) factors left-looking, one
kernel per column (`_factor_left`), there and for n up to `FACTOR_UNROLL_MAX_N` from
`FACTOR_UNROLL_MIN_BATCH` systems on. Above `UNROLL_MAX_N`, from `SUBSTITUTE_MIN_BATCH` on, the
substitution is the same batch-last loop on the transposed factor (LAPACK's where LAPACK factored):
LAPACK's triangular solves also go matrix by matrix.

Batched LAPACK calls never use XLA's thread pool: jaxlib 0.10's CPU kernels split a batch whose
work (batch times n³/3 for a factor, n² for a solve) reaches `_POOL_MIN_WORK` over the intra-op
pool and block their own pool thread until the pieces finish; once as many such calls run at once
as the pool has threads, every thread waits and the process hangs for good (seen with 1024 ants:
a potrf and a trsm each parked in `jax::ParallelBatchMap`; six independent 14x14 factors of batch
1024 in one program; the step sharded over two CPU devices). So a batched call here takes at most
as many systems as stay under that work, one call per chunk when the batch is larger; each chunk
runs on the thread that calls it, and any number of them may run at once (the chunks of one
factor side by side, two devices each on its own core). A vmap around another vmap batches a
chunk's call again, past the limit; the pipeline vmaps once. The split is the CPU's alone
(`platforms.choose`, which traces only the form of the platform a program is lowered for): lowered
for a GPU or TPU, each factor or solve takes the whole batch.
So do the column and substitution forms (`LOOP_PLATFORMS`): on a GPU each trip of their loop over
rows is a round of kernel launches (a step has several such loops, two inside every Newton
iteration), where cuSOLVER's batched factor and cuBLAS's batched triangular solves are a few
kernels each. For n <= `GRAPH_MAX_N` a GPU (`GRAPH_PLATFORMS`) takes neither: the left-looking
factor and the substitution written out without a loop, since the host launches each library call
between the CUDA graphs that hold the rest of the step. Where `spd_solve` calls the library it
factors the system with its right side appended (`AUGMENT`): the factor's last row is the forward
substitution, and one triangular solve is left.

Differentiation: solves are `lax.custom_linear_solve`s, so their derivatives are implicit (the
JVP solves again with the same factor, reverse mode transposes the solve) and flow through the
matrix-vector product with `a`, never through the factorization, whose output is not
differentiable on its own (`cholesky` stops gradients).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jax import custom_batching, lax

from brax_physics._src import platforms

_HI = jax.lax.Precision.HIGHEST

MINVAL = 1e-15
"""MuJoCo's mjMINVAL: the smallest value treated as nonzero (weights, widths, regularizers)."""

# Unbatched matrices up to this size use the column form too: a LAPACK custom call has a fixed
# cost per call that dominates tiny matrices; from n=7 on LAPACK is as fast or faster and
# compiles quicker.
SMALL_N = 4
# Largest n for which `spd_solve` under vmap runs as column operations (humanoid, n = 27, ran
# several times slower that way: the unrolled factor's trailing-block copies grow as n³).
UNROLL_MAX_N = 16
# Smallest batch for the column form: below it LAPACK matrix by matrix ran the ant's step as fast
# or faster and the unrolled factor only added compile time (the Newton solve's work queue hands it
# its slots, `solver.queue_slots`; measurements in CHANGELOG.md).
UNROLL_MIN_BATCH = 128
# Above UNROLL_MAX_N, smallest batch for the batch-last substitution (on LAPACK's factor, moved to
# batch-last): below it LAPACK's two triangular solves per system cost less than the loop's trips.
SUBSTITUTE_MIN_BATCH = 64
# `cholesky` under vmap (the mass matrix's factor, and the implicit-damping one) takes the
# left-looking unrolled factor (`_factor_left`: n kernels over the whole batch) instead of LAPACK
# matrix by matrix for n up to FACTOR_UNROLL_MAX_N (0: never): where `spd_solve` takes the column
# form (n <= UNROLL_MAX_N from UNROLL_MIN_BATCH on), and above that from FACTOR_UNROLL_MIN_BATCH
# systems on. Its compile time grows as n², its gain with the batch (A/B in CHANGELOG.md: the
# humanoid, 23 dofs, ran 9% faster at 1024 envs for 2.3 s more compile, 1-5% at 256 for 3.5 s).
FACTOR_UNROLL_MAX_N = 32
FACTOR_UNROLL_MIN_BATCH = 512
# Platforms whose programs run the column and substitution forms (`platforms.choose`); the
# others get the linear-algebra library's whole-batch calls. Their loops over rows suit a CPU's
# SIMD lanes; on a GPU every trip is a round of kernel launches.
LOOP_PLATFORMS: tuple[str, ...] = ("cpu",)
# Platforms whose vmapped factors and solves of n <= GRAPH_MAX_N run with no loops and no library
# calls, at any batch: the left-looking factor's column kernels and the substitution's rows written
# out one by one. On a GPU the host launches each cuSOLVER or cuBLAS call between CUDA graphs and
# waits out each loop trip; written out, the kernels join the graphs. Above GRAPH_MAX_N the
# written-out forms (~n² kernels) gained nothing on the GPU and doubled its compile time.
GRAPH_PLATFORMS: tuple[str, ...] = ("cuda",)
GRAPH_MAX_N = 16
# Whether `spd_solve`'s batched LAPACK (cuSOLVER) factor takes the right side as an extra row and
# column (`_augmented`), so that the factor's last row is the forward substitution and one
# triangular solve call remains. Not for the batch-last substitution: in the humanoid's Newton
# solve the forward loop it saves cost no more than the bigger factor and its copies (CHANGELOG.md).
AUGMENT = True
# jaxlib 0.10's kMinWorkPerTask: a batched LAPACK call whose batch times its flop estimate
# (n³/3 for a Cholesky factor, n² for a triangular solve of one right side) is below it runs on
# the calling thread and never waits on the pool.
_POOL_MIN_WORK = 200_000


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


def _substitute(low: jax.Array, b: jax.Array, unroll: bool = False) -> jax.Array:
    """(n, B) solution of L Lᵀ x = b for L (n, n, B) lower triangular and b (n, B), batch last.

    Forward then back substitution, one row per trip of a `fori_loop` (a loop compiles faster than
    the unrolled form, and ran faster too on a CPU), or written out row by row when `unroll` (the
    same operations, no loop); systems of n <= `SMALL_N` unrolled.
    """
    n = low.shape[0]
    if n == 0:  # a model without degrees of freedom
        return b
    if n <= SMALL_N:
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
    """`_substitute` for n <= `SMALL_N`, unrolled; the back substitution by dot products (the
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
    batch, chunk = xs[0].shape[0], max(1, (_POOL_MIN_WORK - 1) // max(1, work))
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


def _factor(a: jax.Array) -> jax.Array:
    """(n, n) factor of one matrix (vmap batches it as is): plain array ops for tiny n, else LAPACK."""
    if a.shape[-1] <= SMALL_N:
        return _factor_columns(a[..., None])[..., 0]
    return _lapack_factor(a)


def _solve_with(low: jax.Array, b: jax.Array) -> jax.Array:
    """(n,) solve of one system given its factor (vmap batches it as is): tiny n array ops, else LAPACK."""
    if low.shape[-1] <= SMALL_N:
        return _substitute(low[..., None], b[:, None])[:, 0]
    return _lapack_substitute(low, b)


@custom_batching.custom_vmap
def _spd_solve_p(a: jax.Array, b: jax.Array) -> jax.Array:
    return _solve_with(_factor(a), b)


def _lowering(n: int, axis_size: int) -> str:
    """How a batch of `axis_size` systems of size `n` is solved under vmap (see the module docstring)."""
    if n <= UNROLL_MAX_N:
        return "columns" if axis_size >= UNROLL_MIN_BATCH else "lapack"
    return "substitute" if axis_size >= SUBSTITUTE_MIN_BATCH else "lapack"


def _substitute_front(low: jax.Array, b: jax.Array, unroll: bool = False) -> jax.Array:
    """(B, n) solutions given factors `low` (B, n, n) and right sides `b` (B, n), batch first."""
    x = _substitute(jnp.moveaxis(low, 0, -1), jnp.moveaxis(b, 0, -1), unroll)
    return jnp.moveaxis(x, -1, 0)


def _graph_substitute(low: jax.Array, b: jax.Array) -> jax.Array:
    """`_substitute_front` written out row by row (`GRAPH_PLATFORMS`)."""
    return _substitute_front(low, b, unroll=True)


def _graph_solve(a: jax.Array, b: jax.Array) -> jax.Array:
    """(B, n) solutions of (B, n, n) systems by the left-looking factor and the written-out
    substitution: no loop, no library call (`GRAPH_PLATFORMS`)."""
    low = _factor_left(jnp.moveaxis(a, 0, -1))
    return jnp.moveaxis(_substitute(low, jnp.moveaxis(b, 0, -1), unroll=True), -1, 0)


def _loop_or_library(n: int, loop: Callable[..., jax.Array], library: Callable[..., jax.Array],
                     *xs: jax.Array) -> jax.Array:
    """`loop(*xs)`, a column or substitution loop over the n rows, in programs lowered for
    `LOOP_PLATFORMS`; others get `library(*xs)`, the whole batch in cuSOLVER's factor and cuBLAS's
    triangular solves, since on a GPU each trip of the loop is a round of kernel launches."""
    if n <= SMALL_N:  # tiny systems: the loops are unrolled on every platform
        return loop(*xs)
    return platforms.choose(library, dict.fromkeys(LOOP_PLATFORMS, loop), *xs)


def _or_graph(n: int, chosen: Callable[..., jax.Array], graph: Callable[..., jax.Array],
              *xs: jax.Array) -> jax.Array:
    """`graph(*xs)`, the form without loops or library calls, in programs lowered for
    `GRAPH_PLATFORMS` when SMALL_N < n <= GRAPH_MAX_N; `chosen(*xs)` everywhere else."""
    if n <= SMALL_N or n > GRAPH_MAX_N:
        return chosen(*xs)
    return platforms.choose(chosen, dict.fromkeys(GRAPH_PLATFORMS, graph), *xs)


def _columns_solve(a: jax.Array, b: jax.Array) -> jax.Array:
    """(B, n) solutions of (B, n, n) systems by the column factor and substitution, batch-last inside."""
    return jnp.moveaxis(_substitute(_factor_columns(jnp.moveaxis(a, 0, -1)), jnp.moveaxis(b, 0, -1)), -1, 0)


def _factor_then_substitute(a: jax.Array, b: jax.Array) -> jax.Array:
    """(B, n) solutions of (B, n, n) systems by LAPACK's factor and the batch-last substitution."""
    return _substitute_front(_lapack_factors(a), b)


def _lapack_solve(a: jax.Array, b: jax.Array) -> jax.Array:
    """(B, n) solutions of (B, n, n) systems by LAPACK's (cuSOLVER's) factor and triangular solves
    (with `AUGMENT`, one: the factor does the forward substitution)."""
    if AUGMENT:
        low, y = _augmented_factors(a, b)
        return _inline_map(_lapack_back, low.shape[-1] ** 2, low, y)
    return _lapack_substitutes(_lapack_factors(a), b)


@_spd_solve_p.def_vmap
def _spd_solve_vmap(axis_size: int, in_batched: list[bool], a: jax.Array,
                    b: jax.Array) -> tuple[jax.Array, bool]:
    a, b = batch_front(axis_size, in_batched, a, b)
    return _or_graph(a.shape[-1], functools.partial(_chosen_solve, axis_size), _graph_solve, a, b), True


def _chosen_solve(axis_size: int, a: jax.Array, b: jax.Array) -> jax.Array:
    """(B, n) solutions of (B, n, n) systems, batch first, by `_lowering`'s choice."""
    how, n = _lowering(a.shape[-1], axis_size), a.shape[-1]
    if how == "columns":
        return _loop_or_library(n, _columns_solve, _lapack_solve, a, b)
    if how == "substitute":
        return _loop_or_library(n, _factor_then_substitute, _lapack_solve, a, b)
    if n <= SMALL_N:
        out: jax.Array = jax.vmap(lambda m, r: _solve_with(_factor(m), r))(a, b)
        return out
    return _lapack_solve(a, b)


@custom_batching.custom_vmap
def _cholesky_p(a: jax.Array) -> jax.Array:
    return _factor(a)


@_cholesky_p.def_vmap
def _cholesky_vmap(axis_size: int, in_batched: list[bool], a: jax.Array) -> tuple[jax.Array, bool]:
    (a,) = batch_front(axis_size, in_batched, a)
    return _or_graph(a.shape[-1], functools.partial(_chosen_factors, axis_size), _factor_left_front, a), True


def _chosen_factors(axis_size: int, a: jax.Array) -> jax.Array:
    """(B, n, n) factors of (B, n, n) matrices, batch first, by the module docstring's rule."""
    n = a.shape[-1]
    if n <= SMALL_N:
        out: jax.Array = jax.vmap(_factor)(a)
        return out
    if n <= FACTOR_UNROLL_MAX_N and axis_size >= (UNROLL_MIN_BATCH if n <= UNROLL_MAX_N
                                                  else FACTOR_UNROLL_MIN_BATCH):
        return _loop_or_library(n, _factor_left_front, _lapack_factors, a)
    return _lapack_factors(a)


@custom_batching.custom_vmap
def _cho_solve_p(low: jax.Array, b: jax.Array) -> jax.Array:
    return _solve_with(low, b)


@_cho_solve_p.def_vmap
def _cho_solve_vmap(axis_size: int, in_batched: list[bool], low: jax.Array,
                    b: jax.Array) -> tuple[jax.Array, bool]:
    low, b = batch_front(axis_size, in_batched, low, b)
    chosen = functools.partial(_chosen_substitutes, axis_size)
    return _or_graph(low.shape[-1], chosen, _graph_substitute, low, b), True


def _chosen_substitutes(axis_size: int, low: jax.Array, b: jax.Array) -> jax.Array:
    """(B, n) solutions given factors (B, n, n) and right sides (B, n), by `_lowering`'s choice."""
    how, n = _lowering(low.shape[-1], axis_size), low.shape[-1]
    if how in ("columns", "substitute"):
        return _loop_or_library(n, _substitute_front, _lapack_substitutes, low, b)
    if n <= SMALL_N:
        out: jax.Array = jax.vmap(_solve_with)(low, b)
        return out
    return _lapack_substitutes(low, b)


def _matvec(a: jax.Array, x: jax.Array) -> jax.Array:
    return jnp.matmul(a, x, precision=_HI)


def spd_solve(a: jax.Array, b: jax.Array) -> jax.Array:
    """(n,) solution x of a x = b for symmetric positive definite a (n, n) and b (n,); differentiable."""
    out: jax.Array = jax.lax.custom_linear_solve(functools.partial(_matvec, a), b,
                                                 lambda _, r: _spd_solve_p(a, r), symmetric=True)
    return out


def cholesky(a: jax.Array) -> jax.Array:
    """(n, n) lower Cholesky factor of symmetric positive definite a (n, n) for `cho_solve`; its strict
    upper triangle is unspecified (`jnp.tril` it to read the factor as a matrix); carries no gradient."""
    low: jax.Array = _cholesky_p(jax.lax.stop_gradient(a))
    return low


def cho_solve(a: jax.Array, low: jax.Array, b: jax.Array) -> jax.Array:
    """(n,) solution x of a x = b given a's factor `low` from `cholesky`; differentiable in a and b."""
    out: jax.Array = jax.lax.custom_linear_solve(functools.partial(_matvec, a), b,
                                                 lambda _, r: _cho_solve_p(low, r), symmetric=True)
    return out
