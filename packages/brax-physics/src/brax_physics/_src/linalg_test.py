"""`spd_solve` against float64 numpy, unbatched and under vmap, in both lowerings (LAPACK, columns)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from brax_physics._src import linalg


def _spd(rng: np.random.Generator, batch: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """`batch` random SPD matrices (condition ~1e2) and right-hand sides, float32."""
    a = rng.normal(size=(batch, n, n))
    m = a @ np.swapaxes(a, 1, 2) + n * np.eye(n)
    return m.astype(np.float32), rng.normal(size=(batch, n)).astype(np.float32)


def _expected(m: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.linalg.solve(m.astype(np.float64), b.astype(np.float64)[..., None])[..., 0]


@pytest.mark.parametrize("n", [1, 3, 14, linalg.UNROLL_MAX_N, linalg.UNROLL_MAX_N + 1])
@pytest.mark.parametrize("batch", [1, linalg.UNROLL_MIN_BATCH, 64])
def test_batched_matches_float64(n: int, batch: int) -> None:
    m, b = _spd(np.random.default_rng(n * 100 + batch), batch, n)
    got = np.asarray(jax.jit(jax.vmap(linalg.spd_solve))(m, b))
    assert got.shape == (batch, n)
    np.testing.assert_allclose(got, _expected(m, b), rtol=2e-4, atol=2e-5)


def test_unbatched_matches_float64() -> None:
    m, b = _spd(np.random.default_rng(1), 1, 14)
    got = np.asarray(jax.jit(linalg.spd_solve)(m[0], b[0]))
    np.testing.assert_allclose(got, _expected(m, b)[0], rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("axes", [(0, None), (None, 0)])
def test_one_operand_batched(axes: tuple[int | None, int | None]) -> None:
    m, b = _spd(np.random.default_rng(2), 32, 6)
    mm = m if axes[0] == 0 else m[0]
    bb = b if axes[1] == 0 else b[0]
    got = np.asarray(jax.vmap(linalg.spd_solve, in_axes=axes)(mm, bb))
    want = _expected(m if axes[0] == 0 else np.broadcast_to(m[0], m.shape),
                     b if axes[1] == 0 else np.broadcast_to(b[0], b.shape))
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)


def test_nested_vmap() -> None:
    m, b = _spd(np.random.default_rng(3), 4 * 16, 5)
    got = np.asarray(jax.vmap(jax.vmap(linalg.spd_solve))(m.reshape(4, 16, 5, 5), b.reshape(4, 16, 5)))
    np.testing.assert_allclose(got.reshape(64, 5), _expected(m, b), rtol=2e-4, atol=2e-5)


def test_batched_lowering_has_no_lapack_call() -> None:
    """Inside the thresholds the batched solve has no LAPACK call; outside it keeps one."""
    m, b = _spd(np.random.default_rng(4), 64, 14)
    hlo = jax.jit(jax.vmap(linalg.spd_solve)).lower(m, b).as_text()
    assert "potrf" not in hlo.lower() and "cholesky" not in hlo.lower()
    m2, b2 = _spd(np.random.default_rng(5), 64, linalg.UNROLL_MAX_N + 1)
    hlo2 = jax.jit(jax.vmap(linalg.spd_solve)).lower(m2, b2).as_text()
    assert "potrf" in hlo2.lower() or "cholesky" in hlo2.lower()


def test_not_positive_definite_gives_nan() -> None:
    """Like LAPACK's factor, an indefinite matrix yields NaN (never a silent wrong answer)."""
    m, b = _spd(np.random.default_rng(6), 16, 4)
    m[3] = -m[3]
    got = np.asarray(jax.vmap(linalg.spd_solve)(m, b))
    assert np.isnan(got[3]).all()
    assert np.isfinite(np.delete(got, 3, axis=0)).all()


def test_gradients_match_lapack() -> None:
    """Per-example gradients through the batched column form equal jax.scipy's."""
    import jax.scipy.linalg as jsl

    m_np, b_np = _spd(np.random.default_rng(9), 32, 10)
    m, b = jnp.asarray(m_np), jnp.asarray(b_np)
    w = np.random.default_rng(10).normal(size=(10,)).astype(np.float32)

    def ours(a: jax.Array, r: jax.Array) -> jax.Array:
        return (linalg.spd_solve(a, r) @ w) + linalg.spd_solve(a, 2 * r)[3]

    def ref(a: jax.Array, r: jax.Array) -> jax.Array:
        l = jsl.cholesky(a, lower=True)
        return (jsl.cho_solve((l, True), r) @ w) + jsl.cho_solve((l, True), 2 * r)[3]

    got = jax.jit(jax.vmap(jax.grad(ours, argnums=(0, 1))))(m, b)
    want = jax.vmap(jax.grad(ref, argnums=(0, 1)))(m, b)
    for g, e in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-4, atol=1e-5)
    # and through a batched primal (grad of a vmapped sum) as well
    got_sum = jax.grad(lambda a: jnp.sum(jax.vmap(ours)(a, b)))(m)
    want_sum = jax.grad(lambda a: jnp.sum(jax.vmap(ref)(a, b)))(m)
    np.testing.assert_allclose(np.asarray(got_sum), np.asarray(want_sum), rtol=1e-4, atol=1e-5)
