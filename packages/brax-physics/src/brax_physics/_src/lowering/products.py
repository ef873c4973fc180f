"""The forms of `com.mm`'s matrix products: one dot, a fused multiply-and-sum, or the products
written out, by batch size and platform (the `Lowering` settings).

Below `dot_min_work` multiply-adds the products are tiny (mostly a constant 0/1 tree mask times a
few vectors): XLA's CPU dot runtime call costs more than the arithmetic, so a fused multiply-and-sum
wins (and compiles faster); from it on the dot's blocked kernel wins. On `fused_platforms` a product
with the batch on both operands is written out whatever its size: on a GPU such a batched dot becomes
a cuBLAS call, launched by the host between the CUDA graphs that hold the rest of the step, with a
workspace buffer that does not shrink with the batch. On a CPU the dot is faster.
"""

from __future__ import annotations

import functools
from typing import Any, Final

import jax
import jax.numpy as jnp
from jax import custom_batching
from jax.custom_derivatives import SymbolicZero

from brax_physics._src.lowering import settings
from brax_physics._src.lowering.settings import Lowering

_HI: Final = jax.lax.Precision.HIGHEST


def _use_dot(s: Lowering, batch: int, a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> bool:
    """Whether `batch` products (n, k) @ (k, m) or (k,) are big enough for a dot."""
    m = b_shape[1] if len(b_shape) == 2 else 1
    return batch * a_shape[0] * a_shape[1] * m >= s.dot_min_work


def dot(a: jax.Array, b: jax.Array) -> jax.Array:
    """(n, k) @ (k, m) or (k,) as one full-float32 dot (never TF32/bf16, whatever the default)."""
    return jnp.matmul(a, b, precision=_HI)


def _mul_sum(a: jax.Array, b: jax.Array) -> jax.Array:
    """(n, k) @ (k, m) or (k,) as an elementwise product and a sum: fuses with its neighbours."""
    if b.ndim == 1:
        return jnp.sum(a * b[None, :], axis=-1)
    return jnp.sum(a[:, :, None] * b[None, :, :], axis=1)


def _outer_sum(a: jax.Array, b: jax.Array) -> jax.Array:
    """(n, k) @ (k, m) or (k,) as k products written out and added: one elementwise kernel that
    holds nothing larger than its output (`_mul_sum` keeps the (n, k, m) products)."""
    if b.ndim == 1:
        return _mul_sum(a, b)
    out = a[:, 0, None] * b[None, 0, :]
    for i in range(1, a.shape[1]):
        out = out + a[:, i, None] * b[None, i, :]
    return out


@functools.cache
def mm_fn(s: Lowering) -> custom_batching.custom_vmap:
    """Full-float32 (n, k) @ (k, m) or (k,), in the form `s` picks for its size (a static choice)."""

    @custom_batching.custom_vmap
    def product(a: jax.Array, b: jax.Array) -> jax.Array:
        return (dot if _use_dot(s, 1, a.shape, b.shape) else _mul_sum)(a, b)

    @product.def_vmap
    def _(axis_size: int, in_batched: list[bool], a: jax.Array, b: jax.Array) -> tuple[jax.Array, bool]:
        a_shape = a.shape[1:] if in_batched[0] else a.shape
        b_shape = b.shape[1:] if in_batched[1] else b.shape
        axes = (0 if in_batched[0] else None, 0 if in_batched[1] else None)
        if not _use_dot(s, axis_size, a_shape, b_shape):
            return jax.vmap(_mul_sum, in_axes=axes)(a, b), True
        batched_dot = jax.vmap(dot, in_axes=axes)
        if not (all(in_batched) and s.fused_platforms) or (len(b_shape) == 2 and a_shape[1] > s.fused_max_k):
            return batched_dot(a, b), True
        fused = jax.vmap(_outer_sum, in_axes=axes)
        out: jax.Array = jax.lax.platform_dependent(a, b, default=batched_dot,
                                                    **{name: fused for name in s.fused_platforms})
        return out, True

    return product


def mm(a: jax.Array, b: jax.Array) -> jax.Array:
    """Full-float32 matrix product (n, k) @ (k, m) or (k,), its form chosen by batch size
    (by the `Lowering` settings in effect)."""
    return _mm(settings.current(), a, b)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _mm(s: Lowering, a: jax.Array, b: jax.Array) -> jax.Array:
    out: jax.Array = mm_fn(s)(a, b)
    return out


def _mm_jvp(
    s: Lowering, primals: tuple[jax.Array, jax.Array], tangents: tuple[Any, Any]
) -> tuple[jax.Array, jax.Array]:
    """Product rule through plain dots: linear in the tangents, so reverse mode transposes it."""
    a, b = primals
    da, db = tangents
    out = _mm(s, a, b)
    # Most `a` are constant tree masks: a symbolic-zero tangent costs no product at all.
    terms = []
    if not isinstance(da, SymbolicZero):
        terms.append(dot(da, b))
    if not isinstance(db, SymbolicZero):
        terms.append(dot(a, db))
    if not terms:
        return out, jnp.zeros_like(out)
    return out, terms[0] if len(terms) == 1 else terms[0] + terms[1]


_mm.defjvp(_mm_jvp, symbolic_zeros=True)
