"""MuJoCo's noslip post-processing of the constraint forces (engine_solver.c, mj_solNoSlip).

After the main solver, `opt.noslip_iterations` projected Gauss-Seidel sweeps re-solve the friction
forces on the dual problem *without* the regularizer R (MuJoCo documentation, Computation: Noslip
solver): with A = J M⁻¹ Jᵀ and the residual res = J qacc(f) − aref, each block of rows minimizes
½ fᵀ A f + fᵀ (J qacc_smooth − aref) over its own forces, the others held fixed. The blocks, in
row order:

- each friction-loss row: a box |f| ≤ frictionloss;
- each pyramidal contact with friction: its pairs of opposite edges (rows 2k−1, 2k), each pair over
  the forces with the pair's sum held fixed (so the normal force does not change), both ≥ 0;
- each elliptic contact with friction: its friction rows, inside the ellipse Σ (f_k/μ_k)² ≤ f_n²
  with the normal force f_n fixed (MuJoCo's QCQP: Newton on the ellipse's Lagrange multiplier).

Equality, limit and normal forces are left as the main solver found them. A block whose cost would
rise is restored, as in MuJoCo. A sweep's improvement (the cost drop, plus on the first sweep the
regularizer's ½ Σ R f² that the noslip cost drops) scaled by 1/trace(M) below `noslip_tolerance`
ends the sweeps. The caller then maps the forces to qacc = qacc_smooth + M⁻¹ Jᵀ f (MuJoCo's
dualFinish).

Only active blocks are visited: the others carry no force and keep none. The forward pass loops
over them in a `while_loop`; reverse-mode derivatives (a `custom_vjp`) differentiate the same sweeps
written as scans over every block, in which an inactive block changes nothing.

MuJoCo 4.0.0 runs noslip per constraint island, each with its own stopping test; this is one
problem over all rows, whose stopping test sums the islands' improvements (the same when one
island holds every constraint, as for a single robot on the floor).
"""

from __future__ import annotations

import functools
from typing import Final, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from brax_physics._src import linalg
from brax_physics._src.linalg import MINVAL
from brax_physics._src.solver import Problem, scale_tol

_HI: Final = jax.lax.Precision.HIGHEST

# float32 floor on MuJoCo's "restore a block whose cost rose by more than 1e-10" test: a drop
# computed in float32 carries roundoff of this relative size of its terms.
_REL_CHANGE: Final = 1e-5
_QCQP_ITERATIONS: Final = 20  # mju_QCQP's Newton iterations


class Config(NamedTuple):
    """Static noslip settings and blocks (hashable)."""

    iterations: int
    """Maximum sweeps (MuJoCo `opt.noslip_iterations`)."""
    floss: tuple[int, ...]
    """Friction-loss rows, in order."""
    pairs: tuple[int, ...] = ()
    """First row of each pair of opposite pyramid edges, in order (pyramidal cones)."""
    cones: tuple[tuple[int, ...], ...] = ()
    """Rows (normal first) of each elliptic contact with friction, in order (elliptic cones)."""


class _Carry(NamedTuple):
    f: jax.Array  # (nefc,) forces
    w: jax.Array  # (nv,) M⁻¹ Jᵀ f
    imp: jax.Array  # () this sweep's improvement (unscaled)


class _Data(NamedTuple):
    """Arrays the sweeps read."""

    J: jax.Array  # (nefc, nv)
    M: jax.Array  # (nv, nv)
    low: jax.Array  # (nv, nv) Cholesky factor of M
    a0: jax.Array  # (nefc,) J qacc_smooth − aref (MuJoCo efc_b)
    active: jax.Array  # (nefc,) bool
    floss: jax.Array  # (nefc,)
    mu: jax.Array | None  # (nefc,) elliptic friction coefficient of each friction row


def _minv(d: _Data, x: jax.Array) -> jax.Array:
    return linalg.cho_solve(d.M, d.low, x)


