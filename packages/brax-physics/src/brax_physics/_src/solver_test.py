"""The Newton solver under vmap: the work queue gives each problem exactly its own solve.

Reference: the same problems solved one at a time (`lax.map` runs the unbatched loop), and the
optimality condition of the primal problem (its gradient vanishes at the solution).
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend import core as jex

from brax_physics._src import solver
from brax_physics._src.lowering import newton

NV, NEFC = 6, 12


def _problems(batch: int, seed: int, floss_rows: int = 0) -> solver.Problem:
    """`batch` random constraint problems: SPD M, dense J, positive D/R, mixed-sign aref."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(batch, NV, NV))
    m = a @ np.swapaxes(a, 1, 2) + NV * np.eye(NV)
    j = rng.normal(size=(batch, NEFC, NV))
    d = rng.uniform(5.0, 50.0, size=(batch, NEFC))
    qfrc = rng.normal(size=(batch, NV)) * 5.0
    qacc_smooth = np.linalg.solve(m, qfrc[..., None])[..., 0]
    aref = rng.normal(size=(batch, NEFC)) * rng.uniform(0.1, 10.0, size=(batch, 1))
    floss = np.zeros((batch, NEFC))
    floss[:, NEFC - floss_rows:] = rng.uniform(0.1, 1.0, size=(batch, floss_rows))

    def f32(x: np.ndarray) -> jax.Array:
        return jnp.asarray(x, jnp.float32)

    return solver.Problem(M=f32(m), qfrc_smooth=f32(qfrc), qacc_smooth=f32(qacc_smooth), J=f32(j), D=f32(d),
                          R=f32(1.0 / d), aref=f32(aref), floss=f32(floss))


def _cfg(floss_rows: int = 0, warmstart: bool = True) -> solver.Config:
    is_floss = (False,) * (NEFC - floss_rows) + (True,) * floss_rows
    return solver.Config(is_floss=is_floss, tolerance=1e-8, warmstart=warmstart)


B = solver.budget()  # MuJoCo's default budget


def _solve_batched(cfg: solver.Config, p: solver.Problem, warm: jax.Array,
                   b: solver.Budget = B) -> jax.Array:
    solve = jax.vmap(lambda q, w, b: solver.solve(cfg, q, w, b), in_axes=(0, 0, None))
    out: jax.Array = jax.jit(solve)(p, warm, b)
    return out


def _solve_one_by_one(cfg: solver.Config, p: solver.Problem, warm: jax.Array,
                      b: solver.Budget = B) -> jax.Array:
    def one(a: tuple[solver.Problem, jax.Array]) -> jax.Array:
        return solver.solve(cfg, a[0], a[1], b)

    out: jax.Array = jax.jit(lambda p, w: jax.lax.map(one, (p, w)))(p, warm)
    return out


def _iterations(cfg: solver.Config, p: solver.Problem, warm: jax.Array) -> np.ndarray:
    """Per problem: Newton iterations its own loop takes."""
    def one(q: solver.Problem, w: jax.Array) -> jax.Array:
        q = q._replace(budget=B)
        s = jax.lax.while_loop(solver._running, lambda s: solver._iterate(cfg, q, s),
                               solver._start(cfg, q, w))
        return s.it
    return np.asarray(jax.jit(lambda p, w: jax.lax.map(lambda a: one(*a), (p, w)))(p, warm))


@pytest.mark.parametrize("floss_rows", [0, 3])
def test_queue_matches_one_by_one(floss_rows: int) -> None:
    """More pending problems than slots, mixed iteration counts: each gets its own answer."""
    batch = 256
    cfg, p = _cfg(floss_rows=floss_rows), _problems(batch, seed=floss_rows, floss_rows=floss_rows)
    warm = p.qacc_smooth.at[::3].add(0.5)  # a third start from a perturbed warm start
    its = _iterations(cfg, p, warm)
    slots = newton.queue_slots(cfg.lowering, batch)
    assert np.sum(its > 0) > slots, (its > 0).sum()  # slots get refilled
    assert its.max() > its[its > 0].min(), np.bincount(its)  # problems finish at different trips
    got = np.asarray(_solve_batched(cfg, p, warm))
    want = np.asarray(_solve_one_by_one(cfg, p, warm))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    # and the solution is the constrained minimum: the cost gradient vanishes (to the float32 floor
    # of MuJoCo's line search: a relative slope of ~1e-5 ends a search)
    def grad_norm(q: solver.Problem, x: jax.Array) -> jax.Array:
        f = solver.constraint_force(cfg, q, x)
        g = q.M @ x - q.qfrc_smooth - q.J.T @ f
        scale = jnp.linalg.norm(q.qfrc_smooth) + jnp.linalg.norm(q.J.T @ f) + 1.0
        out: jax.Array = jnp.linalg.norm(g) / scale
        return out
    assert float(jnp.max(jax.vmap(grad_norm)(p, jnp.asarray(got)))) < 5e-4


