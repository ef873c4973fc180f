"""Factors and solves against float64 numpy, unbatched and under vmap, and their gradients.

Also the lowering under vmap: no LAPACK call up to unroll_max_n from unroll_min_batch on, and every
batched LAPACK call small enough to stay off XLA's thread pool (jaxlib 0.10's batched CPU kernels
can deadlock when several that use it run at once; see `lowering.factor`).
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest

from brax_physics._src import linalg
from brax_physics._src.lowering import factor, settings

_D = settings.DEFAULT


def _spd(rng: np.random.Generator, batch: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """`batch` random SPD matrices (condition ~1e2) and right-hand sides, float32."""
    a = rng.normal(size=(batch, n, n))
    m = a @ np.swapaxes(a, 1, 2) + n * np.eye(n)
    return m.astype(np.float32), rng.normal(size=(batch, n)).astype(np.float32)


def _expected(m: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.linalg.solve(m.astype(np.float64), b.astype(np.float64)[..., None])[..., 0]


def _factored_solve(a: jax.Array, b: jax.Array) -> jax.Array:
    return linalg.cho_solve(a, linalg.cholesky(a), b)


_SOLVES = {"spd_solve": linalg.spd_solve, "cho_solve": _factored_solve}


@pytest.mark.parametrize("solve", _SOLVES)
@pytest.mark.parametrize("n", [1, _D.small_n, _D.small_n + 1, 14, 27])
@pytest.mark.parametrize("batch", [1, 64, _D.unroll_min_batch])
def test_batched_matches_float64(solve: str, n: int, batch: int) -> None:
    m, b = _spd(np.random.default_rng(n * 100 + batch), batch, n)
    got = np.asarray(jax.jit(jax.vmap(_SOLVES[solve]))(m, b))
    assert got.shape == (batch, n)
    np.testing.assert_allclose(got, _expected(m, b), rtol=3e-4, atol=3e-5)


@pytest.mark.parametrize("solve", _SOLVES)
@pytest.mark.parametrize("n", [2, 14])  # the small-matrix column path and LAPACK
def test_unbatched_matches_float64(solve: str, n: int) -> None:
    m, b = _spd(np.random.default_rng(n), 1, n)
    got = np.asarray(jax.jit(_SOLVES[solve])(m[0], b[0]))
    np.testing.assert_allclose(got, _expected(m, b)[0], rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("n", [3, 9])
def test_cholesky_matches_numpy(n: int) -> None:
    m, _ = _spd(np.random.default_rng(11), 8, n)
    want = np.linalg.cholesky(m.astype(np.float64))
    one = np.tril(np.asarray(jax.jit(linalg.cholesky)(m[0])))  # the strict upper triangle is unspecified
    np.testing.assert_allclose(one, want[0], rtol=1e-5, atol=1e-5)
    got = np.tril(np.asarray(jax.jit(jax.vmap(linalg.cholesky))(m)))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_lapack_factor_copies_no_matrix_in_a_loop() -> None:
    """A Newton-like loop: factor M + diag(x²), multiply by M. LAPACK is handed the transpose's
    buffer as its column-major matrix, so M stays in one layout: no copy of M before the loop or
    in each trip (jax.lax.linalg.cholesky's layout had XLA keep M in both), and no triangle mask."""
    n = 9

    def run(m: jax.Array, x: jax.Array) -> jax.Array:
        def body(_: jax.Array, x: jax.Array) -> jax.Array:
            return linalg.spd_solve(linalg.add_diagonal(m, x * x), jnp.matmul(m, x, precision="highest"))
        out: jax.Array = jax.lax.fori_loop(0, 3, body, x)
        return out

    m, b = _spd(np.random.default_rng(5), 1, n)
    hlo = jax.jit(run).lower(m[0], b[0]).compile().as_text() or ""
    assert "potrf" in hlo
    # kernels of the entry and loop computations (a fused computation's body holds no kernels)
    kernels = "\n\n".join(c for c in hlo.split("\n\n") if not c.startswith(("%fused", "%wrapped")))
    copy = r"(?:copy\(|fusion\([^)]*\), kind=kLoop, calls=%wrapped_copy)"
    copies = re.findall(rf"f32\[{n},{n}\]\{{[0-9,]+\}} {copy}", kernels)
    assert copies == [], hlo
    assert "iota" not in hlo, hlo  # jax.lax.linalg.cholesky's tril mask
    x = np.asarray(b[0], np.float64)
    for _ in range(3):
        x = np.linalg.solve(m[0] + np.diag(x * x), m[0] @ x)
    np.testing.assert_allclose(jax.jit(run)(m[0], b[0]), x, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("batch", [(), (3,)])
def test_diagonal_and_add_diagonal_match_numpy(batch: tuple[int, ...]) -> None:
    rng = np.random.default_rng(2)
    m = rng.normal(size=(*batch, 5, 5)).astype(np.float32)
    d = rng.normal(size=(*batch, 5)).astype(np.float32)
    np.testing.assert_array_equal(jax.jit(linalg.diagonal)(m), np.diagonal(m, axis1=-2, axis2=-1))
    diag = np.zeros_like(m)
    diag[..., np.arange(5), np.arange(5)] = d
    np.testing.assert_array_equal(jax.jit(linalg.add_diagonal)(m, d), m + diag)
    if batch:  # an unbatched diagonal added to each matrix of a vmap
        got = jax.jit(jax.vmap(linalg.add_diagonal, (0, None)))(m, d[0])
        np.testing.assert_array_equal(got, m + diag[0])
    assert linalg.add_diagonal(jnp.zeros((0, 0)), jnp.zeros((0,))).shape == (0, 0)
    assert linalg.diagonal(jnp.zeros((0, 0))).shape == (0,)


@pytest.mark.parametrize("axes", [(0, None), (None, 0)])
def test_one_operand_batched(axes: tuple[int | None, int | None]) -> None:
    m, b = _spd(np.random.default_rng(2), 32, 6)
    mm = m if axes[0] == 0 else m[0]
    bb = b if axes[1] == 0 else b[0]
    want = _expected(m if axes[0] == 0 else np.broadcast_to(m[0], m.shape),
                     b if axes[1] == 0 else np.broadcast_to(b[0], b.shape))
    for solve in _SOLVES.values():
        got = np.asarray(jax.vmap(solve, in_axes=axes)(jnp.asarray(mm), jnp.asarray(bb)))
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)


def test_nested_vmap() -> None:
    m, b = _spd(np.random.default_rng(3), 4 * 16, 5)
    for solve in _SOLVES.values():
        mm, bb = jnp.asarray(m.reshape(4, 16, 5, 5)), jnp.asarray(b.reshape(4, 16, 5))
        got = np.asarray(jax.vmap(jax.vmap(solve))(mm, bb))
        np.testing.assert_allclose(got.reshape(64, 5), _expected(m, b), rtol=2e-4, atol=2e-5)


def _loss(solve: str, w: np.ndarray) -> Callable[[jax.Array, jax.Array], jax.Array]:
    def f(a: jax.Array, r: jax.Array) -> jax.Array:
        return (_SOLVES[solve](a, r) @ w) + _SOLVES[solve](a, 2 * r)[3]
    return f


_LAPACK_CALL = 'custom_call_target="lapack_'


def _hlo(fn: Callable[..., object], *args: jax.Array) -> str:
    """Compiled HLO text of `jit(fn)(*args)`, lower-cased."""
    return str(jax.jit(fn).lower(*args).compile().as_text()).lower()


def test_batched_lowering_has_no_lapack_call() -> None:
    """vmapped spd_solve, its gradient, cho_solve: no LAPACK up to unroll_max_n from unroll_min_batch on."""
    n, batch = _D.unroll_max_n, _D.unroll_min_batch
    m_np, b_np = _spd(np.random.default_rng(4), batch, n)
    m, b = jnp.asarray(m_np), jnp.asarray(b_np)
    f = _loss("spd_solve", np.ones(n, np.float32))
    for fn in (jax.vmap(linalg.spd_solve), jax.vmap(jax.grad(f, argnums=(0, 1)))):
        assert _LAPACK_CALL not in _hlo(fn, m, b)
    assert _LAPACK_CALL in _hlo(linalg.spd_solve, m[0], b[0])
    assert _LAPACK_CALL not in _hlo(jax.vmap(linalg.cholesky), m)  # `_factor_left`
    low = jax.vmap(linalg.cholesky)(m)
    assert _LAPACK_CALL not in _hlo(jax.vmap(linalg.cho_solve), m, low, b)
    assert _LAPACK_CALL in _hlo(jax.vmap(linalg.cholesky), m[: batch - 1])
    m2, b2 = _spd(np.random.default_rng(5), batch, n + 1)
    assert _LAPACK_CALL in _hlo(jax.vmap(linalg.spd_solve), jnp.asarray(m2), jnp.asarray(b2))
    assert _LAPACK_CALL in _hlo(jax.vmap(linalg.spd_solve), m[: batch - 1], b[: batch - 1])  # small batches


def test_large_batched_solves_substitute_without_lapack_triangular_solves() -> None:
    """Above unroll_max_n the factor is LAPACK's; its triangular solves only below substitute_min_batch."""
    n, big = _D.unroll_max_n + 1, _D.substitute_min_batch
    m_np, b_np = _spd(np.random.default_rng(7), big, n)
    m, b = jnp.asarray(m_np), jnp.asarray(b_np)
    low = jax.vmap(linalg.cholesky)(m)
    for batch, trsm in ((big, False), (big - 1, True)):
        for fn, args in ((jax.vmap(linalg.spd_solve), (m[:batch], b[:batch])),
                         (jax.vmap(linalg.cho_solve), (m[:batch], low[:batch], b[:batch]))):
            hlo = _hlo(fn, *args)
            assert ("trsm" in hlo) == trsm, (batch, hlo.count("trsm"))
            assert ("potrf" in hlo) == (len(args) == 2)  # spd_solve factors; cho_solve is given the factor
            np.testing.assert_allclose(np.asarray(jax.jit(fn)(*args)), _expected(m_np[:batch], b_np[:batch]),
                                       rtol=3e-4, atol=3e-5)


def test_substitution_trip_updates_in_place() -> None:
    """Each trip of the batch-last substitution loop is a quotient and one in-place update: no
    dynamic_update_slice, no copy of the right side, no wrap of the row index (kernels that cost
    ~1 us each, every trip); the result matches float64."""
    n, batch = _D.unroll_max_n + 7, _D.substitute_min_batch
    m_np, b_np = _spd(np.random.default_rng(11), batch, n)
    low = np.moveaxis(np.linalg.cholesky(m_np.astype(np.float64)).astype(np.float32), 0, -1)
    args = (jnp.asarray(low), jnp.asarray(b_np.T))
    hlo = _hlo(functools.partial(factor._substitute, _D), *args)
    bodies = [blk for blk in hlo.split("\n\n") if "root %tuple" in blk and f"f32[{n},{batch}]" in blk]
    assert len(bodies) == 2, hlo  # forward and back substitution
    for body in bodies:
        assert "dynamic-update-slice" not in body, body
        assert not re.search(rf"f32\[{n},{batch}\]\S* copy\(", body), body
        # scalar kernels: the counter's increment only (a fusion or a plain add), no index wrap
        assert len(re.findall(r"= s32\[\]\S* (?:fusion|add|select)\(", body)) == 1, body
        assert len(re.findall(r"= f32\[[\d,]+\]\S* fusion\(", body)) == 2, body  # the quotient, the update
    x = np.asarray(jax.jit(functools.partial(factor._substitute, _D))(*args)).T
    np.testing.assert_allclose(x, _expected(m_np, b_np), rtol=3e-4, atol=3e-5)


def _lapack_work(hlo: str) -> list[tuple[str, int]]:
    """(kernel, batch times jaxlib's flop estimate) of each batched LAPACK call in compiled HLO."""
    out = []
    for line in hlo.splitlines():
        call = re.search(r'custom_call_target="lapack_s(potrf|trsm)_ffi"', line)
        if call:
            batch, n, k = (int(v) for v in re.findall(r"f32\[(\d+),(\d+),(\d+)\]", line)[0])
            out.append((call[1], batch * n * n * n // 3 if call[1] == "potrf" else batch * n * n * k))
    return out


# (the factors of factor_unroll_max_n + 8 and of 23 dofs below factor_unroll_min_batch are LAPACK's)
@pytest.mark.parametrize(("fn", "batch", "n"), [("cholesky", 300, 23), ("spd_solve", 1024, 27),
                                                ("cho_solve", 63, 60),
                                                ("cholesky", 1024, _D.factor_unroll_max_n + 8)])
def test_batched_lapack_calls_stay_off_the_thread_pool(fn: str, batch: int, n: int) -> None:
    """Large batches go to LAPACK in chunks below jaxlib's parallel threshold; values unchanged."""
    m_np, b_np = _spd(np.random.default_rng(11), batch, n)
    m, b = jnp.asarray(m_np), jnp.asarray(b_np)
    # built for `fn` only, the factor jitted: an eager vmapped factor of 1024 matrices runs op by op
    calls: dict[str, Callable[[], tuple[Callable[..., jax.Array], tuple[jax.Array, ...]]]] = {
        "cholesky": lambda: (jax.vmap(linalg.cholesky), (m,)),
        "spd_solve": lambda: (jax.vmap(linalg.spd_solve), (m, b)),
        "cho_solve": lambda: (jax.vmap(linalg.cho_solve), (m, jax.jit(jax.vmap(linalg.cholesky))(m), b)),
    }
    f, args = calls[fn]()
    work = _lapack_work(_hlo(f, *args))
    assert work and all(w < factor.POOL_MIN_WORK for _, w in work), work
    # the whole batch in one call would have used the pool
    kernel = "trsm" if fn == "cho_solve" else "potrf"
    assert batch * (n * n if kernel == "trsm" else n * n * n // 3) >= factor.POOL_MIN_WORK
    assert {k for k, _ in work} == {kernel}
    got = np.asarray(jax.jit(f)(*args))
    if fn == "cholesky":
        want = np.linalg.cholesky(m_np.astype(np.float64))
        np.testing.assert_allclose(np.tril(got), want, rtol=1e-4, atol=1e-4)
    else:
        np.testing.assert_allclose(got, _expected(m_np, b_np), rtol=3e-4, atol=3e-5)


def _factor_and_solve_batches(f: Callable[..., jax.Array], platform: str,
                              *args: jax.ShapeDtypeStruct) -> list[int]:
    """Batch size of each Cholesky factor or triangular solve in `f` lowered for `platform`."""
    text = jax.export.export(jax.jit(f), platforms=[platform])(*args).mlir_module()
    lapack = re.findall(r"custom_call @\w*(?:potrf|trsm)\w*\(.*?: \(tensor<(\d+)x", text)
    hlo = re.findall(r"stablehlo.triangular_solve.*?: \(tensor<(\d+)x", text)
    return [int(size) for size in lapack + hlo]


@pytest.mark.parametrize(("fn", "batch", "n"),
                         [("cholesky", 300, 23), ("cholesky", 1024, _D.factor_unroll_max_n + 8),
                          ("cho_solve", 63, 60)])
def test_accelerators_get_the_whole_batch_in_one_call(fn: str, batch: int, n: int) -> None:
    """The chunking is for jaxlib's CPU kernels: lowered for CUDA (no GPU needed), each factor or
    solve takes the whole batch, where the CPU lowering splits it."""
    spec = jax.ShapeDtypeStruct
    m = spec((batch, n, n), jnp.float32)  # type: ignore[no-untyped-call]
    args = (m,) if fn == "cholesky" else (m, spec((batch, n), jnp.float32))  # type: ignore[no-untyped-call]
    f = jax.vmap(linalg.cholesky) if fn == "cholesky" else jax.vmap(lambda a, r: linalg.cho_solve(a, a, r))
    cpu, cuda = (_factor_and_solve_batches(f, p, *args) for p in ("cpu", "cuda"))
    assert cpu and max(cpu) < batch, cpu
    assert cuda == [batch] * (1 if fn == "cholesky" else 2), cuda  # cho_solve: L and Lᵀ solves


@pytest.mark.parametrize(("batch", "n"), [(_D.unroll_min_batch, _D.unroll_max_n),
                                        (_D.factor_unroll_min_batch, 23),
                                        (_D.factor_unroll_min_batch, _D.factor_unroll_max_n)])
def test_large_batched_cholesky_is_the_left_looking_factor(batch: int, n: int) -> None:
    """Under vmap from unroll_min_batch (n <= unroll_max_n) or factor_unroll_min_batch systems on,
    `cholesky` on a CPU is `_factor_left`: no LAPACK call, numpy's factor, the same numbers as the
    right-looking column form, NaN for a matrix that is not positive definite; lowered for CUDA it
    is one whole-batch cuSOLVER factor above graph_max_n (at or below it, `_factor_left` too);
    factor_unroll_max_n 0 turns it off."""
    m_np, _ = _spd(np.random.default_rng(n), batch, n)
    m_np[5] = -m_np[5]
    m = jnp.asarray(m_np)
    f = jax.vmap(linalg.cholesky)
    assert _LAPACK_CALL not in _hlo(f, m)
    got = np.asarray(jax.jit(f)(m))
    assert np.isnan(got[5][np.tril_indices(n)]).all()
    keep = np.arange(batch) != 5
    want = np.linalg.cholesky(m_np[keep].astype(np.float64))
    np.testing.assert_allclose(got[keep], want, rtol=1e-4, atol=1e-4)  # zeros above the diagonal
    columns = jax.jit(lambda a: jnp.moveaxis(factor._factor_columns(jnp.moveaxis(a, 0, -1)), -1, 0))
    np.testing.assert_array_equal(got[keep], np.asarray(columns(m[keep])))
    spec = jax.ShapeDtypeStruct((batch, n, n), jnp.float32)  # type: ignore[no-untyped-call]
    assert _factor_and_solve_batches(f, "cuda", spec) == ([] if n <= _D.graph_max_n else [batch])
    assert _factor_and_solve_batches(f, "cpu", spec) == []
    never = jax.vmap(functools.partial(linalg.cholesky, lowering=_D.replace(factor_unroll_max_n=0)))
    assert _factor_and_solve_batches(never, "cpu", spec)  # LAPACK's, in chunks


@pytest.mark.parametrize(("fn", "n"), [("spd_solve", 14), ("cho_solve", 14), ("spd_solve", 27),
                                       ("cho_solve", 27)])
def test_accelerators_get_library_solves_not_loops(fn: str, n: int) -> None:
    """The column form (n <= unroll_max_n) and the batch-last substitution (above it) loop over rows,
    which suits a CPU's SIMD lanes; lowered for CUDA the same vmapped solve has no loop: above
    graph_max_n cuSOLVER's factor and whole-batch triangular solves (spd_solve's factor does the
    forward one), at or below it no library call either (the written-out forms); the CPU keeps its
    loop."""
    batch = 1024
    assert batch >= max(_D.unroll_min_batch, _D.substitute_min_batch)
    spec = jax.ShapeDtypeStruct
    args = (spec((batch, n, n), jnp.float32), spec((batch, n), jnp.float32))  # type: ignore[no-untyped-call]
    f = jax.vmap(linalg.spd_solve) if fn == "spd_solve" else jax.vmap(lambda a, r: linalg.cho_solve(a, a, r))

    def lowered(platform: str) -> str:
        text: str = jax.export.export(jax.jit(f), platforms=[platform])(*args).mlir_module()
        return text

    assert "stablehlo.while" in lowered("cpu")
    assert "stablehlo.while" not in lowered("cuda")
    # spd_solve factors the system with its right side appended (one potrf) and solves with Lᵀ
    # (one trsm); cho_solve substitutes both ways (two)
    want = [batch] * 2 if n > _D.graph_max_n else []
    assert _factor_and_solve_batches(f, "cuda", *args) == want


@pytest.mark.parametrize(("batch", "n"), [(1, 14), (32, 23), (64, 14)])
def test_augmented_factor_does_the_forward_substitution(batch: int, n: int) -> None:
    """spd_solve's batched LAPACK factor takes the right side as an extra row and column: the
    factor's leading block is the matrix's factor and its last row L⁻¹b, so one LAPACK triangular
    solve is left; the answers do not change."""
    m, b = _spd(np.random.default_rng(batch + n), batch, n)
    low, y = jax.jit(factor._augmented_factors)(m, b)
    want_low = np.linalg.cholesky(m.astype(np.float64))
    np.testing.assert_allclose(np.tril(low), want_low, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(y, np.linalg.solve(want_low, b[..., None])[..., 0], rtol=1e-4, atol=1e-4)

    def solve(augment: bool) -> tuple[np.ndarray, int]:
        f = jax.jit(jax.vmap(functools.partial(linalg.spd_solve, lowering=_D.replace(augment=augment))))
        text = f.lower(m, b).as_text()
        return np.asarray(f(m, b)), len(re.findall(r"@\w*trsm", text))

    (with_aug, solves_aug), (without, solves) = solve(True), solve(False)
    assert solves_aug == solves - 1, (solves_aug, solves)  # one trsm call per chunk fewer
    np.testing.assert_allclose(with_aug, without, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(with_aug, _expected(m, b), rtol=3e-4, atol=3e-5)


def test_loop_platforms_choose_the_lowering() -> None:
    """`loop_platforms` decides per platform (with `graph_platforms` empty): listed, CUDA gets the
    row loop; empty, the CPU gets the library's calls."""
    spec = jax.ShapeDtypeStruct
    args = (spec((1024, 14, 14), jnp.float32), spec((1024, 14), jnp.float32))  # type: ignore[no-untyped-call]

    def has_loop(platform: str, loop_platforms: tuple[str, ...]) -> bool:
        low = _D.replace(graph_platforms=(), loop_platforms=loop_platforms)
        f = jax.jit(jax.vmap(functools.partial(linalg.spd_solve, lowering=low)))
        return "stablehlo.while" in jax.export.export(f, platforms=[platform])(*args).mlir_module()

    assert has_loop("cuda", ("cpu", "cuda")) and has_loop("cpu", ("cpu", "cuda"))
    assert not has_loop("cpu", ()) and not has_loop("cuda", ())


def test_graph_platforms_write_the_solves_out() -> None:
    """A platform in `graph_platforms` (here the CPU) gets vmapped factors and solves of n <=
    graph_max_n with no loop and no library call, at any batch (here one where the CPU takes
    LAPACK): numpy's answers, and the column forms' numbers up to float32 rounding (the same
    operations, fused differently), and the library's gradients; above graph_max_n the platform's
    usual lowering."""
    n, batch = _D.small_n + 3, 8  # the compile grows as n²
    m_np, b_np = _spd(np.random.default_rng(batch), batch, n)
    m, b = jnp.asarray(m_np), jnp.asarray(b_np)
    graph = _D.replace(graph_platforms=("cpu",))
    calls: dict[str, tuple[Callable[..., jax.Array], tuple[jax.Array, ...]]] = {
        "cholesky": (jax.vmap(functools.partial(linalg.cholesky, lowering=graph)), (m,)),
        "spd_solve": (jax.vmap(functools.partial(linalg.spd_solve, lowering=graph)), (m, b)),
        "cho_solve": (jax.vmap(functools.partial(linalg.cho_solve, lowering=graph)),
                      (m, jax.vmap(linalg.cholesky)(m), b)),
    }
    columns = {"cholesky": factor._factor_left_front(m), "spd_solve": factor._columns_solve(_D, m, b),
               "cho_solve": factor._substitute_front(_D, factor._factor_left_front(m), b)}
    for name, (f, args) in calls.items():
        hlo = _hlo(f, *args)
        assert _LAPACK_CALL not in hlo and " while(" not in hlo, name
        got = np.asarray(jax.jit(f)(*args))
        np.testing.assert_allclose(got, np.asarray(columns[name]), rtol=1e-5, atol=1e-6, err_msg=name)
        if name == "cholesky":
            np.testing.assert_allclose(got, np.linalg.cholesky(m_np.astype(np.float64)), rtol=1e-4, atol=1e-4)
        else:
            np.testing.assert_allclose(got, _expected(m_np, b_np), rtol=3e-4, atol=3e-5)
    big, _ = _spd(np.random.default_rng(1), 8, _D.graph_max_n + 1)
    graph_cholesky = jax.vmap(functools.partial(linalg.cholesky, lowering=graph))
    assert _LAPACK_CALL in _hlo(graph_cholesky, jnp.asarray(big))
    # gradients through the written-out solves (implicit: the solve again) equal the library's
    w = np.random.default_rng(2).normal(size=(n,)).astype(np.float32)
    grad = jax.vmap(jax.grad(_loss("cho_solve", w), argnums=(0, 1)))
    with settings.use(graph):  # the settings in effect while the solves are traced
        got_g = jax.jit(grad)(m, b)
    with settings.use(_D.replace(graph_platforms=())):
        want_gs = jax.jit(grad)(m, b)
    for g, want_g in zip(got_g, want_gs, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(want_g), rtol=1e-4, atol=1e-5)


def test_many_concurrent_batched_solves_complete() -> None:
    """Six independent batched spd_solves per call, 200 calls: with batched LAPACK this hangs."""
    code = textwrap.dedent("""
        import jax, jax.numpy as jnp, numpy as np
        from brax_physics._src import linalg
        x = np.random.default_rng(0).normal(size=(1024, 14, 14)).astype(np.float32)
        a = jnp.asarray(x @ x.transpose(0, 2, 1) + 14 * np.eye(14, dtype=np.float32))
        b = jnp.ones((1024, 14))
        def f(a, b):
            return sum(jax.vmap(linalg.spd_solve)(a + i * jnp.eye(14), b).sum() for i in range(6))
        g = jax.jit(f)
        for _ in range(200):
            out = jax.block_until_ready(g(a, b))
        print(float(out))
    """)
    # XLA's default optimization: at the suite's cheapest level (conftest.py) the 200 calls run ten
    # times longer, and which kernels run (what could hang) does not depend on it
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if "xla_backend_optimization_level" not in f]
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          check=False, env={**os.environ, "XLA_FLAGS": " ".join(flags)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert np.isfinite(float(proc.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("batch", [16, _D.unroll_min_batch])  # LAPACK, and the column form
def test_not_positive_definite_gives_nan(batch: int) -> None:
    """Like LAPACK's factor, an indefinite matrix yields NaN (never a silent wrong answer)."""
    m, b = _spd(np.random.default_rng(6), batch, 4)
    m[3] = -m[3]
    for solve in _SOLVES.values():
        got = np.asarray(jax.vmap(solve)(jnp.asarray(m), jnp.asarray(b)))
        assert np.isnan(got[3]).all()
        assert np.isfinite(np.delete(got, 3, axis=0)).all()


@pytest.mark.parametrize("solve", _SOLVES)
@pytest.mark.parametrize(("batch", "n"), [(32, 10), (_D.substitute_min_batch, 27)])
def test_gradients_match_jax_scipy(solve: str, batch: int, n: int) -> None:
    """Per-example gradients equal jax.scipy's (for a: on its symmetric part, all an SPD solve sees)."""
    m_np, b_np = _spd(np.random.default_rng(9), batch, n)
    m, b = jnp.asarray(m_np), jnp.asarray(b_np)
    w = np.random.default_rng(10).normal(size=(n,)).astype(np.float32)
    ours = _loss(solve, w)

    def ref(a: jax.Array, r: jax.Array) -> jax.Array:
        l = jsl.cholesky(a, lower=True)
        return (jsl.cho_solve((l, True), r) @ w) + jsl.cho_solve((l, True), 2 * r)[3]

    def sym(g: np.ndarray) -> np.ndarray:
        out: np.ndarray = 0.5 * (g + np.swapaxes(g, -1, -2))
        return out

    got = jax.jit(jax.vmap(jax.grad(ours, argnums=(0, 1))))(m, b)
    want = jax.vmap(jax.grad(ref, argnums=(0, 1)))(m, b)
    np.testing.assert_allclose(sym(np.asarray(got[0])), sym(np.asarray(want[0])), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(got[1]), np.asarray(want[1]), rtol=1e-4, atol=1e-5)
    # through a batched primal (grad of a vmapped sum), against central differences along a
    # symmetric direction
    def total(s: jax.Array) -> jax.Array:
        return jnp.sum(jax.vmap(ours)(m * s, b))

    g = float(jax.grad(total)(jnp.float32(1.0)))
    eps = 1e-3
    fd = (float(total(jnp.float32(1 + eps))) - float(total(jnp.float32(1 - eps)))) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=2e-2)
