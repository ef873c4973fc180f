"""Tests for `com.mm`: both lowerings, under vmap at small and large batches, and its derivatives."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from brax_physics._src import com
from brax_physics._src.lowering import products, settings

_D = settings.DEFAULT


def _operands(n: int, k: int, m: int | None, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n, k)).astype(np.float32)
    b = rng.normal(size=(k,) if m is None else (k, m)).astype(np.float32)
    return a, b


@pytest.mark.parametrize("n,k,m", [(4, 4, 6), (4, 5, None), (40, 30, 6), (100, 50, None)])
def test_mm_unbatched_matches_numpy(n: int, k: int, m: int | None) -> None:
    a, b = _operands(n, k, m)
    # Small shapes take the fused form, large ones the dot: both must agree with float64 numpy.
    assert products._use_dot(_D, 1, a.shape, b.shape) == (n >= 40)
    got = com.mm(jnp.asarray(a), jnp.asarray(b))
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("batch", [1, 3, 256])
@pytest.mark.parametrize("axes", [(None, 0), (0, None), (0, 0)])
def test_mm_vmapped_matches_numpy(batch: int, axes: tuple[int | None, int | None]) -> None:
    a, b = _operands(5, 4, 6)
    rng = np.random.default_rng(1)
    a_in = rng.normal(size=(batch, *a.shape)).astype(np.float32) if axes[0] == 0 else a
    b_in = rng.normal(size=(batch, *b.shape)).astype(np.float32) if axes[1] == 0 else b
    want = np.matmul(a_in.astype(np.float64), b_in)
    if want.ndim == 2:  # neither batched cannot happen here; keep numpy's broadcast explicit
        want = np.broadcast_to(want, (batch, *want.shape))
    got = jax.jit(jax.vmap(com.mm, in_axes=axes))(jnp.asarray(a_in), jnp.asarray(b_in))
    assert got.shape == (batch, 5, 6)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_mm_lowering_depends_on_batch_size() -> None:
    a, b = _operands(4, 4, 6)
    hlo_small = jax.jit(jax.vmap(com.mm, (None, 0))).lower(a, np.stack([b] * 2)).as_text()
    hlo_large = jax.jit(jax.vmap(com.mm, (None, 0))).lower(a, np.stack([b] * 512)).as_text()
    assert "dot_general" not in hlo_small
    assert "dot_general" in hlo_large


def test_mm_gradients_match_matmul_forward_and_reverse() -> None:
    a_np, b_np = _operands(4, 5, 3, seed=2)
    a, b = jnp.asarray(a_np), jnp.asarray(b_np)

    def loss(mm: object, a: jax.Array, b: jax.Array) -> jax.Array:
        return jnp.sum(jnp.sin(mm(a, b)))  # type: ignore[operator]

    def ref(a: jax.Array, b: jax.Array) -> jax.Array:
        return jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST)

    for argnums in (0, 1, (0, 1)):
        got = jax.grad(lambda a, b: loss(com.mm, a, b), argnums=argnums)(a, b)
        want = jax.grad(lambda a, b: loss(ref, a, b), argnums=argnums)(a, b)
        jax.tree.map(lambda g, w: np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6), got, want)
    jac = jax.jacfwd(lambda b: com.mm(a, b))(b)
    np.testing.assert_allclose(jac, jax.jacfwd(lambda b: ref(a, b))(b), rtol=1e-6, atol=1e-6)
    # Per-example gradients under a large vmap: batching rule and product rule together.
    bs = jnp.asarray(np.random.default_rng(3).normal(size=(64, 5, 3)).astype(np.float32))
    got_b = jax.vmap(jax.grad(lambda b: loss(com.mm, a, b)))(bs)
    want_b = jax.vmap(jax.grad(lambda b: loss(ref, a, b)))(bs)
    np.testing.assert_allclose(got_b, want_b, rtol=1e-5, atol=1e-6)


def test_fused_platforms_drop_doubly_batched_dots() -> None:
    a, _ = _operands(23, 6, 23)
    rng = np.random.default_rng(4)
    both = (rng.normal(size=(512, 23, 6)).astype(np.float32),
            rng.normal(size=(512, 6, 23)).astype(np.float32))
    one = (a, both[1])

    def lowered(platform: str, axes: tuple[int | None, int | None], *args: np.ndarray,
                low: settings.Lowering = _D) -> str:
        fn = jax.jit(jax.vmap(com.mm, in_axes=axes))
        with settings.use(low):  # the settings `com.mm` reads while it is traced
            text: str = fn.trace(*args).lower(lowering_platforms=(platform,)).as_text()
        return text

    # Both operands batched: a CUDA program adds the k = 6 products written out (no reduction that
    # could hold them all), a CPU one keeps its dot; a longer sum keeps the dot everywhere.
    cuda = lowered("cuda", (0, 0), *both)
    assert "dot_general" not in cuda and "stablehlo.reduce" not in cuda
    assert "dot_general" in lowered("cpu", (0, 0), *both)
    k = _D.fused_max_k + 1
    long_k = (np.ones((512, 4, k), np.float32), np.ones((512, k, 4), np.float32))
    assert "dot_general" in lowered("cuda", (0, 0), *long_k)
    # A constant operand keeps the dot everywhere (XLA's GPU gemm fusion, no batched call).
    assert "dot_general" in lowered("cuda", (None, 0), *one)
    assert "dot_general" in lowered("cuda", (0, 0), *both, low=_D.replace(fused_platforms=()))
    # The fused form, run on this CPU, gives the dot's numbers.
    want = np.matmul(both[0].astype(np.float64), both[1])
    with settings.use(_D.replace(fused_platforms=("cpu",))):
        got = jax.jit(jax.vmap(com.mm))(*map(jnp.asarray, both))
        assert "dot_general" not in jax.jit(jax.vmap(com.mm)).lower(*both).as_text()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