def test_queue_matches_plain_vmapped_loop() -> None:
    """The queue and the batched while loop it replaces agree."""
    cfg, p = _cfg(), _problems(128, seed=7)
    got = np.asarray(_solve_batched(cfg, p, p.qacc_smooth))
    no_queue = cfg._replace(lowering=cfg.lowering.replace(queue_min_batch=10**9))
    plain = np.asarray(_solve_batched(no_queue, p, p.qacc_smooth))
    np.testing.assert_allclose(got, plain, rtol=1e-5, atol=1e-5)


def _eqns(jaxpr: jex.Jaxpr) -> list[jex.JaxprEqn]:
    """Every equation of `jaxpr` and of the jaxprs inside its equations' parameters."""
    out = []
    for eqn in jaxpr.eqns:
        out.append(eqn)
        for value in eqn.params.values():
            for sub in value if isinstance(value, tuple | list) else (value,):
                inner = getattr(sub, "jaxpr", sub)
                if isinstance(inner, jex.Jaxpr):
                    out.extend(_eqns(inner))
    return out


def test_one_problem_under_vmap_runs_its_own_loop() -> None:
    """A vmap of one problem (a single env stepped under vmap) solves it with the unbatched loop,
    without a batched loop's select of every carried value per iteration: the loop carries x as
    (NV,), not (1, NV), and the answer is the unbatched solve's."""
    cfg, p = _cfg(), _problems(1, seed=5)
    warm = p.qacc_smooth + 0.3
    got = np.asarray(_solve_batched(cfg, p, warm))[0]
    one = jax.tree.map(lambda a: a[0], p)
    want = np.asarray(jax.jit(lambda q, w: solver.solve(cfg, q, w, B))(one, warm[0]))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    jaxpr = jax.make_jaxpr(jax.vmap(lambda q, w: solver.solve(cfg, q, w, B)))(p, warm).jaxpr
    carried = {tuple(getattr(v.aval, "shape", ())) for e in _eqns(jaxpr) if e.primitive.name == "while"
               for v in e.outvars}
    assert (NV,) in carried and (1, NV) not in carried, carried


def test_queue_only_where_queue_platforms_say() -> None:
    """Lowered for CUDA (no GPU needed) the batched solve is the plain vmapped loop, without the
    queue's sort; for a CPU, the queue; with CUDA listed, CUDA's program has the queue too."""
    cfg, p = _cfg(), _problems(128, seed=7)

    def sorts(platform: str, c: solver.Config = cfg) -> int:
        f = jax.jit(jax.vmap(lambda q, w: solver.solve(c, q, w, B)))
        text: str = jax.export.export(f, platforms=[platform])(p, p.qacc_smooth).mlir_module()
        return text.count("stablehlo.sort")

    assert sorts("cuda") == 0
    assert sorts("cpu") >= 1
    both = cfg._replace(lowering=cfg.lowering.replace(queue_platforms=("cpu", "cuda")))
    assert sorts("cuda", both) == sorts("cpu", both)


