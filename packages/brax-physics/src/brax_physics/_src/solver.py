"""MuJoCo's constraint solver: the primal problem over qacc, solved by Newton's method or CG.

    min_x  ½ (x − qacc_smooth)ᵀ M (x − qacc_smooth) + Σ_i s_i(J_i x − aref_i)

with s_i the soft-constraint cost of row i (MuJoCo documentation, Computation: Constraint solver,
Reduced primal problem): ½ D jar² on both sides for equality rows, on the violated side for limits
and pyramidal contact edges, a Huber function for friction loss, and the three-zone cone cost of
elliptic contacts. The solve is MuJoCo's at any budget (engine_solver.c's mj_solPrimal), since at
the 1-4 iterations of training scenes the result is wherever the solver stops:
- the start is the warm start (the previous step's qacc; zero after a reset) or qacc_smooth,
  whichever costs less over the whole problem (`warmstart` flag);
- the problem splits into islands (`island.py`), each solved as MuJoCo solves it: its own
  iteration count, stopping tests scaled by 1/trace of its M, and line search; dofs outside every
  island take qacc_smooth;
- Newton's direction solves the Hessian M + Jᵀ diag(D on quadratic rows) J (+ cone blocks); CG's is
  M⁻¹ grad with Hager-Zhang conjugacy;
- the line search is MuJoCo's PrimalSearch: a Newton step on the 1-D cost, a one-sided Newton
  search, then a bracketed search of Newton points and midpoints, within `ls_iterations`
  evaluations and to the slope tolerance `tolerance·ls_tolerance`;
- an island stops on MuJoCo's rules: no improvement, scaled improvement or gradient below
  `tolerance`, Newton decrement below it, or `iterations`.
Verified in float64 against MuJoCo C's own constraint problems (solver_budget_test.py); float32
runs add floors below which improvements and slopes are roundoff.

Batches: under `vmap` a plain while loop would run every problem for the batch's largest iteration
count; from a batch size on (the `Lowering` settings), on a CPU, a work queue instead iterates
only the unconverged ones (`lowering.newton`), each for exactly the iterations it takes alone.

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
from typing import Final, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import custom_batching

from brax_physics._src import linalg
from brax_physics._src.lowering import newton
from brax_physics._src.lowering.settings import DEFAULT, Lowering

_HI: Final = jax.lax.Precision.HIGHEST

# A floor on MuJoCo's (double precision) gradient and line-search slope tests, in units of the
# dtype's epsilon: below this relative size (~1e-5 in float32) they are roundoff, and MuJoCo's
# absolute tests would never fire. (Its improvement and decrement tests need none: a converged
# float32 search finds no improvement, which ends the island.) CG's linear convergence makes small
# steps that are not yet roundoff: its floor is lower (measured against MuJoCo's CG on a sliding box).
_REL_GRAD_EPS: Final = 100.0
_CG_FLOOR: Final = 0.01


def _rel_grad(x: jax.Array, cfg: Config | None = None) -> float:
    return _REL_GRAD_EPS * float(np.finfo(x.dtype).eps) * (_CG_FLOOR if cfg and not cfg.newton else 1.0)


class Config(NamedTuple):
    """Static solver settings (hashable)."""

    is_floss: tuple[bool, ...]
    """Per row: friction-loss (Huber) cost instead of the unilateral one."""
    tolerance: float
    """MuJoCo `opt.tolerance` on the scaled cost improvement and gradient."""
    warmstart: bool
    """Start from the previous qacc when cheaper than qacc_smooth."""
    is_eq: tuple[bool, ...] = ()
    """Per row: equality (bilateral, always quadratic) cost; empty: no equality rows."""
    cones: tuple[tuple[int, ...], ...] = ()
    """Rows (normal first) of each elliptic friction cone; empty with pyramidal cones."""
    compact: tuple[tuple[tuple[int, ...], ...], ...] = ()
    """Groups of interchangeable row units that are often inactive (contacts, limits): each group a
    tuple of units of one size, a unit the rows of one elliptic cone (in `cones`) or one scalar
    unilateral row. The solve runs on the active units only when they fit a budget (`_Compaction`)."""
    newton: bool = True
    """Newton's method (MuJoCo's default); False: MuJoCo's CG (M-preconditioned Hager-Zhang
    conjugate gradient on the same cost, with the same line search)."""
    nisland: int = 1
    """Island slots: labels in `Problem.dof_island`/`efc_island` are below it (the model's tree count)."""
    row_dof: tuple[int, ...] | None = None
    """Per row: the one dof its Jacobian can reach (a hinge or slide joint's limit or friction loss),
    or -1 for rows reaching several; None: unknown. Single-dof rows add to the Hessian's diagonal
    only, so it sums outer products over the others alone."""
    ls_tolerance: float = 0.01
    """MuJoCo `opt.ls_tolerance`: the line search's slope tolerance relative to `tolerance`."""
    lowering: Lowering = DEFAULT
    """How the solve is lowered (the system's `lowering`): Hessian forms, work queue, compaction budgets."""


class Budget(NamedTuple):
    """The solve's iteration caps (MuJoCo's `mjOption` fields) as data: another budget reuses the
    compiled solve, and a batch may hold several."""

    iterations: jax.Array
    """() int32 maximum iterations (MuJoCo `opt.iterations`)."""
    ls_iterations: jax.Array
    """() int32 maximum line-search evaluations per iteration (`opt.ls_iterations`)."""


def budget(iterations: int | jax.Array = 100, ls_iterations: int | jax.Array = 50) -> Budget:
    """A `Budget` of int32 arrays (defaults: MuJoCo's)."""
    return Budget(jnp.asarray(iterations, jnp.int32), jnp.asarray(ls_iterations, jnp.int32))


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
    dof_island: jax.Array | None = None  # (nv,) int32 island of each dof, -1: none (None: one island)
    efc_island: jax.Array | None = None  # (nefc,) int32 island of each row (of its trees when inactive)
    budget: Budget | None = None  # set by `solve_rows` from its argument


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


_APEX: Final = 1e-10  # tangential residual below which a cone counts as at its apex (see `_cone`)


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


def _hessian(cfg: Config, p: Problem, quad: jax.Array) -> jax.Array:
    """(nv, nv) H = M + Jᵀ diag(D on quadratic rows) J."""
    w = jnp.where(quad, p.D, 0.0)
    row_dof = cfg.row_dof if cfg.row_dof is not None else (-1,) * p.J.shape[0]
    return newton.hessian(cfg.lowering, row_dof, p.M, p.J, w)


# ---- islands (MuJoCo's mj_island) ----
# Rows couple only the dofs of the trees they reach, and M is block diagonal by tree, so the
# problem splits into independent islands (trees linked by active rows). MuJoCo solves each island
# on its own, with its own line search, stopping tests and iteration count; dofs of trees without
# active rows take qacc_smooth. Here every island is solved at once: per-island scalars are
# (K,) vectors, reductions over an island's dofs or rows are products with one-hot masks.


class _Islands(NamedTuple):
    """Island masks and scales of one problem (K island slots)."""

    dof: jax.Array  # (nv, K) one-hot island of each dof (a zero row: no island)
    row: jax.Array  # (nefc, K) one-hot island of each row
    scale: jax.Array  # (K,) MuJoCo's ctx.scale: 1/trace of the island's M
    live: jax.Array  # (K,) bool: the slot holds an island


def _islands(cfg: Config, p: Problem) -> _Islands:
    nefc, nv = p.J.shape
    dt = p.M.dtype
    if p.dof_island is None or p.efc_island is None:
        dof, row = jnp.ones((nv, 1), dt), jnp.ones((nefc, 1), dt)
    else:
        slots = jnp.arange(cfg.nisland, dtype=p.dof_island.dtype)
        dof = (p.dof_island[:, None] == slots[None, :]).astype(dt)
        row = (p.efc_island[:, None] == slots[None, :]).astype(dt)
    live = jnp.sum(dof, axis=0) > 0
    # MuJoCo 4.0.1 divides by the island's trace of M, islands on or off (then one island of all dofs)
    trace = _per(dof, linalg.diagonal(p.M))
    return _Islands(dof, row, 1.0 / jnp.where(live, trace, 1.0), live)


def _per(mask: jax.Array, x: jax.Array) -> jax.Array:
    """(K,) sums of `x` (n,) over each island's entries (`mask` (n, K))."""
    # products and a reduction, not a dot: under vmap a batched dot of tiny operands runs as one
    # library call per problem on XLA:CPU, where this fuses into one loop
    return jnp.sum(x[:, None] * mask, axis=0)


def _per_many(cfg: Config, mask: jax.Array, *xs: jax.Array) -> tuple[jax.Array, ...]:
    """`_per` of each of `xs`; from `Lowering.variadic_sum_min_rows` mask entries on, in one variadic
    reduction, which XLA:CPU runs as one fused loop (under vmap a single sum of a few thousand
    entries becomes a library call with a fixed cost, paid at every line-search evaluation)."""
    if mask.size < cfg.lowering.variadic_sum_min_rows:
        return tuple(_per(mask, x) for x in xs)
    zero = jnp.zeros((), xs[0].dtype)
    out: tuple[jax.Array, ...] = jax.lax.reduce(
        tuple(x[:, None] * mask for x in xs), (zero,) * len(xs),
        lambda a, b: tuple(u + v for u, v in zip(a, b, strict=True)), (0,))
    return out


def _at(mask: jax.Array, v: jax.Array) -> jax.Array:
    """(n,) each entry's island value of `v` (K,) (0 outside every island)."""
    if mask.shape[1] == 1:
        return mask[:, 0] * v[0]
    return jnp.sum(mask * v[None, :], axis=1)


class _Iterate(NamedTuple):
    """Newton (or CG) loop state of one problem; per-island entries are (K,).

    The preconditioned gradient (H⁻¹g, or M⁻¹g for CG) is computed at the top of the trip that uses
    it, where MuJoCo computes it at the end of the previous iteration: the same tests on the same
    values, but no Hessian is factored for an island that stops on its improvement, gradient or
    iteration count (at `iterations` 1, one factor per step instead of two).
    """

    it: jax.Array  # (K,) int32 iterations taken
    cap: jax.Array  # () int32 the budget's iterations
    done: jax.Array  # (K,) bool: a stopping test fired (or no island in the slot)
    x: jax.Array  # (nv,) qacc
    ma: jax.Array  # (nv,) M x
    jar: jax.Array  # (nefc,) J x - aref
    grad: jax.Array  # (nv,)
    gscale: jax.Array  # (K,) the gradient's roundoff scale
    search: jax.Array  # (nv,) CG: the previous search direction (zeros for Newton)
    grad_old: jax.Array  # (nv,) CG: the previous gradient
    mgrad_old: jax.Array  # (nv,) CG: the previous M⁻¹ gradient


def scale_tol(p: Problem) -> jax.Array:
    """What MuJoCo divides the cost improvement and the gradient norm by, for one island of all dofs:
    trace(M), M at run time (its ctx.scale is the inverse)."""
    return jnp.sum(linalg.diagonal(p.M), axis=-1)


def _evaluate(cfg: Config, p: Problem, isl: _Islands, ma: jax.Array,
              jar: jax.Array) -> tuple[jax.Array, jax.Array]:
    """grad (nv,) and its per-island roundoff scale (K,) at the point with M x = `ma`, J x − aref = `jar`."""
    f = row_terms(cfg, p, jar)[0]
    jtf = _mv(p.J.T, f)
    grad = ma - p.qfrc_smooth - jtf
    gscale = (jnp.sqrt(_per(isl.dof, ma * ma)) + jnp.sqrt(_per(isl.dof, p.qfrc_smooth ** 2))
              + jnp.sqrt(_per(isl.dof, jtf * jtf)))
    return grad, gscale


def _precondition(cfg: Config, p: Problem, jar: jax.Array, grad: jax.Array) -> jax.Array:
    """(nv,) Newton: H⁻¹ grad with the Hessian at `jar`; CG: M⁻¹ grad."""
    if not cfg.newton:
        return linalg.spd_solve(p.M, grad, cfg.lowering)
    hess = _hessian(cfg, p, row_terms(cfg, p, jar)[2])
    if cfg.cones:
        hess = hess + _cone_hessian(cfg, p, jar)
    return linalg.spd_solve(hess, grad, cfg.lowering)


def _small_grad(cfg: Config, isl: _Islands, grad: jax.Array, gscale: jax.Array) -> jax.Array:
    """(K,) MuJoCo's gradient test (scaled norm below `tolerance`), with a float32 roundoff floor."""
    gn = jnp.sqrt(_per(isl.dof, grad * grad))
    small: jax.Array = (isl.scale * gn < cfg.tolerance) | (gn <= _rel_grad(gn, cfg) * gscale)
    return small


def _budget(p: Problem) -> Budget:
    assert p.budget is not None, "solver: a Problem reaches the loop through solve_rows, with its budget"
    return p.budget


def _start(cfg: Config, p: Problem, x_warm: jax.Array) -> _Iterate:
    """Loop state at qacc_smooth, or at the warm start when that costs no more (MuJoCo's rule, over
    the whole problem), with the dofs outside every island at qacc_smooth."""
    isl = _islands(cfg, p)
    x = p.qacc_smooth
    if cfg.warmstart:
        def total(z: jax.Array) -> jax.Array:
            c = row_terms(cfg, p, _mv(p.J, z) - p.aref)[1]
            return jnp.sum(c) + 0.5 * jnp.dot(_mv(p.M, z) - p.qfrc_smooth, z - p.qacc_smooth, precision=_HI)

        x = jnp.where(total(x_warm) <= total(p.qacc_smooth), x_warm, p.qacc_smooth)
        if p.dof_island is not None:
            x = jnp.where(jnp.sum(isl.dof, axis=1) > 0, x, p.qacc_smooth)
    ma, jar = _mv(p.M, x), _mv(p.J, x) - p.aref
    grad, gscale = _evaluate(cfg, p, isl, ma, jar)
    zero = jnp.zeros_like(x)
    it0 = jnp.zeros(isl.live.shape, jnp.int32)
    return _Iterate(it0, _budget(p).iterations, ~isl.live, x, ma, jar, grad, gscale, zero, zero, zero)


def _running(s: _Iterate) -> jax.Array:
    """Whether the loop takes another trip (in any island)."""
    return jnp.any((s.it < s.cap) & ~s.done)


def _iterate(cfg: Config, p: Problem, s: _Iterate) -> _Iterate:
    """One iteration of every running island: the preconditioned gradient and MuJoCo's tests on it
    (at the start: Newton's gradient and decrement, CG's duality gap; later: the decrement), then
    MuJoCo's line search along the Newton (or CG) direction, the new gradient and the tests on the
    step's improvement and gradient."""
    isl = _islands(cfg, p)
    run = (s.it < s.cap) & ~s.done
    mgrad = _precondition(cfg, p, s.jar, s.grad)
    dec = jnp.maximum(0.0, 0.5 * _per(isl.dof, s.grad * mgrad))  # decrement (Newton) or gap (CG)
    small_dec = isl.scale * dec < cfg.tolerance
    first = s.it == 0
    if cfg.newton:  # MuJoCo's certificate at the start implies its gradient-and-decrement exit
        stop = jnp.where(first, _small_grad(cfg, isl, s.grad, s.gscale) & small_dec, small_dec)
    else:
        stop = first & small_dec
    run = run & ~stop
    if cfg.newton:
        d = -mgrad
    else:
        d = _conjugate(isl, s.search, s.grad, mgrad, s.grad_old, s.mgrad_old)
        d = jnp.where(_at(isl.dof, first.astype(d.dtype)) > 0, -mgrad, d)
    d = d * _at(isl.dof, run.astype(d.dtype))
    md, jd = _mv(p.M, d), _mv(p.J, d)
    alpha, improvement = _line_search(cfg, p, isl, s.ma, s.jar, d, md, jd, run)
    moved = run & (alpha != 0)  # MuJoCo stops an island whose search found no improvement
    a_dof, a_row = _at(isl.dof, alpha), _at(isl.row, alpha)
    x, ma, jar = s.x + a_dof * d, s.ma + a_dof * md, s.jar + a_row * jd
    grad, gscale = _evaluate(cfg, p, isl, ma, jar)
    imp = isl.scale * improvement
    small_imp = (imp > 0) & (imp < cfg.tolerance)
    done = s.done | stop | (run & ~moved) | (moved & (small_imp | _small_grad(cfg, isl, grad, gscale)))
    return _Iterate(s.it + moved.astype(jnp.int32), s.cap, done, x, ma, jar, grad, gscale, d, s.grad, mgrad)


def _conjugate(isl: _Islands, d: jax.Array, grad: jax.Array, mgrad: jax.Array, grad_old: jax.Array,
               mgrad_old: jax.Array) -> jax.Array:
    """(nv,) CG's next direction: −M⁻¹g + β d with MuJoCo's Hager-Zhang β (restarting at β = 0 when
    conjugacy is lost, bounded below by its dynamic truncation), per island."""
    y, my = grad - grad_old, mgrad - mgrad_old
    d_dot_y = _per(isl.dof, d * y)
    ok = d_dot_y >= linalg.MINVAL
    dy = jnp.where(ok, d_dot_y, 1.0)
    beta_hz = (_per(isl.dof, y * mgrad) - 2 * (_per(isl.dof, y * my) / dy) * _per(isl.dof, d * grad)) / dy
    d_norm, g_norm = jnp.sqrt(_per(isl.dof, d * d)), jnp.sqrt(_per(isl.dof, grad * grad))
    eta = -1.0 / jnp.maximum(linalg.MINVAL, d_norm * jnp.minimum(0.01, g_norm))
    beta = jnp.where(ok, jnp.maximum(eta, beta_hz), 0.0)
    return -mgrad + _at(isl.dof, beta) * d


# ---- MuJoCo's line search (engine_solver.c PrimalSearch, PrimalEval) ----


class _Pt(NamedTuple):
    """Line-search points of every island: (K,) each."""

    alpha: jax.Array
    cost: jax.Array  # cost(alpha) - cost(0)
    d1: jax.Array
    d2: jax.Array
    tol: jax.Array  # |d1| below this counts as converged (MuJoCo's gtol, float32 floor)


def _where_pt(c: jax.Array, a: _Pt, b: _Pt) -> _Pt:
    return _Pt(*(jnp.where(c, u, v) for u, v in zip(a, b, strict=True)))


def _friction_cost(x: jax.Array, f: jax.Array, rf: jax.Array, D: jax.Array) -> jax.Array:
    return jnp.where((-rf < x) & (x < rf), 0.5 * D * x * x,
                     jnp.where(x <= -rf, f * (-0.5 * rf - x), f * (-0.5 * rf + x)))


def _friction_cost_dif(start: jax.Array, x: jax.Array, f: jax.Array, rf: jax.Array,
                       D: jax.Array) -> jax.Array:
    """cost(x) - cost(start) of friction-loss rows, without cancellation where both share a zone."""
    def zone(v: jax.Array) -> jax.Array:
        return jnp.where((-rf < v) & (v < rf), 0, jnp.where(v <= -rf, -1, 1))

    z0, z1 = zone(start), zone(x)
    same = z0 == z1
    return jnp.where(same & (z0 == 0), 0.5 * D * (x - start) * (x + start),
                     jnp.where(same & (z0 == -1), f * (start - x),
                               jnp.where(same, f * (x - start),
                                         _friction_cost(x, f, rf, D) - _friction_cost(start, f, rf, D))))


class _ConeLS(NamedTuple):
    """PrimalPrepare's quantities of one group of elliptic cones along the search direction."""

    q0: jax.Array  # (n,) ½ Σ D jar² over the cone's rows
    q1: jax.Array  # Σ D jar jv
    q2: jax.Array  # ½ Σ D jv²
    U0: jax.Array
    V0: jax.Array
    UU: jax.Array
    UV: jax.Array
    VV: jax.Array
    mu: jax.Array
    Dm: jax.Array
    isl: jax.Array  # (n, K) island one-hot


def _cone_zone(N: jax.Array, Tsqr: jax.Array, mu: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Zone (1 top, 2 bottom, 3 middle) and tangential norm T at (N, T²)."""
    flat = Tsqr <= _APEX * _APEX  # no tangential part (a float32 apex counts as none)
    T = jnp.sqrt(jnp.where(flat, 1.0, Tsqr))
    zone = jnp.where(flat, jnp.where(N < 0, 2, 1),
                     jnp.where(mu * T <= N, 1, jnp.where(mu * N + T <= 0, 2, 3)))
    return zone, jnp.where(flat, 0.0, T)


def _cone_eval(k: _ConeLS, a: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """(n,) cost(a) - cost(0), d1, d2 and |d1| of each cone at step `a` (n,) (ellipticCostDif and
    PrimalEval's cone branch)."""
    z0, T0 = _cone_zone(k.U0, k.UU, k.mu)
    N = k.U0 + a * k.V0
    Tsqr = k.UU + a * (2 * k.UV + a * k.VV)
    za, T = _cone_zone(N, Tsqr, k.mu)
    quad = a * a * k.q2 + a * k.q1
    Tm = jnp.where(za == 3, T, 1.0)
    t_delta = a * (2 * k.UV + a * k.VV) / jnp.where((z0 == 3) & (za == 3), T + T0, 1.0)
    r_delta = a * k.V0 - k.mu * t_delta
    r0 = k.U0 - k.mu * T0
    half = 0.5 * k.Dm
    cost = jnp.select(
        [(z0 == 1) & (za == 1), (z0 == 2) & (za == 2), (z0 == 3) & (za == 3), (z0 == 3) & (za == 2),
         (z0 == 2) & (za == 3), (z0 == 1) & (za == 2), (z0 == 1) & (za == 3), (z0 == 3) & (za == 1),
         (z0 == 2) & (za == 1)],
        [jnp.zeros_like(a), quad, half * r_delta * (2 * r0 + r_delta), quad + half * (k.mu * k.U0 + T0) ** 2,
         quad - half * (k.mu * N + T) ** 2, quad + k.q0, half * (N - k.mu * T) ** 2, -half * r0 * r0, -k.q0],
        jnp.zeros_like(a))
    n1, t1 = k.V0, (k.UV + a * k.VV) / Tm
    t2 = k.VV / Tm - (k.UV + a * k.VV) * t1 / (Tm * Tm)
    nmt, n1mt = N - k.mu * T, n1 - k.mu * t1
    bottom, middle = za == 2, za == 3
    d1 = jnp.where(bottom, 2 * a * k.q2 + k.q1, jnp.where(middle, k.Dm * nmt * n1mt, 0.0))
    d2 = jnp.where(bottom, 2 * k.q2, jnp.where(middle, k.Dm * (n1mt * n1mt - nmt * k.mu * t2), 0.0))
    mag = jnp.where(bottom, jnp.abs(2 * a * k.q2) + jnp.abs(k.q1), jnp.abs(d1))
    return cost, d1, d2, mag


def _line_search(cfg: Config, p: Problem, isl: _Islands, ma: jax.Array, jar: jax.Array, d: jax.Array,
                 md: jax.Array, jd: jax.Array, run: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(K,) step α and improvement −(cost(α) − cost(0)) of each island along d: MuJoCo's PrimalSearch
    (a Newton step, a one-sided Newton search, then a bracketed search of Newton points and
    midpoints, within `ls_iterations` evaluations and to `tolerance·ls_tolerance`)."""
    nefc = p.J.shape[0]
    D = p.D
    snorm = jnp.sqrt(_per(isl.dof, d * d))
    gtol = cfg.tolerance * cfg.ls_tolerance * snorm / isl.scale
    g1 = _per(isl.dof, (ma - p.qfrc_smooth) * d)
    g2 = 0.5 * _per(isl.dof, d * md)
    q0, q1, q2 = 0.5 * D * jar * jar, D * jar * jd, 0.5 * D * jd * jd
    in_cone = np.zeros(nefc, bool)
    for rows in cfg.cones:
        in_cone[list(rows)] = True
    is_eq = np.asarray(cfg.is_eq, bool) if cfg.is_eq else np.zeros(nefc, bool)
    is_fl = np.asarray(cfg.is_floss, bool)
    is_in = ~(is_eq | is_fl | in_cone)
    cones = []
    if cfg.cones:
        assert p.mu is not None
        for idx in _cone_groups(cfg.cones):
            sc = p.mu[idx]
            U, V = jar[idx] * sc, jd[idx] * sc
            mu = sc[:, 0]
            mu2 = jnp.maximum(mu * mu, linalg.MINVAL)
            cones.append(_ConeLS(
                jnp.sum(q0[idx], 1), jnp.sum(q1[idx], 1), jnp.sum(q2[idx], 1), U[:, 0], V[:, 0],
                jnp.sum(U[:, 1:] ** 2, 1), jnp.sum(U[:, 1:] * V[:, 1:], 1), jnp.sum(V[:, 1:] ** 2, 1), mu,
                D[idx[:, 0]] / (mu2 * (1 + mu2)), isl.row[idx[:, 0]]))
    rf = p.R * p.floss
    cost0 = jnp.where(jar < 0, q0, 0.0)

    def ev(alpha: jax.Array) -> _Pt:
        a = _at(isl.row, alpha)
        x = jar + a * jd
        quad_d1, quad_d2 = q1 + 2 * a * q2, 2 * q2
        # equality rows: always quadratic; inequality rows: quadratic where x < 0
        act = jnp.asarray(is_eq) | (jnp.asarray(is_in) & (x < 0))
        cost = jnp.where(act, a * q1 + a * a * q2 + jnp.where(jnp.asarray(is_eq), 0.0, q0 - cost0), -cost0)
        d1 = jnp.where(act, quad_d1, 0.0)
        d2 = jnp.where(act, quad_d2, 0.0)
        if is_fl.any():
            fl = jnp.asarray(is_fl)
            inside = (-rf < x) & (x < rf)
            cost = jnp.where(fl, _friction_cost_dif(jar, x, p.floss, rf, D), cost)
            lin = jnp.where(x <= -rf, -p.floss * jd, p.floss * jd)
            d1 = jnp.where(fl, jnp.where(inside, D * x * jd, lin), d1)
            d2 = jnp.where(fl, jnp.where(inside, D * jd * jd, 0.0), d2)
        keep = jnp.asarray(~in_cone)
        cost, d1, d2 = (jnp.where(keep, v, 0.0) for v in (cost, d1, d2))
        cost_k, d1_k, d2_k, mag_k = _per_many(cfg, isl.row, cost, d1, d2, jnp.abs(d1))
        for k in cones:
            sums = _per_many(cfg, k.isl, *_cone_eval(k, _at(k.isl, alpha)))
            cost_k, d1_k, d2_k, mag_k = (u + v for u, v in
                                         zip((cost_k, d1_k, d2_k, mag_k), sums, strict=True))
        cost_k = cost_k + alpha * alpha * g2 + alpha * g1
        d1_k = d1_k + 2 * alpha * g2 + g1
        d2_k = d2_k + 2 * g2
        d2_k = jnp.where(d2_k <= 0, linalg.MINVAL, d2_k)
        mag_k = mag_k + jnp.abs(2 * alpha * g2) + jnp.abs(g1)
        return _Pt(alpha, cost_k, d1_k, d2_k, jnp.maximum(gtol, _rel_grad(mag_k) * mag_k))

    def conv(q: _Pt) -> jax.Array:
        small: jax.Array = jnp.abs(q.d1) < q.tol
        return small

    def newton(q: _Pt) -> jax.Array:
        return q.alpha - q.d1 / q.d2

    zero = jnp.zeros_like(snorm)
    p0 = ev(zero)
    p1 = ev(newton(p0))
    # phases: 0 one-sided search, 1 bracketed search, 2 done
    first = conv(p1) & ((p1.alpha == 0) | (p1.cost < 0))
    tiny = snorm < linalg.MINVAL
    done0 = ~run | tiny | first
    res_a = jnp.where(run & ~tiny & first, p1.alpha, 0.0)
    res_i = jnp.where(run & ~tiny & first, -p1.cost, 0.0)
    direction = jnp.where(p1.d1 < 0, 1.0, -1.0)
    cnt = jnp.full(snorm.shape, 2, jnp.int32)
    phase = jnp.where(done0, 2, 0).astype(jnp.int32)
    lsit = _budget(p).ls_iterations
    Carry = tuple[jax.Array, jax.Array, _Pt, _Pt, _Pt, _Pt, jax.Array, jax.Array]

    def body(c: Carry) -> Carry:
        phase, cnt, p1, p2, p1n, p2n, res_a, res_i = c
        one, brk = phase == 0, phase == 1
        # one-sided: continue while the slope still points ahead and evaluations remain
        go = one & (p1.d1 * direction <= -p1.tol) & (cnt < lsit)
        out = one & ~go & (cnt >= lsit)  # could not bracket: the last point
        prep = one & ~go & ~out  # bracket found: Newton point of p1 ahead of the bracketed search
        brk_go = brk & (cnt < lsit)
        final = brk & ~brk_go  # evaluations spent: the better end of the bracket, if it improves
        # evaluation A: Newton point of p1 (one-sided, prep) or the bracket's midpoint
        pa = ev(jnp.where(brk, 0.5 * (p1.alpha + p2.alpha), newton(p1)))
        cnt = cnt + (go | prep | brk_go).astype(jnp.int32)
        # one-sided step
        p2 = _where_pt(go, p1, p2)
        p1_one = _where_pt(go, pa, p1)
        hit = go & conv(pa) & (pa.cost < 0)
        # prep
        p2n = _where_pt(prep, p1, p2n)
        p1n = _where_pt(prep, pa, p1n)
        # bracketed step: candidates (p1next, p2next, midpoint)
        cands = (p1n, p2n, pa)
        best_i = jnp.full(snorm.shape, -1, jnp.int32)
        best_c = jnp.zeros_like(snorm)
        for i, q in enumerate(cands):
            better = conv(q) & ((best_i == -1) | (q.cost < best_c))
            best_i = jnp.where(better, i, best_i)
            best_c = jnp.where(better, q.cost, best_c)
        found = brk_go & (best_i >= 0)
        best = _where_pt(best_i == 0, cands[0], _where_pt(best_i == 1, cands[1], cands[2]))

        def update(q: _Pt) -> tuple[_Pt, jax.Array]:
            flag = jnp.zeros(snorm.shape, bool)
            for cand in cands:
                neg = (q.d1 < 0) & (cand.d1 < 0) & (q.d1 < cand.d1)
                pos = ~neg & (q.d1 > 0) & (cand.d1 > 0) & (q.d1 > cand.d1)
                q = _where_pt(neg | pos, cand, q)
                flag = flag | neg | pos
            return q, flag

        upd = brk_go & ~found
        q1, b1 = update(p1)
        q2, b2 = update(p2)
        b1, b2 = upd & b1, upd & b2
        pb = ev(newton(q1))
        pc = ev(newton(q2))
        cnt = cnt + b1.astype(jnp.int32) + b2.astype(jnp.int32)
        stuck = upd & ~b1 & ~b2  # no bracket update: numerical accuracy reached, the midpoint
        p1 = _where_pt(b1, q1, p1_one)
        p2 = _where_pt(b2, q2, p2)
        p1n = _where_pt(b1, pb, p1n)
        p2n = _where_pt(b2, pc, p2n)
        # final choice of the bracketed search
        use1 = (p1.cost <= p2.cost) & (p1.cost < 0)
        use2 = ~use1 & (p2.cost <= p1.cost) & (p2.cost < 0)
        fin_a = jnp.where(use1, p1.alpha, jnp.where(use2, p2.alpha, 0.0))
        fin_i = jnp.where(use1, -p1.cost, jnp.where(use2, -p2.cost, 0.0))
        res_a = jnp.select([hit | out, found, stuck, final], [p1.alpha, best.alpha, pa.alpha, fin_a], res_a)
        res_i = jnp.select([hit | out, found, stuck, final], [-p1.cost, -best.cost, -pa.cost, fin_i], res_i)
        phase = jnp.where(hit | out | found | stuck | final, 2, jnp.where(prep, 1, phase)).astype(jnp.int32)
        return phase, cnt, p1, p2, p1n, p2n, res_a, res_i

    start: Carry = (phase, cnt, p1, p0, p1, p1, res_a, res_i)
    out = jax.lax.while_loop(lambda c: jnp.any(c[0] < 2), body, start)
    return out[6], out[7]


# The start and the iteration, traced once per settings and problem shapes: every program of a
# process that solves the same problems (a training run's chunk and evaluation, at any batch) gets
# the same jaxpr from jit's trace cache (inlined, so the program is as if traced in place). The
# lowering settings are part of the static `cfg`: another setting is another trace.
_start_traced = jax.jit(_start, static_argnums=0, inline=True)
_iterate_traced = jax.jit(_iterate, static_argnums=0, inline=True)


def _pack(s: _Iterate) -> jax.Array:
    """(..., nv + nefc) the iterate's qacc and J·qacc − aref, as the solve's forms return them."""
    return jnp.concatenate([s.x, s.jar], axis=-1)


def _newton_loop(cfg: Config, p: Problem, w: jax.Array) -> jax.Array:
    """(nv + nefc,) packed qacc and jar of one problem (`w`: the packed warm start): Newton
    iterations until a stopping test fires in every island."""
    x_warm = w[:p.M.shape[-1]]
    s: _Iterate = jax.lax.while_loop(_running, lambda s: _iterate_traced(cfg, p, s),
                                     _start_traced(cfg, p, x_warm))
    return _pack(s)


@functools.cache
def _newton_fn(cfg: Config) -> custom_batching.custom_vmap:
    """The Newton solve for settings `cfg` on packed warm starts and results (qacc then jar, so one
    array, as `platforms` forms return): a per-problem loop, under vmap `newton.batched`'s."""
    loop = newton.Loop(
        solve=functools.partial(_newton_loop, cfg), warm=lambda p, w: w[:, :p.M.shape[-1]],
        start=functools.partial(_start_traced, cfg), iterate=functools.partial(_iterate_traced, cfg),
        running=_running, pack=_pack)
    return newton.batched(cfg.lowering, loop)


# Row compaction. Rows MuJoCo would not instantiate (D = 0) add nothing to the cost, gradient,
# Hessian or line search, but a dense solve pays for every slot (the Hessian is nefc·nv², the line
# search's kink table nefc²), and models with many contact slots have few active. So the solve runs
# on the active units of each group gathered into a budget of static size when they fit it (under
# vmap when they fit in every problem of the batch: an unbatched `lax.switch` on the batch's largest
# count), and on all rows otherwise. Results are those of the full solve up to float32 summation
# order. The budgets are a lowering choice (`newton.tier_budgets`).


class _Compaction(NamedTuple):
    """Static plan of the compacted solves of one `Config` (trace-time only)."""

    head: np.ndarray  # (nhead,) rows outside every group, always kept
    units: tuple[np.ndarray, ...]  # per group: (nunit, size) rows of each unit
    budgets: tuple[tuple[int, ...], ...]  # per tier: units kept of each group
    configs: tuple[Config, ...]  # per tier: the compact problem's settings
    min_batch: tuple[int, ...]  # per tier: the smallest batch that compiles it


@functools.lru_cache(maxsize=64)
def _compaction(cfg: Config) -> _Compaction | None:
    """The tiers of compact problems for `cfg`, or None when no group is worth compacting."""
    if not cfg.compact:
        return None
    units = tuple(np.asarray(g, np.int32).reshape(len(g), -1) for g in cfg.compact)
    per_group = [newton.tier_budgets(cfg.lowering, u.shape[0]) for u in units]
    ntier = max(len(b) for b in per_group)
    if ntier == 0:
        return None
    # groups with fewer tiers keep all their units in the later tiers
    budgets = tuple(tuple(b[t][0] if t < len(b) else u.shape[0]
                          for b, u in zip(per_group, units, strict=True)) for t in range(ntier))
    min_batch = tuple(max(b[t][1] for b in per_group if t < len(b)) for t in range(ntier))
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
    return _Compaction(head, units, budgets, tuple(configs), min_batch)


def _unit_active(plan: _Compaction, p: Problem) -> list[jax.Array]:
    """Per group: (nunit,) bool, units with an instantiated row."""
    return [jnp.any(p.D[u] != 0, axis=1) for u in plan.units]


def _tier(plan: _Compaction, p: Problem) -> jax.Array:
    """() int32 smallest tier whose budgets hold the active units (len(budgets): none does)."""
    counts = jnp.stack([jnp.sum(a, dtype=jnp.int32) for a in _unit_active(plan, p)])
    caps = jnp.asarray(plan.budgets, jnp.int32)  # (ntier, ngroup)
    return jnp.sum(jnp.any(counts[None, :] > caps, axis=1), dtype=jnp.int32)


def _active_first(a: jax.Array) -> jax.Array:
    """(n,) the indices of `a` (n,) bool, the true ones first, each part in order: a stable
    partition by prefix sums and one scatter (a sort's comparisons cost far more under vmap)."""
    n = a.shape[0]
    count = jnp.sum(a, dtype=jnp.int32)
    dest = jnp.where(a, jnp.cumsum(a, dtype=jnp.int32), count + jnp.cumsum(~a, dtype=jnp.int32)) - 1
    return jnp.zeros(n, jnp.int32).at[dest].set(jnp.arange(n, dtype=jnp.int32), unique_indices=True)


def _gather(plan: _Compaction, tier: int, p: Problem) -> tuple[Problem, jax.Array]:
    """The compact problem of tier `tier` and its rows in `p`: the head rows, then each group's first
    active units (padded with inactive ones when fewer), in their original order."""
    idx = [jnp.asarray(plan.head)]
    for u, a, b in zip(plan.units, _unit_active(plan, p), plan.budgets[tier], strict=True):
        idx.append(jnp.asarray(u)[_active_first(a)[:b]].reshape(-1))
    rows = jnp.concatenate(idx)
    return p._replace(J=p.J[rows], D=p.D[rows], R=p.R[rows], aref=p.aref[rows], floss=p.floss[rows],
                      mu=None if p.mu is None else p.mu[rows],
                      efc_island=None if p.efc_island is None else p.efc_island[rows]), rows


@functools.cache
def _compact_newton_fn(cfg: Config) -> custom_batching.custom_vmap:
    """The Newton solve for `cfg` on the smallest compact problem that holds the active rows."""
    plan = _compaction(cfg)
    full = _newton_fn(cfg)
    if plan is None:
        return full
    smalls = [_newton_fn(c) for c in plan.configs]

    def solve_tier(t: int) -> Callable[[Problem, jax.Array], jax.Array]:
        def run(p: Problem, w: jax.Array) -> jax.Array:
            nv = p.M.shape[-1]
            sub, rows = _gather(plan, t, p)
            out = smalls[t](sub, jnp.concatenate([w[:nv], jnp.zeros(rows.shape, w.dtype)]))
            # the rows left out are inactive (D = 0): their jar moves no force
            jar = jnp.zeros(p.J.shape[0], w.dtype).at[rows].set(out[nv:])
            return jnp.concatenate([out[:nv], jar])
        return run

    tiers = [solve_tier(t) for t in range(len(smalls))]
    return newton.tiered([*tiers, full], functools.partial(_tier, plan), plan.min_batch)


def _newton(cfg: Config, p: Problem, x_warm: jax.Array) -> tuple[jax.Array, jax.Array]:
    nv = x_warm.shape[-1]
    w = jnp.concatenate([x_warm, jnp.zeros((p.J.shape[0],), x_warm.dtype)])
    out: jax.Array = _compact_newton_fn(cfg)(p, w)
    return out[:nv], out[nv:]


def solve(cfg: Config, p: Problem, x_warm: jax.Array, b: Budget) -> jax.Array:
    """(nv,) constrained acceleration qacc minimizing the primal cost within budget `b` (see the
    module docstring)."""
    return solve_rows(cfg, p, x_warm, b)[0]


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def solve_rows(cfg: Config, p: Problem, x_warm: jax.Array, b: Budget) -> tuple[jax.Array, jax.Array]:
    """qacc (nv,) as `solve`, and jar = J·qacc − aref (nefc,) as the solver's iterate holds it.

    The forces are computed from this jar, as MuJoCo's efc_force is from its iterate's Jaref: the
    solver updates jar along its steps, and only that jar is consistent with its stopping tests.
    Recomputed from qacc in float32, J·qacc's roundoff times a stiff row's D moves the force enough
    to unbalance M·qacc = qfrc_smooth + Jᵀf, which the implicit integrators integrate."""
    return _newton(cfg, p._replace(budget=b), x_warm)


def _solve_fwd(cfg: Config, p: Problem, x_warm: jax.Array, b: Budget
               ) -> tuple[tuple[jax.Array, jax.Array], tuple[jax.Array, Problem, jax.Array, Budget]]:
    x, jar = _newton(cfg, p._replace(budget=b), x_warm)
    return (x, jar), (x, p, x_warm, b)


def _no_cotangent(a: jax.Array) -> jax.Array | np.ndarray:
    """The zero cotangent of a budget leaf (float0 for integers, as JAX wants)."""
    if jnp.issubdtype(a.dtype, jnp.integer):
        return np.zeros(a.shape, jax.dtypes.float0)
    return jnp.zeros_like(a)


def _solve_bwd(cfg: Config, res: tuple[jax.Array, Problem, jax.Array, Budget],
               bar: tuple[jax.Array, jax.Array]) -> tuple[Problem, jax.Array, Budget]:
    x, p, x_warm, b = res
    xbar, jarbar = bar
    # jar = J x − aref: its cotangent reaches x, and J and aref directly
    xbar = xbar + _mv(p.J.T, jarbar)
    jar = _mv(p.J, x) - p.aref
    _, _, quad = row_terms(cfg, p, jar)
    hess = _hessian(cfg, p, quad)
    if cfg.cones:
        hess = hess + _cone_hessian(cfg, p, jar)
    w = linalg.spd_solve(hess, xbar, cfg.lowering)

    def optimality(q: Problem) -> jax.Array:  # g(x*, θ); qacc_smooth enters only via qfrc_smooth
        f = row_terms(cfg, q, _mv(q.J, x) - q.aref)[0]
        return _mv(q.M, x) - q.qfrc_smooth - _mv(q.J.T, f)

    _, vjp = jax.vjp(optimality, p)
    (pbar,) = vjp(-w)
    pbar = pbar._replace(qacc_smooth=jnp.zeros_like(p.qacc_smooth), J=pbar.J + jarbar[:, None] * x[None, :],
                         aref=pbar.aref - jarbar)
    return pbar, jnp.zeros_like(x_warm), jax.tree.map(_no_cotangent, b)


solve_rows.defvjp(_solve_fwd, _solve_bwd)
