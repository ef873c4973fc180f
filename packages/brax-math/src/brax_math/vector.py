"""3-vectors: cross products and explicit broadcasting of leading (batch) axes."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
from jax import lax
from jax.typing import ArrayLike


def _match_batch(a: jax.Array, a_rank: int, b: jax.Array, b_rank: int) -> tuple[jax.Array, jax.Array]:
    """`a` and `b` with their leading (batch) axes broadcast explicitly; the last `a_rank` and
    `b_rank` axes are each operand's own.

    Explicit so that a single rotation can be applied to a batch even under
    `jax_numpy_rank_promotion="raise"`, which forbids implicit rank broadcasting.
    """
    batch = jnp.broadcast_shapes(a.shape[: a.ndim - a_rank], b.shape[: b.ndim - b_rank])
    return (jnp.broadcast_to(a, batch + a.shape[a.ndim - a_rank :]),
            jnp.broadcast_to(b, batch + b.shape[b.ndim - b_rank :]))


def cross(a: ArrayLike, b: ArrayLike) -> jax.Array:
    """Cross products a × b of (..., 3) vectors, their leading axes broadcast against each other.

    The values of `jnp.cross`, component for component, built from slices that keep the last axis
    and one concatenation along it. `jnp.cross` stacks the components on a new leading axis and
    moves it last, a transpose that XLA's CPU backend often emits as kernels of their own; these
    ops fuse with their neighbours, and trace to fewer equations.
    """
    x, y = jnp.asarray(a), jnp.asarray(b)
    if x.shape[-1:] != (3,) or y.shape[-1:] != (3,):
        raise ValueError(f"cross: operands must be (..., 3) vectors, got shapes {x.shape} and {y.shape}")
    dtype = jnp.result_type(x, y)
    x, y = _match_batch(x.astype(dtype), 1, y.astype(dtype), 1)
    return _join(_cross_parts(_parts(x), _parts(y)))


def _parts(x: jax.Array) -> tuple[jax.Array, ...]:
    """The components of `x` along its last axis, each a (..., 1) slice (the axis kept)."""
    return tuple(lax.slice_in_dim(x, i, i + 1, axis=x.ndim - 1) for i in range(x.shape[-1]))


def _cross_parts(a: Sequence[jax.Array], b: Sequence[jax.Array]) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The three components of a × b from the components of a and b (as `_parts` gives them)."""
    a0, a1, a2 = a
    b0, b1, b2 = b
    if _same_dtype(*a, *b):  # lax's operations: the same equations, a fraction of the tracing
        mul, sub = lax.mul, lax.sub
        return sub(mul(a1, b2), mul(a2, b1)), sub(mul(a2, b0), mul(a0, b2)), sub(mul(a0, b1), mul(a1, b0))
    return a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0


def _same_dtype(*xs: jax.Array) -> bool:
    """Whether `xs` share one shape and dtype, so that lax's elementwise operations take them as
    they are (jax.numpy's would only check and promote: the same equations, traced more slowly)."""
    return all(x.dtype == xs[0].dtype and x.shape == xs[0].shape for x in xs)


def _join(parts: Sequence[jax.Array]) -> jax.Array:
    """The vectors whose components are `parts` (..., 1): one concatenation along the last axis.

    Functions built of several cross products compute every component first and join once: a
    cross product of a concatenated cross product made XLA's CPU backend emit each inner
    concatenation as a kernel of its own.
    """
    return lax.concatenate(list(parts), parts[0].ndim - 1)
