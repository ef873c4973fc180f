"""The lowering of the constraint solver: the Newton Hessian's summed forms, and the work queue
that a vmapped Newton loop runs on.

The Hessian M + Jᵀ diag(w) J is a dot above `hessian_elementwise_max` multiply-adds, below it the
rows' weighted outer products summed elementwise (`_hessian_sum`).

Batches: under `vmap` a plain while loop would run every problem for the batch's largest iteration
count; from `queue_min_batch` problems on, on `queue_platforms`, a work queue instead iterates only
the unconverged ones (`_queued`), each for exactly the iterations it takes alone. The queue trades
trips for work: it spreads the batch's iterations over fewer slots than problems, so it takes more
trips than the plain loop's slowest problem. A CPU's time follows the work; a GPU's step at RL
batch sizes follows its kernel launches and each trip's host synchronization.

Compaction: the solve on the smallest budget tier that holds the active rows (`tiered`), and the
budgets (`tier_budgets`): how many of a group's contact or limit units a tier holds (see
`solver._Compaction`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Final, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import custom_batching

from brax_physics._src import linalg, platforms
from brax_physics._src.lowering.factor import batch_front
from brax_physics._src.lowering.settings import Lowering

_HI: Final = jax.lax.Precision.HIGHEST


def hessian(s: Lowering, row_dof: tuple[int, ...], m: jax.Array, j: jax.Array, w: jax.Array) -> jax.Array:
    """(nv, nv) M + Jᵀ diag(w) J of `m` (nv, nv), `j` (nefc, nv), `w` (nefc,); `row_dof` per row the one
    dof its Jacobian reaches, or -1."""
    nefc, nv = j.shape
    if nefc * nv * nv > s.hessian_elementwise_max:
        return m + jnp.matmul(j.T * w[None, :], j, precision=_HI)
    out: jax.Array = _hessian_sum_fn(s, row_dof)(m, j, w)
    return out


def _runs(idx: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) of the runs of consecutive values in static increasing `idx`."""
    breaks = np.flatnonzero(np.diff(idx) != 1) + 1
    return [(int(r[0]), int(r[-1]) + 1) for r in np.split(idx, breaks)]


def _take(x: jax.Array, idx: np.ndarray) -> jax.Array:
    """x[idx] for static increasing `idx`, as slices of its runs (a gather did not fuse)."""
    parts = [x[a:b] for a, b in _runs(idx)]
    return parts[0] if len(parts) == 1 else jnp.concatenate(parts)