def _residual(d: _Data, c: _Carry, rows: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Block rows' J (k, nv), M⁻¹ Jᵀ (k, nv) and residual b + A f without R (k,)."""
    jr = d.J[rows]
    mj = jax.vmap(functools.partial(_minv, d))(jr)
    res = d.a0[rows] + jnp.matmul(jr, c.w, precision=_HI)
    return jr, mj, res


def _apply(d: _Data, c: _Carry, rows: jax.Array, mj: jax.Array, old: jax.Array, new: jax.Array,
           change: jax.Array) -> _Carry:
    delta = new - old
    return _Carry(c.f.at[rows].set(new, mode="drop"), c.w + jnp.matmul(delta, mj, precision=_HI),
                  c.imp - change)


def _checked_change(ac: jax.Array, old: jax.Array, new: jax.Array,
                    res: jax.Array) -> tuple[jax.Array, jax.Array]:
    """MuJoCo's costChange: the block's cost change, and the forces (the old ones if it rose)."""
    delta = new - old
    quad = 0.5 * jnp.dot(delta, jnp.matmul(ac, delta, precision=_HI), precision=_HI)
    lin = jnp.dot(delta, res, precision=_HI)
    change = quad + lin
    rose = change > 1e-10 + _REL_CHANGE * (jnp.abs(quad) + jnp.abs(lin))
    return jnp.where(rose, 0.0, change), jnp.where(rose, old, new)


def _floss_block(d: _Data, c: _Carry, row: jax.Array) -> _Carry:
    rows = row[None]
    jr, mj, res = _residual(d, c, rows)
    a = jnp.maximum(MINVAL, jnp.dot(jr[0], mj[0], precision=_HI))
    old = c.f[rows]
    bound = d.floss[row]
    new = jnp.clip(old - res / a, -bound, bound)
    delta = new - old
    change = 0.5 * delta[0] * delta[0] * a + delta[0] * res[0]
    return _apply(d, c, rows, mj, old, new, change)


def _block_matrix(jr: jax.Array, mj: jax.Array) -> jax.Array:
    """(k, k) the rows' block of A, its diagonal floored at 1e-10 (MuJoCo's extractBlock)."""
    ac = jnp.matmul(jr, mj.T, precision=_HI)
    k = ac.shape[0]
    eye = jnp.eye(k, dtype=bool)
    return jnp.where(eye, jnp.maximum(ac, 1e-10), ac)


def _pair_block(d: _Data, c: _Carry, first: jax.Array) -> _Carry:
    """Opposite pyramid edges: forces (mid + y, mid − y) with mid fixed, y ∈ [−mid, mid]."""
    rows = first + jnp.arange(2)
    jr, mj, res = _residual(d, c, rows)
    ac = _block_matrix(jr, mj)
    old = c.f[rows]
    bc = res - jnp.matmul(ac, old, precision=_HI)
    mid = 0.5 * (old[0] + old[1])
    k1 = ac[0, 0] + ac[1, 1] - ac[0, 1] - ac[1, 0]
    k0 = mid * (ac[0, 0] - ac[1, 1]) + bc[0] - bc[1]
    flat = k1 < MINVAL
    y = jnp.clip(-k0 / jnp.where(flat, 1.0, k1), -mid, mid)
    y = jnp.where(flat, 0.0, y)
    change, new = _checked_change(ac, old, jnp.stack([mid + y, mid - y]), res)
    return _apply(d, c, rows, mj, old, new, change)


def _qcqp(a: jax.Array, b: jax.Array, mu: jax.Array, r: jax.Array, n: jax.Array,
          chol: jax.Array) -> jax.Array:
    """min ½ xᵀ a x + xᵀ b subject to Σ (x_i/μ_i)² ≤ r² (MuJoCo's mju_QCQP2/3/QCQP), on the
    ellipse when the constraint is active. Entries past the first `n` are padding (a = I, b = 0).

    Newton iterations on the Lagrange multiplier λ of (a + λ I) x = −b; a singular a + λ I (MuJoCo:
    determinant below 1e-10 for 2 and 3 rows, a Cholesky pivot below 1e-10 for 5) gives x = 0.
    """
    size = a.shape[0]
    real = jnp.arange(size) < n
    s_b, s_a = b * mu, a * mu[:, None] * mu[None, :]

    def factor(lam: jax.Array) -> tuple[jax.Array, jax.Array]:
        al = s_a + jnp.diag(jnp.where(real, lam, 0.0))
        # unrolled Cholesky (size <= 5): pivots for MuJoCo's singularity tests
        low = jnp.zeros_like(al)
        piv = []
        for j in range(size):
            t = al[j, j] - jnp.dot(low[j, :j], low[j, :j])
            piv.append(t)
            ljj = jnp.sqrt(jnp.maximum(t, 1e-30))
            low = low.at[j, j].set(ljj)
            if j + 1 < size:
                col = (al[j + 1:, j] - jnp.matmul(low[j + 1:, :j], low[j, :j])) / ljj
                low = low.at[j + 1:, j].set(col)
        pivots = jnp.stack(piv)
        singular = jnp.where(chol, jnp.any(pivots < 1e-10), jnp.prod(pivots) < 1e-10)
        return low, singular

    # Unrolled substitutions, not LAPACK: a vmapped trsm of a large batch would use XLA's
    # thread pool, where two at once can deadlock (see `linalg`), and at size <= 5 a call costs more.
    def solve_low(low: jax.Array, x: jax.Array) -> jax.Array:  # L y = x
        y: list[jax.Array] = []
        for i in range(size):
            y.append((x[i] - sum((low[i, j] * y[j] for j in range(i)), jnp.zeros((), x.dtype))) / low[i, i])
        return jnp.stack(y)

    def solve_up(low: jax.Array, y: jax.Array) -> jax.Array:  # Lᵀ z = y
        z: dict[int, jax.Array] = {}
        for i in reversed(range(size)):
            done = sum((low[j, i] * z[j] for j in range(i + 1, size)), jnp.zeros((), y.dtype))
            z[i] = (y[i] - done) / low[i, i]
        return jnp.stack([z[i] for i in range(size)])

    Carry = tuple[jax.Array, jax.Array, jax.Array, jax.Array]

    def body(_: int, cr: Carry) -> Carry:
        lam, v, done, fail = cr
        low, singular = factor(lam)
        z = solve_low(low, -s_b)
        vn = solve_up(low, z)
        val = jnp.dot(vn, vn) - r * r
        conv = val < 1e-10
        deriv = -2.0 * jnp.dot(solve_low(low, vn), solve_low(low, vn))
        step = -val / jnp.where(deriv < 0, deriv, -1.0)
        stop = conv | (step < 1e-10)
        now_fail = ~done & singular
        v = jnp.where(done, v, vn)
        lam = jnp.where(done | stop | singular, lam, lam + step)
        return lam, v, done | stop | singular, fail | now_fail

    zero = jnp.zeros((), a.dtype)
    lam, v, _, fail = jax.lax.fori_loop(0, _QCQP_ITERATIONS, body,
                                        (zero, jnp.zeros_like(b), jnp.zeros((), bool), jnp.zeros((), bool)))
    x = jnp.where(fail | ~real, 0.0, v * mu)
    # on the constraint: put x on the ellipse (the iterations are approximate)
    s = jnp.sum(jnp.where(real, x * x / (mu * mu), 0.0))
    ratio = r * r / jnp.maximum(MINVAL, s)
    scl = jnp.where(ratio > 0, jnp.sqrt(jnp.where(ratio > 0, ratio, 1.0)), 0.0)
    return jnp.where((lam != 0) & ~fail, x * scl, x)


def _cone_block(d: _Data, c: _Carry, rows_all: jax.Array, n: jax.Array) -> _Carry:
    """An elliptic contact's friction rows inside the ellipse of its (fixed) normal force."""
    assert d.mu is not None
    nefc = d.J.shape[0]
    normal, rows = rows_all[0], rows_all[1:]  # rows: friction rows, padded with nefc
    valid = rows < nefc
    safe = jnp.where(valid, rows, 0)
    jr, mj, res = _residual(d, c, safe)
    jr, mj = jnp.where(valid[:, None], jr, 0.0), jnp.where(valid[:, None], mj, 0.0)
    res = jnp.where(valid, res, 0.0)
    eye = jnp.eye(rows.shape[0], dtype=bool)
    pad = ~(valid[:, None] & valid[None, :])
    ac = jnp.where(pad, jnp.where(eye, 1.0, 0.0), _block_matrix(jr, mj))
    old = jnp.where(valid, c.f[safe], 0.0)
    bc = res - jnp.matmul(ac, old, precision=_HI)
    mu = jnp.where(valid, d.mu[safe], 1.0)
    fn = c.f[normal]
    new = _qcqp(ac, bc, mu, fn, n, n >= 4)
    new = jnp.where(fn < MINVAL, 0.0, new)
    change, new = _checked_change(jnp.where(pad, 0.0, ac), old, new, res)
    return _apply(d, c, jnp.where(valid, rows, nefc), mj, old, new, change)


def _blocks(cfg: Config) -> tuple[np.ndarray, np.ndarray | None]:
    """(nblock, width) rows of each contact block (normal first for cones, padded with -1), and for
    cones the number of friction rows of each."""
    if cfg.pairs:
        return np.asarray(cfg.pairs, np.int32)[:, None], None
    width = max(len(r) for r in cfg.cones)
    out = np.full((len(cfg.cones), width), -1, np.int32)
    for i, r in enumerate(cfg.cones):
        out[i, : len(r)] = r
    return out, np.asarray([len(r) - 1 for r in cfg.cones], np.int32)


def _sweep(cfg: Config, d: _Data, c: _Carry, scan: bool) -> _Carry:
    """One Gauss-Seidel sweep: friction-loss rows, then the contacts' friction blocks."""
    if cfg.floss:
        rows = jnp.asarray(cfg.floss, jnp.int32)
        c = jax.lax.scan(lambda cr, r: (_floss_block(d, cr, r), None), c, rows)[0]
    if not (cfg.pairs or cfg.cones):
        return c
    blocks_np, nfric_np = _blocks(cfg)
    nefc = d.J.shape[0]
    blocks = jnp.asarray(np.where(blocks_np < 0, nefc, blocks_np))
    nfric = jnp.asarray(nfric_np) if nfric_np is not None else None

    def block(cr: _Carry, i: jax.Array) -> _Carry:
        if nfric is None:
            return _pair_block(d, cr, blocks[i, 0])
        return _cone_block(d, cr, blocks[i], nfric[i])

    active = d.active[blocks[:, 0]]
    if scan:  # every block in order; an inactive one changes nothing
        def step(cr: _Carry, i: jax.Array) -> tuple[_Carry, None]:
            new = block(cr, i)
            return jax.tree.map(lambda a, b: jnp.where(active[i], a, b), new, cr), None

        return jax.lax.scan(step, c, jnp.arange(blocks.shape[0]))[0]
    order = jnp.argsort(~active, stable=True)  # active blocks first, in row order
    count = jnp.sum(active, dtype=jnp.int32)

    def body(k_c: tuple[jax.Array, _Carry]) -> tuple[jax.Array, _Carry]:
        k, cr = k_c
        return k + 1, block(cr, order[k])

    return jax.lax.while_loop(lambda k_c: k_c[0] < count, body, (jnp.zeros((), jnp.int32), c))[1]


def _noslip(cfg: Config, p: Problem, low: jax.Array, active: jax.Array, f0: jax.Array, tol: jax.Array,
            scan: bool) -> jax.Array:
    d = _Data(p.J, p.M, low, jnp.matmul(p.J, p.qacc_smooth, precision=_HI) - p.aref, active, p.floss, p.mu)
    w0 = _minv(d, jnp.matmul(p.J.T, f0, precision=_HI))
    first = 0.5 * jnp.sum(f0 * f0 * p.R)  # the regularizer's cost, dropped on the first sweep
    scale = 1.0 / scale_tol(p)
    Carry = tuple[jax.Array, jax.Array, jax.Array, jax.Array]

    def sweep(cr: Carry) -> Carry:
        it, f, w, _ = cr
        c = _sweep(cfg, d, _Carry(f, w, jnp.where(it == 0, first, 0.0)), scan)
        return it + 1, c.f, c.w, c.imp * scale < tol

    start = (jnp.zeros((), jnp.int32), f0, w0, jnp.zeros((), bool))
    if scan:
        def step(cr: Carry, _: None) -> tuple[Carry, None]:
            new = sweep(cr)
            return jax.tree.map(lambda a, b: jnp.where(cr[3], b, a), new, cr), None

        out = jax.lax.scan(step, start, None, length=cfg.iterations)[0]
    else:
        out = jax.lax.while_loop(lambda cr: (cr[0] < cfg.iterations) & ~cr[3], sweep, start)
    return out[1]


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def forces(cfg: Config, p: Problem, low: jax.Array, active: jax.Array, f0: jax.Array,
           tol: jax.Array) -> jax.Array:
    """(nefc,) efc_force after the noslip sweeps, from the main solver's forces `f0`.

    `low` is M's Cholesky factor, `active` (nefc,) which rows MuJoCo instantiates, `tol` MuJoCo's
    `opt.noslip_tolerance`.
    """
    return _noslip(cfg, p, low, active, f0, tol, scan=False)


_Res = tuple[Problem, jax.Array, jax.Array, jax.Array, jax.Array]


def _forces_fwd(cfg: Config, p: Problem, low: jax.Array, active: jax.Array, f0: jax.Array,
                tol: jax.Array) -> tuple[jax.Array, _Res]:
    return _noslip(cfg, p, low, active, f0, tol, scan=False), (p, low, active, f0, tol)


def _forces_bwd(cfg: Config, res: _Res, fbar: jax.Array) -> tuple[Problem, jax.Array, np.ndarray, jax.Array,
                                                                  jax.Array]:
    p, low, active, f0, tol = res
    _, vjp = jax.vjp(lambda q, g: _noslip(cfg, q, low, active, g, tol, scan=True), p, f0)
    pbar, f0bar = vjp(fbar)
    return pbar, jnp.zeros_like(low), np.zeros(active.shape, jax.dtypes.float0), f0bar, jnp.zeros_like(tol)


forces.defvjp(_forces_fwd, _forces_bwd)