def test_newton_iteration_traced_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under vmap the solve's own loop is never traced (`platforms.defer`) and the work queue's is
    traced when the CPU program is lowered, once for every program of the same settings and problem
    shapes (a training run's chunk and evaluation); the plain vmapped loop of other platforms is
    not traced. The iteration holds the Hessian, the factor and the line search."""
    p = _problems(256, seed=7)
    calls = []
    hessian = solver._hessian

    def counted(*args: object) -> jax.Array:
        calls.append(1)
        return hessian(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(solver, "_hessian", counted)

    def lowered(own: int, batch: int) -> None:  # own settings: no trace cached from other tests
        cfg = _cfg()._replace(lowering=_cfg().lowering.replace(hessian_elementwise_max=own))
        sub = jax.tree.map(lambda a: a[:batch], p)
        before = len(calls)
        traced = jax.jit(jax.vmap(lambda q, w: solver.solve(cfg, q, w, B))).trace(sub, sub.qacc_smooth)
        assert len(calls) == before  # tracing alone traces no Newton iteration
        traced.lower(lowering_platforms=("cpu",))

    lowered(10**6 + 1, 128)
    lowered(10**6 + 1, 256)
    assert len(calls) == 1
    # traced in place, the second program traces it again
    calls.clear()
    monkeypatch.setattr(solver, "_iterate_traced", solver._iterate)
    monkeypatch.setattr(solver, "_start_traced", solver._start)
    lowered(10**6 + 2, 128)
    lowered(10**6 + 2, 256)
    assert len(calls) == 2


@pytest.mark.parametrize("iterations", [0, 1, 2])
def test_iteration_cap_is_per_problem(iterations: int) -> None:
    """With a cap below convergence every problem stops after exactly `iterations`, as alone."""
    cfg, p, cap = _cfg(warmstart=False), _problems(96, seed=3), solver.budget(iterations)
    got = np.asarray(_solve_batched(cfg, p, p.qacc_smooth, cap))
    want = np.asarray(_solve_one_by_one(cfg, p, p.qacc_smooth, cap))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    if iterations == 0:
        np.testing.assert_array_equal(got, np.asarray(p.qacc_smooth))
    assert not np.allclose(got, np.asarray(_solve_batched(_cfg(), p, p.qacc_smooth)), atol=1e-3)


def test_shared_operand_and_gradient() -> None:
    """One operand unbatched (the same J for all), and per-problem gradients through the batched solve."""
    cfg, p = _cfg(), _problems(80, seed=11)
    j0 = p.J[0]
    axes = solver.Problem(M=0, qfrc_smooth=0, qacc_smooth=0, J=None, D=0, R=0, aref=0, floss=0)  # type: ignore[arg-type]

    def batched(scale: jax.Array) -> jax.Array:
        q = p._replace(J=j0 * scale)
        x = jax.vmap(lambda q, w: solver.solve(cfg, q, w, B),
                     in_axes=(axes, 0))(q, q.qacc_smooth)
        return jnp.sum(x ** 2)

    def one_by_one(scale: jax.Array) -> jax.Array:
        q = p._replace(J=jnp.broadcast_to(j0 * scale, p.J.shape))
        x = jax.lax.map(lambda a: solver.solve(cfg, a, a.qacc_smooth, B), q)
        return jnp.sum(x ** 2)

    s = jnp.float32(1.0)
    np.testing.assert_allclose(float(batched(s)), float(one_by_one(s)), rtol=1e-5)
    g_b, g_o = float(jax.jit(jax.grad(batched))(s)), float(jax.jit(jax.grad(one_by_one))(s))
    np.testing.assert_allclose(g_b, g_o, rtol=1e-3)
    eps = 1e-3
    fd = (float(batched(s + eps)) - float(batched(s - eps))) / (2 * eps)
    np.testing.assert_allclose(g_b, fd, rtol=2e-2)


def test_hessian_of_single_dof_rows_matches_the_dense_sum() -> None:
    """Rows that reach one dof (`Config.row_dof`) go to the diagonal: H = M + Jᵀ diag(D on quadratic
    rows) J as the dense sum, alone and under vmap, whichever rows are single."""
    p = _problems(3, seed=4)
    rng = np.random.default_rng(5)
    dofs = rng.integers(0, NV, size=NEFC)
    single = np.arange(NEFC) % 3 != 1  # runs of single-dof rows between rows with several
    j = np.where(single[None, :, None], np.eye(NV)[dofs][None] * np.asarray(p.J), np.asarray(p.J))
    p = p._replace(J=jnp.asarray(j, jnp.float32))
    quad = jnp.asarray(rng.uniform(size=(3, NEFC)) < 0.7)
    row_dof = tuple(int(d) if s else -1 for d, s in zip(dofs, single, strict=True))
    cfg = _cfg()._replace(row_dof=row_dof)
    w = np.where(np.asarray(quad), np.asarray(p.D), 0.0)
    want = np.asarray(p.M) + np.einsum("bri,br,brj->bij", j, w, j)
    got = np.asarray(jax.jit(jax.vmap(lambda q, u: solver._hessian(cfg, q, u)))(p, quad))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    one = jax.tree.map(lambda a: a[0], p)
    np.testing.assert_allclose(np.asarray(solver._hessian(cfg, one, quad[0])), want[0], rtol=1e-5, atol=1e-4)
    every = cfg._replace(row_dof=tuple(int(d) for d in dofs))  # all single: the diagonal alone
    jd = np.eye(NV)[dofs] * np.asarray(one.J)
    diag_only = solver._hessian(every, one._replace(J=jnp.asarray(jd, jnp.float32)), quad[0])
    np.testing.assert_allclose(np.asarray(diag_only), np.asarray(one.M) + jd.T @ (w[0][:, None] * jd),
                               rtol=1e-5, atol=1e-4)


def test_hessian_sums_fuse_without_library_calls() -> None:
    """Under vmap the Hessian's sums over rows compile to fused additions, with no reduction for
    jaxlib's CPU backend to hand to a YNNPACK library call (several times slower at these sizes);
    past `hessian_unroll_max_rows` rows the reduction gives the same matrix."""
    p = _problems(64, seed=6)
    rng = np.random.default_rng(7)
    dofs = rng.integers(0, NV, size=NEFC)
    single = np.arange(NEFC) % 2 == 0
    j = np.where(single[None, :, None], np.eye(NV)[dofs][None] * np.asarray(p.J), np.asarray(p.J))
    p = p._replace(J=jnp.asarray(j, jnp.float32))
    quad = jnp.asarray(rng.uniform(size=(64, NEFC)) < 0.7)
    cfg = _cfg()._replace(row_dof=tuple(int(d) if s else -1 for d, s in zip(dofs, single, strict=True)))

    def hessians(c: solver.Config = cfg) -> tuple[np.ndarray, str]:
        fn = jax.jit(jax.vmap(lambda q, u: solver._hessian(c, q, u))).lower(p, quad).compile()
        text = fn.as_text()
        assert text is not None
        return np.asarray(fn(p, quad)), text

    fused, text = hessians()
    assert "__ynn_fusion" not in text
    assert re.search(r"\} reduce\(", text) is None, "the Hessian's sums lowered to a reduction"
    reduced, text = hessians(cfg._replace(lowering=cfg.lowering.replace(hessian_unroll_max_rows=2)))
    assert re.search(r"\} reduce\(", text) is not None  # the fallback for many rows
    np.testing.assert_allclose(fused, reduced, rtol=1e-5, atol=1e-4)


def test_compact_configs_keep_the_head_rows_dofs() -> None:
    """Compacted problems take their units' rows per step: those count as several dofs, the head's
    rows keep theirs."""
    nefc = 80  # 2 head rows, 78 compactable scalar units
    cfg = solver.Config(is_floss=(False,) * nefc, tolerance=1e-8, warmstart=True,
                        compact=(tuple((r,) for r in range(2, nefc)),), row_dof=(3, -1) + (5,) * (nefc - 2))
    plan = solver._compaction(cfg)
    assert plan is not None
    for c in plan.configs:
        assert c.row_dof == (3, -1) + (-1,) * (len(c.is_floss) - 2)


def test_hessian_under_vmap_is_differentiable() -> None:
    """The batched Hessian (batch-last rule) differentiates as the sum it is: its JVP in the row
    weights D is Jᵀ diag(dD on quadratic rows) J, and it equals the per-problem Hessians."""
    p = _problems(4, seed=8)
    rng = np.random.default_rng(9)
    quad = jnp.asarray(rng.uniform(size=(4, NEFC)) < 0.7)
    cfg = _cfg()._replace(row_dof=(2,) + (-1,) * (NEFC - 1))
    j = np.array(p.J)
    j[:, 0] = np.eye(NV)[2] * j[:, 0]  # row 0 reaches dof 2 alone
    p = p._replace(J=jnp.asarray(j, jnp.float32))
    dD = jnp.asarray(rng.normal(size=(4, NEFC)), jnp.float32)

    def hess(d: jax.Array) -> jax.Array:
        return jax.vmap(lambda q, u: solver._hessian(cfg, q, u))(p._replace(D=d), quad)

    h, dh = jax.jit(lambda d, t: jax.jvp(hess, (d,), (t,)))(p.D, dD)
    want = np.einsum("bri,br,brj->bij", j, np.where(np.asarray(quad), np.asarray(dD), 0.0), j)
    np.testing.assert_allclose(np.asarray(dh), want, rtol=1e-5, atol=1e-4)
    each = np.stack([np.asarray(solver._hessian(cfg, jax.tree.map(lambda a, i=i: a[i], p), quad[i]))
                     for i in range(4)])
    np.testing.assert_allclose(np.asarray(h), each, rtol=1e-6, atol=1e-6)