def _sum_rows(s: Lowering, n: int, term: Callable[[int], jax.Array],
              terms: Callable[[], jax.Array]) -> jax.Array:
    """Σ_k term(k) over k < n, added pairwise up to `hessian_unroll_max_rows`; else `terms()` (all n
    stacked) reduced: more would make one very large kernel."""
    if n > s.hessian_unroll_max_rows:
        return jnp.sum(terms(), axis=0)
    parts = [term(k) for k in range(n)]
    while len(parts) > 1:
        parts = [parts[i] + parts[i + 1] if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
    return parts[0]


def _hessian_sum(s: Lowering, row_dof: tuple[int, ...], m: jax.Array, j: jax.Array,
                 w: jax.Array) -> jax.Array:
    """(nv, nv, ...) M + Jᵀ diag(w) J summed elementwise, batch axes last: `m` (nv, nv, ...), `j`
    (nefc, nv, ...), `w` (nefc, ...).

    Weighted row outer products summed elementwise: under vmap the dot form is a batched dot of
    tiny matrices, which XLA's CPU backend runs matrix by matrix, one call each; a reduction over
    the rows goes to a YNNPACK library call, several times slower than the one fused loop that a
    tree of additions of the rows' terms becomes (each term computed in it, never stored). Plain
    float32 products: no reduced-precision matmul either.
    """
    one = np.asarray(row_dof)
    single, several = np.flatnonzero(one >= 0), np.flatnonzero(one < 0)
    hess = m
    if len(single):
        # a row with one dof adds w J² to that dof's diagonal entry (its other entries are zero)
        sq, ws = _take(j, single) ** 2, _take(w, single)
        hess = linalg.add_diagonal(hess, _sum_rows(s, len(single), lambda k: ws[k][None] * sq[k],
                                                   lambda: ws[:, None] * sq), batch_last=True)
    if len(several):
        jm = _take(j, several)
        jw = jm * _take(w, several)[:, None]
        hess = hess + _sum_rows(s, len(several), lambda k: jw[k][:, None] * jm[k][None, :],
                                lambda: jw[:, :, None] * jm[:, None, :])
    return hess


@functools.cache
def _hessian_sum_fn(s: Lowering, row_dof: tuple[int, ...]) -> custom_batching.custom_vmap:
    """`_hessian_sum` of one problem; under vmap, of the batch with the batch as the minor axis.

    Batch-first, XLA's fused loop over a batch of Hessians runs along a matrix row (nv entries,
    each term a broadcast of one row's entry); batch-last, an entry is a SIMD loop over the batch
    with each term's operands contiguous. Where XLA fuses part of the sum into a consumer (the copy
    that lays out LAPACK's operand took the humanoid's several-dof rows), that kernel's loop order
    decides for that part . The same products and the same tree of
    additions in either layout, so the same numbers.
    """

    @custom_batching.custom_vmap
    def hessian(m: jax.Array, j: jax.Array, w: jax.Array) -> jax.Array:
        # traced when lowered: under vmap (the Newton solve's case) the rule replaces it
        return platforms.defer(functools.partial(_hessian_sum, s, row_dof), m, j, w, like=0)

    @hessian.def_vmap
    def _(axis_size: int, in_batched: list[bool], m: jax.Array, j: jax.Array,
          w: jax.Array) -> tuple[jax.Array, bool]:
        m, j, w = (jnp.moveaxis(x, 0, -1) for x in batch_front(axis_size, in_batched, m, j, w))
        return jnp.moveaxis(_hessian_sum(s, row_dof, m, j, w), -1, 0), True

    return hessian


class Loop(NamedTuple):
    """An iterative solve of one problem, as the parts the work queue runs (all traceable, per problem)."""

    solve: Callable[[Any, jax.Array], jax.Array]
    """(problem, packed warm start) -> packed result: the whole loop."""
    warm: Callable[[Any, jax.Array], jax.Array]
    """(problems, packed warm starts), batched -> the argument `start` takes."""
    start: Callable[[Any, jax.Array], Any]
    """(problem, warm start) -> first iterate."""
    iterate: Callable[[Any, Any], Any]
    """(problem, iterate) -> next iterate."""
    running: Callable[[Any], jax.Array]
    """iterate -> () bool, whether it iterates on."""
    pack: Callable[[Any], jax.Array]
    """iterate -> packed result."""


def queue_slots(s: Lowering, batch: int) -> int:
    """Slots of the work queue for `batch` problems: more slots take fewer trips but iterate more
    empty or converged slots per trip, so they grow more slowly than the batch."""
    return max(1, min(batch // s.queue_small_fraction, s.queue_min_slots), batch // s.queue_slot_fraction)


def _queued(loop: Loop, p: Any, w: jax.Array, slots: int) -> jax.Array:
    """(B, ...) packed results of a batch of problems (leading axis B; `w` the packed warm starts),
    iterating only the unconverged ones.

    A vmapped while loop runs every problem for as many iterations as the slowest one needs, while
    a typical problem needs far fewer (many stop at the warm start), so most of that work is wasted.
    Here a fixed number of slots each hold one unconverged problem;
    every trip runs one iteration on all slots, writes out the problems that stopped and
    refills their slots from the queue of pending ones. Each problem takes exactly the iterations
    it would take alone, so the results are those of the per-problem loop; the work is about the
    total iteration count, not batch size times the maximum. The slots' problems are loop state
    beside their iterates: the refill writes a new problem's data into its slot (a gather and a
    select over the slots each trip, as for the iterates), and the iteration reads the slots'
    copies instead of gathering every slot's problem from the batch (faster, same values).
    """
    n = w.shape[0]
    s0 = jax.vmap(loop.start)(p, loop.warm(p, w))
    pending = jax.vmap(loop.running)(s0)
    order = jnp.argsort(jnp.where(pending, 0, 1), stable=True)  # pending problems first
    n_pending = jnp.sum(pending, dtype=jnp.int32)

    def select(mask: jax.Array, a: jax.Array, b: jax.Array) -> jax.Array:
        return jnp.where(mask.reshape(mask.shape + (1,) * (a.ndim - 1)), a, b)

    Slot = tuple[Any, Any]  # the slots' iterates and problems

    def refill(sidx: jax.Array, slot: Slot, ptr: jax.Array,
               free: jax.Array) -> tuple[jax.Array, Slot, jax.Array]:
        """Give each free slot the next pending problem (or mark it empty: index n)."""
        cand = ptr + jnp.cumsum(free, dtype=jnp.int32) - 1
        take = free & (cand < n_pending)
        sidx = jnp.where(take, order[jnp.minimum(cand, n - 1)], jnp.where(free, n, sidx))
        fresh = jax.tree.map(lambda a: a[jnp.minimum(sidx, n - 1)], (s0, p))
        slot = jax.tree.map(functools.partial(select, take), fresh, slot)
        return sidx, slot, ptr + jnp.sum(take, dtype=jnp.int32)

    Carry = tuple[jax.Array, jax.Array, Slot, jax.Array]

    def body(c: Carry) -> Carry:
        x_out, sidx, slot, ptr = c
        it, ps = slot
        it = jax.vmap(loop.iterate)(ps, it)
        active = sidx < n
        finished = active & ~jax.vmap(loop.running)(it)
        x_out = x_out.at[jnp.where(finished, sidx, n)].set(loop.pack(it), mode="drop")
        slot = (it, ps)
        sidx, slot, ptr = refill(sidx, slot, ptr, finished | ~active)
        return x_out, sidx, slot, ptr

    empty = jnp.full((slots,), n, jnp.int32)
    sidx, slot, ptr = refill(empty, jax.tree.map(lambda a: a[:slots], (s0, p)), jnp.zeros((), jnp.int32),
                             jnp.ones((slots,), bool))
    carry = (loop.pack(s0), sidx, slot, ptr)
    out: jax.Array = jax.lax.while_loop(lambda c: jnp.any(c[1] < n), body, carry)[0]
    return out


def batched(s: Lowering, loop: Loop) -> custom_batching.custom_vmap:
    """`loop.solve` of one problem (also for a vmap of one problem), and under vmap the work queue or
    the plain vmapped loop, as `s` says."""

    @custom_batching.custom_vmap
    def solve(p: Any, w: jax.Array) -> jax.Array:
        # traced when lowered: under vmap the rule below replaces it, and its loop is not traced
        return platforms.defer(loop.solve, p, w)

    @solve.def_vmap
    def _(axis_size: int, in_batched: list[object], p: Any, w: jax.Array) -> tuple[jax.Array, bool]:
        def full(a: jax.Array, batched: bool) -> jax.Array:
            return a if batched else jnp.broadcast_to(a, (axis_size, *a.shape))

        p, w = jax.tree.map(full, (p, w), tuple(in_batched))
        if axis_size == 1:  # one problem (a single env under vmap): its loop, without a batched one's selects
            one_p, one_w = jax.tree.map(lambda a: a[0], (p, w))
            return loop.solve(one_p, one_w)[None], True
        plain = jax.vmap(loop.solve)
        if axis_size < s.queue_min_batch or w.ndim != 2 or not s.queue_platforms:
            return plain(p, w), True  # small batches: the plain vmapped loop
        queued = functools.partial(_queued, loop, slots=queue_slots(s, axis_size))
        return platforms.choose(plain, dict.fromkeys(s.queue_platforms, queued), p, w), True

    return solve


def _for_batch(solves: list[Callable[[Any, jax.Array], jax.Array]], min_batch: tuple[int, ...], batch: int
               ) -> tuple[list[Callable[[Any, jax.Array], jax.Array]], jax.Array]:
    """The solves a batch of `batch` problems compiles (the tiers it is large enough for, then the
    full solve) and (ntier + 1,) the branch of each tier index among them: the next one kept."""
    kept = [i for i, m in enumerate(min_batch) if batch >= m] + [len(min_batch)]
    branch = [next(k for k, i in enumerate(kept) if i >= t) for t in range(len(min_batch) + 1)]
    return [solves[i] for i in kept], jnp.asarray(branch, jnp.int32)


def tiered(solves: list[Callable[[Any, jax.Array], jax.Array]], tier: Callable[[Any], jax.Array],
           min_batch: tuple[int, ...]) -> custom_batching.custom_vmap:
    """`solves[tier(p)](p, w)`, the last of `solves` the full solve, and tier i only in batches of
    `min_batch[i]` or more problems (else the next one). Under vmap the batch takes the batch's
    largest tier, unbatched, so one branch runs (a batched index would run every branch)."""
    full = solves[-1]

    def switch(p: Any, w: jax.Array) -> jax.Array:
        branches, branch = _for_batch(solves, min_batch, 1)
        out: jax.Array = jax.lax.switch(branch[tier(p)], branches, p, w)
        return out

    @custom_batching.custom_vmap
    def solve(p: Any, w: jax.Array) -> jax.Array:
        return platforms.defer(switch, p, w)  # as `batched`'s

    @solve.def_vmap
    def _(axis_size: int, in_batched: list[object], p: Any, w: jax.Array) -> tuple[jax.Array, bool]:
        def bcast(a: jax.Array, batched: bool) -> jax.Array:
            return a if batched else jnp.broadcast_to(a, (axis_size, *a.shape))

        p, w = jax.tree.map(bcast, (p, w), tuple(in_batched))
        if w.ndim != 2:  # nested batching: a batched tier index would run every branch
            return jax.vmap(full)(p, w), True
        branches, branch = _for_batch(solves, min_batch, axis_size)
        top = jnp.max(jax.vmap(tier)(p))  # unbatched: one branch runs
        return jax.lax.switch(branch[top], [jax.vmap(s) for s in branches], p, w), True

    return solve


def tier_budgets(s: Lowering, nunit: int) -> list[tuple[int, int]]:
    """(units kept, smallest batch) per compaction tier for a group of `nunit` units (increasing;
    empty: never compact).

    1/`compact_fraction` of the units, at least `compact_min_units`, and only where that is at most
    half the group; huge groups (thousands of contact slots) hold far more slots than active
    contacts, so theirs is `compact_base` + 1/`compact_large_fraction` of the units where smaller.
    Under vmap the batch's fullest problem picks the tier, and the more problems the fuller it is:
    from `compact_wide_min_batch` problems on, a second tier of 1/`compact_wide_fraction` of the
    units (where a quarter larger than the first, and at most half the group) catches the batches
    the first misses. Each tier compiles one more Newton solve."""
    large = s.compact_base + -(-nunit // s.compact_large_fraction)
    b = max(s.compact_min_units, min(-(-nunit // s.compact_fraction), large))
    if 2 * b > nunit:
        return []
    tiers = [(b, 1)]
    wide = -(-nunit // s.compact_wide_fraction) if s.compact_wide_fraction else 0
    if 4 * wide >= 5 * b and 2 * wide <= nunit:
        tiers.append((wide, s.compact_wide_min_batch))
    return tiers
