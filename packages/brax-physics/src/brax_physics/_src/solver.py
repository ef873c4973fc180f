"""MuJoCo's constraint solver: the primal problem over qacc, solved by Newton's method.

    min_x  ½ (x − qacc_smooth)ᵀ M (x − qacc_smooth) + Σ_i s_i(J_i x − aref_i)

with s_i the soft-constraint cost of row i (MuJoCo documentation, Computation: Constraint solver,
Reduced primal problem): ½ D jar² on both sides for equality rows, on the violated side for limits
and pyramidal contact edges, a Huber function for friction loss. Each Newton iteration
factors H = M + Jᵀ diag(D·quadratic) J (dense Cholesky) and minimizes the piecewise-quadratic 1-D
cost along the Newton direction exactly, without a loop: the slope at every kink (a table for small
problems; for large ones the kinks ahead, sorted, with running sums of the slope's coefficients)
brackets the minimum on one linear piece (MuJoCo iterates Newton steps on the same 1-D function up
to `ls_iterations`; the exact minimum makes that setting unused). The solve is
warm-started from the previous step's acceleration when that is cheaper than qacc_smooth, as in
MuJoCo, and stops on MuJoCo's rules (scaled cost improvement or gradient below `tolerance`, or `iterations`).
The scale is 1/trace(M) of the current mass matrix (`scale_tol`), as in MuJoCo 4.0.0.

Batches: under `vmap` a plain while loop would run every problem for the batch's largest iteration
count; from `QUEUE_MIN_BATCH` problems on, on a CPU (`QUEUE_PLATFORMS`), a work queue instead
iterates only the unconverged ones (`_newton_queued`), each for exactly the iterations it takes
alone.

Compaction: models with many contact slots have few active rows; when a group of limit/contact
units is large, the solve runs on its active units gathered into a smaller static budget whenever
they fit (see `_Compaction`), on all rows otherwise.

Differentiation: the forward solve uses `lax.while_loop` (early exit, so converged problems cost a
few iterations, not `iterations`), wrapped in a `custom_vjp` whose backward pass is implicit
differentiation of the optimality condition g(x*, θ) = 0: θ̄ = −(∂g/∂θ)ᵀ H⁻¹ x̄. No loop is
differentiated, gradients are those of the exact minimizer, and memory does not grow with the
iteration count.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import custom_batching

from brax_physics._src import linalg, platforms

_HI = jax.lax.Precision.HIGHEST

# float32 floors on MuJoCo's (double precision) stopping tests: below these relative sizes the
# cost improvement and gradient are roundoff, and MuJoCo's absolute tests would never fire.
_REL_COST = 1e-6
_REL_GRAD = 1e-5


class Config(NamedTuple):
    """Static solver settings (hashable)."""

    is_floss: tuple[bool, ...]
    """Per row: friction-loss (Huber) cost instead of the unilateral one."""
    iterations: int
    """Maximum Newton iterations (MuJoCo `opt.iterations`)."""
    tolerance: float
    """MuJoCo `opt.tolerance` on the scaled cost improvement and gradient."""
    warmstart: bool
    """Start from the previous qacc when cheaper than qacc_smooth."""
    is_eq: tuple[bool, ...] = ()
    """Per row: equality (bilateral, always quadratic) cost; empty: no equality rows."""
    cones: tuple[tuple[int, ...], ...] = ()
    """Rows (normal first) of each elliptic friction cone; empty with pyramidal cones."""
    ls_iterations: int = 50
    """Maximum line-search iterations (MuJoCo `opt.ls_iterations`; read only with cones)."""
    ls_tolerance: float = 0.01
    """MuJoCo `opt.ls_tolerance` (read only with cones)."""
    compact: tuple[tuple[tuple[int, ...], ...], ...] = ()
    """Groups of interchangeable row units that are often inactive (contacts, limits): each group a
    tuple of units of one size, a unit the rows of one elliptic cone (in `cones`) or one scalar
    unilateral row. The solve runs on the active units only when they fit a budget (`_Compaction`)."""
    row_dof: tuple[int, ...] | None = None
    """Per row: the one dof its Jacobian can reach (a hinge or slide joint's limit or friction loss),
    or -1 for rows reaching several; None: unknown. Single-dof rows add to the Hessian's diagonal
    only, so it sums outer products over the others alone."""


class Problem(NamedTuple):
    """Array data of one constraint problem."""

    M: jax.Array  # (nv, nv)
    qfrc_smooth: jax.Array  # (nv,)
    qacc_smooth: jax.Array  # (nv,)
    J: jax.Array  # (nefc, nv)
    D: jax.Array  # (nefc,) zero on inactive rows
    R: jax.Array  # (nefc,)
    aref: jax.Array  # (nefc,)
    floss: jax.Array  # (nefc,)
    mu: jax.Array | None = None  # (nefc,) cone scale per row (see constraint.Rows.mu); None: no cones


def _mv(a: jax.Array, x: jax.Array) -> jax.Array:
    return jnp.matmul(a, x, precision=_HI)


def row_terms(cfg: Config, p: Problem, jar: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Per row: force f = −∂s/∂jar, cost s, and whether the row is in its quadratic zone."""
    if cfg.cones:
        return _with_cones(cfg, p, jar, _scalar_row_terms(cfg, p, jar))
    return _scalar_row_terms(cfg, p, jar)


def _scalar_row_terms(cfg: Config, p: Problem, jar: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """`row_terms` of rows with a scalar cost (every row but elliptic cones')."""
    D, R, floss = p.D, p.R, p.floss
    quad = jar < 0
    if any(cfg.is_eq):  # equality rows: quadratic on both sides
        quad = quad | jnp.asarray(cfg.is_eq).reshape((1,) * (jar.ndim - 1) + (-1,))
    f = jnp.where(quad, -D * jar, 0.0)
    c = jnp.where(quad, 0.5 * D * jar * jar, 0.0)
    if not any(cfg.is_floss):
        return f, c, quad
    isf = jnp.asarray(cfg.is_floss)
    quad_fl = jnp.abs(jar) <= R * floss
    f_fl = jnp.clip(-D * jar, -floss, floss)
    c_fl = jnp.where(quad_fl, 0.5 * D * jar * jar, floss * jnp.abs(jar) - 0.5 * R * floss * floss)
    return jnp.where(isf, f_fl, f), jnp.where(isf, c_fl, c), jnp.where(isf, quad_fl, quad)


# ---- elliptic cones (MuJoCo's mj_constraintUpdate, PrimalPrepare/PrimalEval, HessianCone) ----
# A contact's rows (jar_0 normal, jar_k friction) map to the circular cone U = (μ jar_0, f_k jar_k)
# with N = U_0, T = |U_1..|, μ MuJoCo's regularized cone coefficient. Top zone N ≥ μT: no cost;
# bottom zone μN + T ≤ 0: every row quadratic, ½ Σ D_k jar_k²; in between: ½ Dm (N − μT)² with
# Dm = D_0/(μ²(1 + μ²)), whose Hessian is a dense condim × condim block per contact.


@functools.lru_cache(maxsize=64)
def _cone_groups(cones: tuple[tuple[int, ...], ...]) -> tuple[np.ndarray, ...]:
    """(ncone, condim) int32 rows of the cones, one array per condim."""
    by_dim: dict[int, list[tuple[int, ...]]] = {}
    for rows in cones:
        by_dim.setdefault(len(rows), []).append(rows)
    return tuple(np.asarray(v, np.int32) for _, v in sorted(by_dim.items()))


class _Cone(NamedTuple):
    """Zone quantities of one group of cones, (..., ncone) each unless noted."""

    U: jax.Array  # (..., ncone, condim) rows mapped into the circular cone
    N: jax.Array
    T: jax.Array  # tangential norm (0 where the tangential part vanishes)
    mu: jax.Array
    Dm: jax.Array
    bottom: jax.Array
    middle: jax.Array


_APEX = 1e-10  # tangential residual below which a cone counts as at its apex (see `_cone`)


def _cone(p: Problem, idx: np.ndarray, jar: jax.Array) -> _Cone:
    assert p.mu is not None
    scale = p.mu[..., idx]
    U = jar[..., idx] * scale
    N, mu = U[..., 0], scale[..., 0]
    tt = jnp.sum(U[..., 1:] ** 2, axis=-1)
    tpos = tt > 0
    T = jnp.where(tpos, jnp.sqrt(jnp.where(tpos, tt, 1.0)), 0.0)
    top = mu * T <= N
    bottom = ~top & (mu * N + T <= 0)
    # the middle zone at the cone's apex (T ~ 0, so -T/mu < N < mu·T ~ 0 too): its 1/T and 1/T³
    # overflow in float32 while its cost and force vanish, so count it as inside the cone
    top = top | (~bottom & (T <= _APEX))
    middle = ~top & ~bottom
    mu2 = jnp.maximum(mu * mu, linalg.MINVAL)
    Dm = p.D[..., idx[:, 0]] / (mu2 * (1 + mu2))
    return _Cone(U, N, T, mu, Dm, bottom, middle)


def _with_cones(cfg: Config, p: Problem, jar: jax.Array,
                scalar: tuple[jax.Array, jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array, jax.Array]:
    """`row_terms` with the cones' rows replaced by their cone terms (a cone's cost on its normal row)."""
    f, c, quad = scalar
    assert p.mu is not None
    for idx in _cone_groups(cfg.cones):
        k = _cone(p, idx, jar)
        ja, D = jar[..., idx], p.D[..., idx]
        T = jnp.where(k.middle, k.T, 1.0)
        nmt = k.N - k.mu * k.T
        f0 = -k.Dm * nmt * k.mu
        f_mid = jnp.concatenate([f0[..., None], -(f0 / T)[..., None] * k.U[..., 1:] * p.mu[..., idx[:, 1:]]],
                                axis=-1)
        bottom, middle = k.bottom[..., None], k.middle[..., None]
        f_g = jnp.where(bottom, -D * ja, jnp.where(middle, f_mid, 0.0))
        c_bottom = 0.5 * jnp.sum(D * ja * ja, axis=-1)
        c_n = jnp.where(k.bottom, c_bottom, jnp.where(k.middle, 0.5 * k.Dm * nmt * nmt, 0.0))
        c_g = jnp.concatenate([c_n[..., None], jnp.zeros_like(ja[..., 1:])], axis=-1)
        q_g = jnp.broadcast_to(bottom, ja.shape)
        f, c, quad = f.at[..., idx].set(f_g), c.at[..., idx].set(c_g), quad.at[..., idx].set(q_g)
    return f, c, quad


def _cone_blocks(p: Problem, idx: np.ndarray, jar: jax.Array) -> jax.Array:
    """(ncone, condim, condim) Hessian of each middle-zone cone's cost in its rows' jar (0 elsewhere)."""
    assert p.mu is not None
    k = _cone(p, idx, jar)
    scale = p.mu[idx]
    T = jnp.where(k.middle, k.T, 1.0)
    ut = k.U[:, 1:]
    first = jnp.concatenate([jnp.ones_like(T)[:, None], -(k.mu / T)[:, None] * ut], axis=1)  # (n, dim)
    dim = idx.shape[1]
    tang = ((k.mu * k.mu - k.mu * k.N / T)[:, None, None] * jnp.eye(dim - 1, dtype=T.dtype)[None]
            + (k.mu * k.N / T**3)[:, None, None] * ut[:, :, None] * ut[:, None, :])
    h = jnp.zeros((idx.shape[0], dim, dim), T.dtype).at[:, 0, :].set(first).at[:, :, 0].set(first)
    h = h.at[:, 1:, 1:].set(tang)
    h = h * (k.Dm[:, None, None] * scale[:, :, None] * scale[:, None, :])
    return jnp.where(k.middle[:, None, None], h, 0.0)


def _cone_hessian(cfg: Config, p: Problem, jar: jax.Array) -> jax.Array:
    """(nv, nv) Σ_cones J_cᵀ H_c J_c over the cones in their middle zone."""
    nv = p.J.shape[1]
    out = jnp.zeros((nv, nv), p.J.dtype)
    for idx in _cone_groups(cfg.cones):
        jc = p.J[idx]  # (ncone, condim, nv)
        out = out + jnp.einsum("nkv,nkj,njw->vw", jc, _cone_blocks(p, idx, jar), jc, precision=_HI)
    return out


def _cone_curvature(cfg: Config, p: Problem, jar: jax.Array, jd: jax.Array) -> jax.Array:
    """() Σ_cones jd_cᵀ H_c jd_c: the middle-zone cones' second derivative along a search direction."""
    out = jnp.zeros((), jd.dtype)
    for idx in _cone_groups(cfg.cones):
        v = jd[idx]
        out = out + jnp.einsum("nk,nkj,nj->", v, _cone_blocks(p, idx, jar), v, precision=_HI)
    return out


def constraint_force(cfg: Config, p: Problem, qacc: jax.Array) -> jax.Array:
    """(nefc,) efc_force at acceleration `qacc`."""
    return row_terms(cfg, p, _mv(p.J, qacc) - p.aref)[0]


# Up to this many multiply-adds (nefc·nv²) the Hessian is summed elementwise, above it a dot.
_HESSIAN_ELEMENTWISE_MAX = 1 << 16


def _runs(idx: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) of the runs of consecutive values in static increasing `idx`."""
    breaks = np.flatnonzero(np.diff(idx) != 1) + 1
    return [(int(r[0]), int(r[-1]) + 1) for r in np.split(idx, breaks)]


def _take(x: jax.Array, idx: np.ndarray) -> jax.Array:
    """x[idx] for static increasing `idx`, as slices of its runs (a gather did not fuse)."""
    parts = [x[a:b] for a, b in _runs(idx)]
    return parts[0] if len(parts) == 1 else jnp.concatenate(parts)


# Up to this many rows per sum the Hessian's terms are added as a tree of additions rather than
# reduced (see `_hessian`); more would make one very large kernel.
_HESSIAN_UNROLL_MAX_ROWS = 32


def _sum_rows(n: int, term: Callable[[int], jax.Array], terms: Callable[[], jax.Array]) -> jax.Array:
    """Σ_k term(k) over k < n, added pairwise for small n; else `terms()` (all n stacked) reduced."""
    if n > _HESSIAN_UNROLL_MAX_ROWS:
        return jnp.sum(terms(), axis=0)
    parts = [term(k) for k in range(n)]
    while len(parts) > 1:
        parts = [parts[i] + parts[i + 1] if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
    return parts[0]


def _hessian(cfg: Config, p: Problem, quad: jax.Array) -> jax.Array:
    """(nv, nv) H = M + Jᵀ diag(D on quadratic rows) J."""
    w = jnp.where(quad, p.D, 0.0)
    nefc, nv = p.J.shape
    if nefc * nv * nv > _HESSIAN_ELEMENTWISE_MAX:
        return p.M + jnp.matmul(p.J.T * w[None, :], p.J, precision=_HI)
    out: jax.Array = _hessian_sum_fn(cfg.row_dof if cfg.row_dof is not None else (-1,) * nefc)(p.M, p.J, w)
    return out


def _hessian_sum(row_dof: tuple[int, ...], m: jax.Array, j: jax.Array, w: jax.Array) -> jax.Array:
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
        hess = linalg.add_diagonal(hess, _sum_rows(len(single), lambda k: ws[k][None] * sq[k],
                                                   lambda: ws[:, None] * sq), batch_last=True)
    if len(several):
        jm = _take(j, several)
        jw = jm * _take(w, several)[:, None]
        hess = hess + _sum_rows(len(several), lambda k: jw[k][:, None] * jm[k][None, :],
                                lambda: jw[:, :, None] * jm[:, None, :])
    return hess


@functools.cache
def _hessian_sum_fn(row_dof: tuple[int, ...]) -> custom_batching.custom_vmap:
    """`_hessian_sum` of one problem; under vmap, of the batch with the batch as the minor axis.

    Batch-first, XLA's fused loop over a batch of Hessians runs along a matrix row (nv entries,
    each term a broadcast of one row's entry); batch-last, an entry is a SIMD loop over the batch
    with each term's operands contiguous. Where XLA fuses part of the sum into a consumer (the copy
    that lays out LAPACK's operand took the humanoid's several-dof rows), that kernel's loop order
    decides for that part (profile in CHANGELOG.md). The same products and the same tree of
    additions in either layout, so the same numbers.
    """

    @custom_batching.custom_vmap
    def hessian(m: jax.Array, j: jax.Array, w: jax.Array) -> jax.Array:
        # traced when lowered: under vmap (the Newton solve's case) the rule replaces it
        return platforms.defer(functools.partial(_hessian_sum, row_dof), m, j, w, like=0)

    @hessian.def_vmap
    def _(axis_size: int, in_batched: list[bool], m: jax.Array, j: jax.Array,
          w: jax.Array) -> tuple[jax.Array, bool]:
        m, j, w = (jnp.moveaxis(x, 0, -1) for x in linalg.batch_front(axis_size, in_batched, m, j, w))
        return jnp.moveaxis(_hessian_sum(row_dof, m, j, w), -1, 0), True

    return hessian


class _Eval(NamedTuple):
    cost: jax.Array
    grad: jax.Array
    quad: jax.Array
    gscale: jax.Array  # magnitude of the gradient's terms (roundoff floor)


def _evaluate(cfg: Config, p: Problem, x: jax.Array, ma: jax.Array, jar: jax.Array) -> _Eval:
    f, c, quad = row_terms(cfg, p, jar)
    jtf = _mv(p.J.T, f)
    cost = 0.5 * jnp.dot(x - p.qacc_smooth, ma - p.qfrc_smooth, precision=_HI) + jnp.sum(c)
    grad = ma - p.qfrc_smooth - jtf
    gscale = jnp.linalg.norm(ma) + jnp.linalg.norm(p.qfrc_smooth) + jnp.linalg.norm(jtf)
    return _Eval(cost, grad, quad, gscale)


# Up to this many rows the line search tabulates φ' at every kink against every row ((nkink, nefc)
# work, all of it parallel), faster than sorting the kinks for the model sizes of the locomotion
# suite; above it (thousands of contact slots) the table's memory and time grow as nefc², and the
# sorted kinks with running sums take over (CHANGELOG.md).
LINE_SEARCH_TABLE_MAX_ROWS = 256


def _line_search_exact(cfg: Config, p: Problem, ma: jax.Array, jar: jax.Array, d: jax.Array, md: jax.Array,
                       jd: jax.Array) -> jax.Array:
    """Exact minimizer α ≥ 0 of the 1-D piecewise-quadratic cost along d (MuJoCo's line search
    converged), by a kink table for small problems and sorted kinks for large ones."""
    if len(cfg.is_floss) <= LINE_SEARCH_TABLE_MAX_ROWS:
        return _line_search_table(cfg, p, ma, jar, d, md, jd)
    return _line_search_sorted(cfg, p, ma, jar, d, md, jd)


def _line_search_table(cfg: Config, p: Problem, ma: jax.Array, jar: jax.Array, d: jax.Array, md: jax.Array,
                       jd: jax.Array) -> jax.Array:
    """`_line_search_sorted`'s minimizer from a table of φ' at every kink (small problems).

    φ'(α) is piecewise linear and nondecreasing, with kinks where a row changes zone. Evaluating
    φ' at every kink (a (nkink, nefc) product) brackets the zero between two consecutive kinks,
    where φ' is linear: the zero is then found exactly by interpolation (or, beyond the last kink,
    from the slope of the last piece).
    """
    dmd = jnp.dot(d, md, precision=_HI)
    glin = jnp.dot(ma - p.qfrc_smooth, d, precision=_HI)
    moving = jd != 0
    jd_safe = jnp.where(moving, jd, 1.0)
    kinked = moving & ~jnp.asarray(cfg.is_eq) if any(cfg.is_eq) else moving  # equality rows have none
    kinks = [jnp.where(kinked, -jar / jd_safe, 0.0)]  # unilateral rows: jar + α jd = 0
    if any(cfg.is_floss):
        isf = jnp.asarray(cfg.is_floss)
        for s in (1.0, -1.0):  # Huber rows: |jar + α jd| = R floss
            kinks.append(jnp.where(moving & isf, (s * p.R * p.floss - jar) / jd_safe, 0.0))
    alpha = jnp.concatenate([jnp.zeros(1, d.dtype), *kinks])
    alpha = jnp.maximum(alpha, 0.0)  # kinks behind the start do not matter (φ'(0) < 0 there)
    jar_k = jar[None, :] + alpha[:, None] * jd[None, :]  # (nkink, nefc)
    big = Problem(p.M, p.qfrc_smooth, p.qacc_smooth, p.J, p.D[None, :], p.R[None, :], p.aref,
                  p.floss[None, :])
    f_k = row_terms(cfg, big, jar_k)[0]
    slope = glin + alpha * dmd - jnp.matmul(f_k, jd, precision=_HI)  # φ'(α_k)
    neg = slope < 0
    a_lo = jnp.max(jnp.where(neg, alpha, 0.0))
    s_lo = jnp.min(jnp.where(neg & (alpha == a_lo), slope, jnp.inf))
    s_lo = jnp.where(jnp.isfinite(s_lo), s_lo, 0.0)
    a_hi = jnp.min(jnp.where(neg, jnp.inf, alpha))
    s_hi = jnp.max(jnp.where(~neg & (alpha == a_hi), slope, -jnp.inf))
    bounded = jnp.isfinite(a_hi)
    # beyond the last kink: rows that stay in their quadratic zone as α grows
    _, _, quad_far = row_terms(cfg, p, jar + (a_lo + 1.0 + 2.0 * a_lo) * jd)
    far = dmd + jnp.sum(jnp.where(quad_far, p.D, 0.0) * jd * jd)
    width = jnp.where(bounded, a_hi - a_lo, 0.0)
    rise = jnp.where(bounded, s_hi - s_lo, 1.0)
    step = jnp.where(bounded, -s_lo * width / jnp.where(rise > 0, rise, 1.0), -s_lo / jnp.maximum(far, 1e-30))
    return jnp.where(slope[0] < 0, a_lo + step, 0.0)  # no descent: stay




def _line_search_sorted(cfg: Config, p: Problem, ma: jax.Array, jar: jax.Array, d: jax.Array, md: jax.Array,
                       jd: jax.Array) -> jax.Array:
    """Exact minimizer α ≥ 0 of the 1-D piecewise-quadratic cost along d, without a loop.

    φ'(α) = glin + α dᵀMd − Σ_i f_i(jar_i + α jd_i) jd_i is piecewise linear and nondecreasing: each
    row adds c_i + s_i α, with coefficients that change where the row changes zone (a kink). The
    kinks ahead (α > 0), sorted, with the running sums of their coefficient changes, give φ' at
    every kink in O(nefc log nefc) time and O(nefc) memory; the zero lies between the last kink with
    φ' < 0 and the next one, where φ' is linear, so interpolation finds it exactly (beyond the last
    kink, the last piece's slope does).
    """
    dmd = jnp.dot(d, md, precision=_HI)
    glin = jnp.dot(ma - p.qfrc_smooth, d, precision=_HI)
    D, R, floss = p.D, p.R, p.floss
    moving = jd != 0
    jd_safe = jnp.where(moving, jd, 1.0)
    qc, qs = D * jd * jar, D * jd * jd  # quadratic zone: −f·jd = D jd (jar + α jd)
    # zones at α = 0: 0 unilateral inactive, 1 quadratic, 2 / 3 friction loss above / below its box
    f0, _, quad0 = _scalar_row_terms(cfg, p, jar)
    zone0 = jnp.where(quad0, 1, 0)
    c0 = jnp.where(quad0, qc, -f0 * jd)
    s0 = jnp.where(quad0, qs, 0.0)
    uni = moving
    if any(cfg.is_eq):
        uni = uni & ~jnp.asarray(cfg.is_eq)  # equality rows: quadratic everywhere, no kinks
    alphas, dcs, dss, befores = [], [], [], []
    if any(cfg.is_floss):
        isf = jnp.asarray(cfg.is_floss)
        zone0 = jnp.where(isf & ~quad0, jnp.where(jar > 0, 2, 3), zone0)
        uni = uni & ~isf
        up = jd > 0
        fl = floss * jd  # upper zone −f·jd with f = −floss; the lower zone's is −fl
        rf = R * floss
        # jar + α jd = +R floss: quadratic -> upper going up, upper -> quadratic going down
        alphas.append(jnp.where(moving & isf, (rf - jar) / jd_safe, jnp.inf))
        dcs.append(jnp.where(up, fl - qc, qc - fl))
        dss.append(jnp.where(up, -qs, qs))
        befores.append(jnp.where(up, 1, 2))
        # jar + α jd = −R floss: lower -> quadratic going up, quadratic -> lower going down
        alphas.append(jnp.where(moving & isf, (-rf - jar) / jd_safe, jnp.inf))
        dcs.append(jnp.where(up, qc + fl, -fl - qc))
        dss.append(jnp.where(up, qs, -qs))
        befores.append(jnp.where(up, 3, 1))
    # unilateral rows, jar + α jd = 0: quadratic ahead when jd < 0 (entering), behind when jd > 0
    enter = jd < 0
    alphas.append(jnp.where(uni, -jar / jd_safe, jnp.inf))
    dcs.append(jnp.where(enter, qc, -qc))
    dss.append(jnp.where(enter, qs, -qs))
    befores.append(jnp.where(enter, 0, 1))
    zone0_all = jnp.concatenate([zone0] * len(alphas))
    alpha = jnp.concatenate(alphas)
    before = jnp.concatenate(befores)
    ahead = (alpha > 0) | ((alpha == 0) & (before == zone0_all))  # a kink at 0 counts if not passed yet
    alpha = jnp.where(ahead, alpha, jnp.inf)
    order = jnp.argsort(alpha)
    alpha = alpha[order]
    finite = jnp.isfinite(alpha)
    dc = jnp.where(finite, jnp.concatenate(dcs)[order], 0.0)
    ds = jnp.where(finite, jnp.concatenate(dss)[order], 0.0)
    C = jnp.sum(c0) + jnp.cumsum(dc)  # coefficients just after each kink
    S = dmd + jnp.sum(s0) + jnp.cumsum(ds)
    a_k = jnp.where(finite, alpha, 0.0)
    slope = glin + C + a_k * S  # φ'(α_k)
    slope0 = glin + jnp.sum(c0)
    nonneg = finite & (slope >= 0)
    k = jnp.argmax(nonneg)  # first kink with φ' >= 0 (slopes rise along the sorted kinks)
    bounded = nonneg[k]
    last = jnp.sum(finite, dtype=jnp.int32) - 1
    lo = jnp.where(bounded, k - 1, last)  # last kink before the zero (-1: the start)
    a_lo = jnp.where(lo >= 0, a_k[jnp.maximum(lo, 0)], 0.0)
    s_lo = jnp.where(lo >= 0, slope[jnp.maximum(lo, 0)], slope0)
    far = jnp.where(lo >= 0, S[jnp.maximum(lo, 0)], dmd + jnp.sum(s0))  # φ'' after the last kink before
    a_hi, s_hi = a_k[k], slope[k]
    width = jnp.where(bounded, a_hi - a_lo, 0.0)
    rise = jnp.where(bounded, s_hi - s_lo, 1.0)
    step = jnp.where(bounded, -s_lo * width / jnp.where(rise > 0, rise, 1.0), -s_lo / jnp.maximum(far, 1e-30))
    return jnp.where(slope0 < 0, a_lo + step, 0.0)  # no descent: stay


def _line_search_cone(cfg: Config, p: Problem, ma: jax.Array, jar: jax.Array, d: jax.Array, md: jax.Array,
                      jd: jax.Array, scale_tol: jax.Array) -> jax.Array:
    """Minimizer α ≥ 0 of the 1-D cost along d when cones make it piecewise smooth, not quadratic.

    φ is convex: Newton steps on φ' from α = 0 (as MuJoCo's PrimalSearch), each kept inside the
    bracket of the points seen with φ' < 0 and φ' > 0 (bisection otherwise), until |φ'| is below
    MuJoCo's line-search tolerance or `ls_iterations` evaluations.
    """
    dmd = jnp.dot(d, md, precision=_HI)
    glin = jnp.dot(ma - p.qfrc_smooth, d, precision=_HI)

    def deriv(alpha: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        jar_a = jar + alpha * jd
        f, _, quad = row_terms(cfg, p, jar_a)
        fjd = f * jd
        d1 = glin + alpha * dmd - jnp.sum(fjd)
        d2 = dmd + jnp.sum(jnp.where(quad, p.D, 0.0) * jd * jd) + _cone_curvature(cfg, p, jar_a, jd)
        mag = jnp.abs(glin) + jnp.abs(alpha * dmd) + jnp.sum(jnp.abs(fjd))
        return d1, jnp.maximum(d2, 1e-30), mag

    gtol = cfg.tolerance * cfg.ls_tolerance * jnp.linalg.norm(d) * scale_tol

    def converged(d1: jax.Array, mag: jax.Array) -> jax.Array:
        small: jax.Array = jnp.abs(d1) <= jnp.maximum(gtol, _REL_GRAD * mag)
        return small

    zero = jnp.zeros((), d.dtype)
    d1, d2, mag = deriv(zero)
    Carry = tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array, jax.Array, jax.Array]

    def cond(c: Carry) -> jax.Array:
        it, _, _, _, _, _, done = c
        return (it < cfg.ls_iterations) & ~done

    def body(c: Carry) -> Carry:
        it, lo, hi, a, d1, d2, _ = c
        step = a - d1 / d2
        bounded = jnp.isfinite(hi)
        inside = (step > lo) & (~bounded | (step < hi))
        a_new = jnp.where(inside, step, 0.5 * (lo + jnp.where(bounded, hi, lo)))
        d1n, d2n, magn = deriv(a_new)
        lo = jnp.where(d1n < 0, a_new, lo)
        hi = jnp.where(d1n > 0, a_new, hi)
        done = converged(d1n, magn) | (hi - lo <= 1e-6 * jnp.abs(hi))
        return it + 1, lo, hi, a_new, d1n, d2n, done

    start = (jnp.zeros((), jnp.int32), zero, jnp.full((), jnp.inf, d.dtype), zero, d1, d2,
             (d1 >= 0) | converged(d1, mag))
    _, lo, _, a, d1, _, done = jax.lax.while_loop(cond, body, start)
    # a search out of iterations keeps the last point known to lie before the minimum
    return jnp.where(done | (d1 <= 0), a, lo)


class _Iterate(NamedTuple):
    """Newton loop state of one problem."""

    it: jax.Array  # () int32 iterations taken
    done: jax.Array  # () bool: a stopping test fired
    x: jax.Array  # (nv,) qacc
    ma: jax.Array  # (nv,) M x
    jar: jax.Array  # (nefc,) J x - aref
    ev: _Eval


def scale_tol(p: Problem) -> jax.Array:
    """What MuJoCo divides the cost improvement and the gradient norm by: trace(M), M at run time."""
    # MuJoCo 4.0.0 divides by the diagonal sum of M over an island's dofs (over all dofs with
    # islands disabled); it reads no stat.meaninertia. This solve is one problem over all dofs: the
    # whole trace is MuJoCo's scale when one island spans every dof, or with islands disabled.
    return jnp.sum(linalg.diagonal(p.M), axis=-1)


def _grad_small(cfg: Config, e: _Eval, scale_tol: jax.Array) -> jax.Array:
    gn = jnp.linalg.norm(e.grad)
    small: jax.Array = (gn < cfg.tolerance * scale_tol) | (gn <= _REL_GRAD * e.gscale)
    return small


def _start(cfg: Config, p: Problem, x_warm: jax.Array) -> _Iterate:
    """Loop state at qacc_smooth, or at the warm start when that costs less (MuJoCo's rule)."""

    def at(x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, _Eval]:
        ma = _mv(p.M, x)
        jar = _mv(p.J, x) - p.aref
        return x, ma, jar, _evaluate(cfg, p, x, ma, jar)

    x, ma, jar, ev = at(p.qacc_smooth)
    if cfg.warmstart:
        warm = at(x_warm)
        use = warm[3].cost < ev.cost
        x, ma, jar, ev = jax.tree.map(lambda a, b: jnp.where(use, a, b), warm, (x, ma, jar, ev))
    done = _grad_small(cfg, ev, scale_tol(p))
    return _Iterate(jnp.zeros((), jnp.int32), done, x, ma, jar, ev)


def _running(cfg: Config, s: _Iterate) -> jax.Array:
    """Whether the loop takes another Newton iteration."""
    return (s.it < cfg.iterations) & ~s.done


def _iterate(cfg: Config, p: Problem, s: _Iterate) -> _Iterate:
    """One Newton iteration: direction from the Hessian, exact line search, stopping tests."""
    hess = _hessian(cfg, p, s.ev.quad)
    if cfg.cones:
        hess = hess + _cone_hessian(cfg, p, s.jar)
    d = -linalg.spd_solve(hess, s.ev.grad)
    md, jd = _mv(p.M, d), _mv(p.J, d)
    if cfg.cones:
        alpha = _line_search_cone(cfg, p, s.ma, s.jar, d, md, jd, scale_tol(p))
    else:
        alpha = _line_search_exact(cfg, p, s.ma, s.jar, d, md, jd)
    x, ma, jar = s.x + alpha * d, s.ma + alpha * md, s.jar + alpha * jd
    new = _evaluate(cfg, p, x, ma, jar)
    drop = s.ev.cost - new.cost
    stol = scale_tol(p)
    small = (drop < cfg.tolerance * stol) | (drop <= _REL_COST * jnp.abs(new.cost))
    return _Iterate(s.it + 1, small | _grad_small(cfg, new, stol), x, ma, jar, new)


# The start and the iteration, traced once per settings and problem shapes: every program of a
# process that solves the same problems (a training run's chunk and evaluation, at any batch) gets
# the same jaxpr from jit's trace cache (inlined, so the program is as if traced in place). A
# module setting read while tracing them (the Hessian's and line search's row limits) reaches
# programs traced after `jax.clear_caches()`, as for any jitted function reading a global.
_start_traced = jax.jit(_start, static_argnums=0, inline=True)
_iterate_traced = jax.jit(_iterate, static_argnums=0, inline=True)


def _newton_loop(cfg: Config, p: Problem, x_warm: jax.Array) -> jax.Array:
    """(nv,) qacc of one problem: Newton iterations until a stopping test fires."""
    s: _Iterate = jax.lax.while_loop(functools.partial(_running, cfg), lambda s: _iterate_traced(cfg, p, s),
                                     _start_traced(cfg, p, x_warm))
    return s.x


# Under vmap with at least this many problems the loop runs on a work queue (`_newton_queued`).
QUEUE_MIN_BATCH = 64
# Slots of the work queue (`queue_slots`): more slots take fewer trips but iterate more empty or
# converged slots per trip, each costing a factor of the Hessian, so the best count grows more
# slowly than the batch: a quarter of a small batch, up to QUEUE_MIN_SLOTS, then batch /
# QUEUE_SLOT_FRACTION (A/B on ant and humanoid from 64 to 4096 envs, CHANGELOG.md). For models of
# up to `linalg.UNROLL_MAX_N` dofs, fewer than 128 slots also keep the Newton solve on LAPACK's
# factor rather than the column form, which compiles faster.
QUEUE_SMALL_FRACTION = 4
QUEUE_MIN_SLOTS = 16
QUEUE_SLOT_FRACTION = 16
# Platforms whose programs use the work queue (`platforms.choose`; the others run the plain
# vmapped loop). The queue trades trips for work: it spreads the batch's iterations over fewer
# slots than problems, so it takes more trips than the plain loop's slowest problem. A CPU's time follows
# the work; a GPU's step at RL batch sizes follows its kernel launches and each trip's host
# synchronization, so there the plain loop's fewer trips win (measured on an H200, CHANGELOG.md).
QUEUE_PLATFORMS: tuple[str, ...] = ("cpu",)


def queue_slots(batch: int) -> int:
    """Slots of the work queue for `batch` problems."""
    return max(1, min(batch // QUEUE_SMALL_FRACTION, QUEUE_MIN_SLOTS), batch // QUEUE_SLOT_FRACTION)


def _newton_queued(cfg: Config, p: Problem, x_warm: jax.Array, slots: int) -> jax.Array:
    """(B, nv) qacc of a batch of problems (leading axis B), iterating only the unconverged ones.

    A vmapped while loop runs every problem for as many iterations as the slowest one needs, while
    a typical problem needs far fewer (many stop at the warm start), so most of that work is wasted.
    Here a fixed number of slots each hold one unconverged problem;
    every trip runs one Newton iteration on all slots, writes out the problems that stopped and
    refills their slots from the queue of pending ones. Each problem takes exactly the iterations
    it would take alone, so the results are those of the per-problem loop; the work is about the
    total iteration count, not batch size times the maximum. The slots' problems are loop state
    beside their iterates: the refill writes a new problem's data into its slot (a gather and a
    select over the slots each trip, as for the iterates), and the iteration reads the slots'
    copies instead of gathering every slot's problem from the batch (measured faster, same values).
    """
    n = x_warm.shape[0]
    s0 = jax.vmap(functools.partial(_start_traced, cfg))(p, x_warm)
    pending = jax.vmap(functools.partial(_running, cfg))(s0)
    order = jnp.argsort(jnp.where(pending, 0, 1), stable=True)  # pending problems first
    n_pending = jnp.sum(pending, dtype=jnp.int32)

    def select(mask: jax.Array, a: jax.Array, b: jax.Array) -> jax.Array:
        return jnp.where(mask.reshape(mask.shape + (1,) * (a.ndim - 1)), a, b)

    Slot = tuple[_Iterate, Problem]  # the slots' iterates and problems

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
        it = jax.vmap(functools.partial(_iterate_traced, cfg))(ps, it)
        active = sidx < n
        finished = active & ~jax.vmap(functools.partial(_running, cfg))(it)
        x_out = x_out.at[jnp.where(finished, sidx, n)].set(it.x, mode="drop")
        slot = (it, ps)
        sidx, slot, ptr = refill(sidx, slot, ptr, finished | ~active)
        return x_out, sidx, slot, ptr

    empty = jnp.full((slots,), n, jnp.int32)
    sidx, slot, ptr = refill(empty, jax.tree.map(lambda a: a[:slots], (s0, p)), jnp.zeros((), jnp.int32),
                             jnp.ones((slots,), bool))
    out: jax.Array = jax.lax.while_loop(lambda c: jnp.any(c[1] < n), body, (s0.x, sidx, slot, ptr))[0]
    return out


@functools.cache
def _newton_fn(cfg: Config) -> custom_batching.custom_vmap:
    """The Newton solve for settings `cfg`: a per-problem loop (also for a vmap of one problem), and
    under vmap the work queue or the plain vmapped loop."""

    @custom_batching.custom_vmap
    def newton(p: Problem, x_warm: jax.Array) -> jax.Array:
        # traced when lowered: under vmap the rule below replaces it, and its loop is not traced
        return platforms.defer(functools.partial(_newton_loop, cfg), p, x_warm)

    @newton.def_vmap
    def _(axis_size: int, in_batched: list[object], p: Problem, x_warm: jax.Array) -> tuple[jax.Array, bool]:
        def full(a: jax.Array, batched: bool) -> jax.Array:
            return a if batched else jnp.broadcast_to(a, (axis_size, *a.shape))

        p, x_warm = jax.tree.map(full, (p, x_warm), tuple(in_batched))
        if axis_size == 1:  # one problem (a single env under vmap): its loop, without a batched one's selects
            one_p, one_x = jax.tree.map(lambda a: a[0], (p, x_warm))
            return _newton_loop(cfg, one_p, one_x)[None], True
        plain = jax.vmap(functools.partial(_newton_loop, cfg))
        if axis_size < QUEUE_MIN_BATCH or x_warm.ndim != 2 or not QUEUE_PLATFORMS:
            return plain(p, x_warm), True  # small batches: the plain vmapped loop
        queued = functools.partial(_newton_queued, cfg, slots=queue_slots(axis_size))
        return platforms.choose(plain, dict.fromkeys(QUEUE_PLATFORMS, queued), p, x_warm), True

    return newton


# Row compaction. Rows MuJoCo would not instantiate (D = 0) add nothing to the cost, gradient,
# Hessian or line search, but a dense solve pays for every slot (the Hessian is nefc·nv², the line
# search's kink table nefc²), and models with many contact slots have few active (dm_control's
# quadruped: a few dozen of its contact rows at a time, see CHANGELOG.md). So the solve runs on the
# active units of each group gathered into a budget of static size when they fit it (under vmap
# when they fit in every problem of the batch: an unbatched `lax.switch` on the batch's largest
# count), and on all rows otherwise. Results are those of the full solve up to float32 summation
# order. Each budget tier compiles one more Newton solve: one tier measured as fast as two at a
# fraction of the compile time (CHANGELOG.md).

# A group's budget: 1/COMPACT_FRACTION of its units, at least COMPACT_MIN_UNITS, and only where
# that is at most half the group. Huge groups (thousands of contact slots, as dm_control's dog) hold
# far more slots than active contacts (what touches, not what could), so their budget is
# COMPACT_BASE + 1/COMPACT_LARGE_FRACTION of the units where that is smaller. A step whose active
# units exceed the budget still gets the exact full solve.
COMPACT_FRACTION = 8
COMPACT_MIN_UNITS = 32
COMPACT_BASE = 256
COMPACT_LARGE_FRACTION = 64


class _Compaction(NamedTuple):
    """Static plan of the compacted solves of one `Config` (trace-time only)."""

    head: np.ndarray  # (nhead,) rows outside every group, always kept
    units: tuple[np.ndarray, ...]  # per group: (nunit, size) rows of each unit
    budgets: tuple[tuple[int, ...], ...]  # per tier: units kept of each group
    configs: tuple[Config, ...]  # per tier: the compact problem's settings


def _tier_budgets(nunit: int) -> list[int]:
    """Units kept per tier for a group of `nunit` units (increasing; empty: never compact)."""
    large = COMPACT_BASE + -(-nunit // COMPACT_LARGE_FRACTION)
    b = max(COMPACT_MIN_UNITS, min(-(-nunit // COMPACT_FRACTION), large))
    return [b] if 2 * b <= nunit else []


@functools.lru_cache(maxsize=64)
def _compaction(cfg: Config) -> _Compaction | None:
    """The tiers of compact problems for `cfg`, or None when no group is worth compacting."""
    if not cfg.compact:
        return None
    units = tuple(np.asarray(g, np.int32).reshape(len(g), -1) for g in cfg.compact)
    per_group = [_tier_budgets(u.shape[0]) for u in units]
    ntier = max(len(b) for b in per_group)
    if ntier == 0:
        return None
    # groups with fewer tiers keep all their units in the later tiers
    budgets = tuple(tuple(b[t] if t < len(b) else u.shape[0] for b, u in zip(per_group, units, strict=True))
                    for t in range(ntier))
    grouped = np.concatenate([u.reshape(-1) for u in units])
    nefc = len(cfg.is_floss)
    head = np.setdiff1d(np.arange(nefc), grouped).astype(np.int32)
    is_floss, is_eq = np.asarray(cfg.is_floss, bool), np.asarray(cfg.is_eq or (False,) * nefc, bool)
    if is_floss[grouped].any() or is_eq[grouped].any():
        raise ValueError("solver.Config.compact: friction-loss and equality rows cannot be compacted")
    cone_set = set(cfg.cones)
    for u in units:
        for unit in u:
            if len(unit) > 1 and tuple(int(r) for r in unit) not in cone_set:
                raise ValueError(f"solver.Config.compact: unit {tuple(unit)} of several rows is not a cone")
    head_pos = {int(r): i for i, r in enumerate(head)}
    head_cones = tuple(tuple(head_pos[r] for r in c) for c in cfg.cones if all(r in head_pos for r in c))
    configs = []
    for tier in budgets:
        n, cones = len(head), list(head_cones)
        for u, b in zip(units, tier, strict=True):
            size = u.shape[1]
            if size > 1:
                cones += [tuple(range(n + k * size, n + (k + 1) * size)) for k in range(b)]
            n += b * size
        configs.append(cfg._replace(
            is_floss=tuple(bool(f) for f in is_floss[head]) + (False,) * (n - len(head)),
            is_eq=tuple(bool(e) for e in is_eq[head]) + (False,) * (n - len(head)) if cfg.is_eq else (),
            cones=tuple(cones), compact=(),
            # the units' rows change from step to step: they count as reaching several dofs
            row_dof=None if cfg.row_dof is None else
            tuple(cfg.row_dof[int(r)] for r in head) + (-1,) * (n - len(head))))
    return _Compaction(head, units, budgets, tuple(configs))


def _unit_active(plan: _Compaction, p: Problem) -> list[jax.Array]:
    """Per group: (nunit,) bool, units with an instantiated row."""
    return [jnp.any(p.D[u] != 0, axis=1) for u in plan.units]


def _tier(plan: _Compaction, p: Problem) -> jax.Array:
    """() int32 smallest tier whose budgets hold the active units (len(budgets): none does)."""
    counts = jnp.stack([jnp.sum(a, dtype=jnp.int32) for a in _unit_active(plan, p)])
    caps = jnp.asarray(plan.budgets, jnp.int32)  # (ntier, ngroup)
    return jnp.sum(jnp.any(counts[None, :] > caps, axis=1), dtype=jnp.int32)


def _gather(plan: _Compaction, tier: int, p: Problem) -> Problem:
    """The compact problem of tier `tier`: the head rows, then each group's first active units (padded
    with inactive ones when fewer), in their original order."""
    idx = [jnp.asarray(plan.head)]
    for u, a, b in zip(plan.units, _unit_active(plan, p), plan.budgets[tier], strict=True):
        pick = jnp.argsort(~a, stable=True)[:b]
        idx.append(jnp.asarray(u)[pick].reshape(-1))
    rows = jnp.concatenate(idx)
    return p._replace(J=p.J[rows], D=p.D[rows], R=p.R[rows], aref=p.aref[rows], floss=p.floss[rows],
                      mu=None if p.mu is None else p.mu[rows])


@functools.cache
def _compact_newton_fn(cfg: Config) -> custom_batching.custom_vmap:
    """The Newton solve for `cfg` on the smallest compact problem that holds the active rows."""
    plan = _compaction(cfg)
    full = _newton_fn(cfg)
    if plan is None:
        return full
    smalls = [_newton_fn(c) for c in plan.configs]

    def solve_tier(t: int) -> Callable[[Problem, jax.Array], jax.Array]:
        return lambda p, x: smalls[t](_gather(plan, t, p), x)

    def switch(p: Problem, x_warm: jax.Array) -> jax.Array:
        branches = [solve_tier(t) for t in range(len(smalls))] + [full]
        out: jax.Array = jax.lax.switch(_tier(plan, p), branches, p, x_warm)
        return out

    @custom_batching.custom_vmap
    def newton(p: Problem, x_warm: jax.Array) -> jax.Array:
        return platforms.defer(switch, p, x_warm)  # as `_newton_fn`'s

    @newton.def_vmap
    def _(axis_size: int, in_batched: list[object], p: Problem, x_warm: jax.Array) -> tuple[jax.Array, bool]:
        def bcast(a: jax.Array, batched: bool) -> jax.Array:
            return a if batched else jnp.broadcast_to(a, (axis_size, *a.shape))

        p, x_warm = jax.tree.map(bcast, (p, x_warm), tuple(in_batched))
        if x_warm.ndim != 2:  # nested batching: a batched tier index would run every branch
            return jax.vmap(full)(p, x_warm), True
        branches = [jax.vmap(solve_tier(t)) for t in range(len(smalls))] + [jax.vmap(full)]
        tier = jnp.max(jax.vmap(functools.partial(_tier, plan))(p))  # unbatched: one branch runs
        return jax.lax.switch(tier, branches, p, x_warm), True

    return newton


def _newton(cfg: Config, p: Problem, x_warm: jax.Array) -> jax.Array:
    out: jax.Array = _compact_newton_fn(cfg)(p, x_warm)
    return out


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def solve(cfg: Config, p: Problem, x_warm: jax.Array) -> jax.Array:
    """(nv,) constrained acceleration qacc minimizing the primal cost (see the module docstring)."""
    return _newton(cfg, p, x_warm)


def _solve_fwd(cfg: Config, p: Problem,
               x_warm: jax.Array) -> tuple[jax.Array, tuple[jax.Array, Problem, jax.Array]]:
    x = _newton(cfg, p, x_warm)
    return x, (x, p, x_warm)


def _solve_bwd(cfg: Config, res: tuple[jax.Array, Problem, jax.Array],
               xbar: jax.Array) -> tuple[Problem, jax.Array]:
    x, p, x_warm = res
    jar = _mv(p.J, x) - p.aref
    _, _, quad = row_terms(cfg, p, jar)
    hess = _hessian(cfg, p, quad)
    if cfg.cones:
        hess = hess + _cone_hessian(cfg, p, jar)
    w = linalg.spd_solve(hess, xbar)

    def optimality(q: Problem) -> jax.Array:  # g(x*, θ); qacc_smooth enters only via qfrc_smooth
        f = row_terms(cfg, q, _mv(q.J, x) - q.aref)[0]
        return _mv(q.M, x) - q.qfrc_smooth - _mv(q.J.T, f)

    _, vjp = jax.vjp(optimality, p)
    (pbar,) = vjp(-w)
    pbar = pbar._replace(qacc_smooth=jnp.zeros_like(p.qacc_smooth))
    return pbar, jnp.zeros_like(x_warm)


solve.defvjp(_solve_fwd, _solve_bwd)
