"""Numerically safe elementwise helpers: finite values and finite, correct gradients at zero."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

# Below this squared norm a vector is treated as zero. Squared float32 epsilon scale keeps the
# threshold meaningful for unit-scale physics quantities without hiding genuinely small vectors.
_EPS = 1e-12


def safe_norm(x: jax.Array, axis: int = -1, keepdims: bool = False) -> jax.Array:
    """Euclidean norm along `axis` whose gradient is 0 (not NaN) at the zero vector."""
    sq = jnp.sum(x * x, axis=axis, keepdims=True)
    is_zero = sq < _EPS * _EPS
    # The double-where keeps sqrt's infinite derivative at 0 out of the backward pass.
    safe_sq = jnp.where(is_zero, jnp.ones_like(sq), sq)
    n = jnp.where(is_zero, jnp.zeros_like(sq), jnp.sqrt(safe_sq))
    return n if keepdims else jnp.squeeze(n, axis=axis)


def normalize(x: jax.Array, axis: int = -1) -> jax.Array:
    """Unit vector along `axis`; the zero vector maps to zero with a zero gradient."""
    n = safe_norm(x, axis=axis, keepdims=True)
    return x / jnp.where(n > 0, n, jnp.ones_like(n))


def safe_div(num: jax.Array, den: jax.Array, fallback: float = 0.0) -> jax.Array:
    """`num / den`, returning `fallback` (with zero gradient) where `den == 0`."""
    zero = den == 0
    safe_den = jnp.where(zero, jnp.ones_like(den), den)
    return jnp.where(zero, jnp.full_like(num / safe_den, fallback), num / safe_den)


# arccos/arcsin have infinite derivatives at |x| = 1, which rounding reaches constantly (the
# cosine of a tiny angle is 1.0 in float32). A custom JVP clamps the input and caps the slope.
_SLOPE_CAP = 1e-6


@jax.custom_jvp
def safe_arccos(x: jax.Array) -> jax.Array:
    """arccos with the input clipped to [-1, 1] and a finite derivative at the ends."""
    return jnp.arccos(jnp.clip(x, -1.0, 1.0))


@safe_arccos.defjvp
def _safe_arccos_jvp(primals: tuple[jax.Array], tangents: tuple[jax.Array]) -> tuple[jax.Array, jax.Array]:
    (x,), (dx,) = primals, tangents
    xc = jnp.clip(x, -1.0, 1.0)
    denom = jnp.sqrt(jnp.maximum(1.0 - xc * xc, _SLOPE_CAP))
    return safe_arccos(x), -dx / denom


@jax.custom_jvp
def safe_arcsin(x: jax.Array) -> jax.Array:
    """arcsin with the input clipped to [-1, 1] and a finite derivative at the ends."""
    return jnp.arcsin(jnp.clip(x, -1.0, 1.0))


@safe_arcsin.defjvp
def _safe_arcsin_jvp(primals: tuple[jax.Array], tangents: tuple[jax.Array]) -> tuple[jax.Array, jax.Array]:
    (x,), (dx,) = primals, tangents
    xc = jnp.clip(x, -1.0, 1.0)
    denom = jnp.sqrt(jnp.maximum(1.0 - xc * xc, _SLOPE_CAP))
    return safe_arcsin(x), dx / denom


def all_finite(tree: Any) -> jax.Array:
    """() bool: every floating (or complex) leaf of `tree` is finite; other leaves are ignored."""
    ok = jnp.asarray(True)
    for leaf in jax.tree.leaves(tree):
        if jnp.issubdtype(jnp.result_type(leaf), jnp.inexact):
            ok = ok & jnp.all(jnp.isfinite(leaf))
    return ok
