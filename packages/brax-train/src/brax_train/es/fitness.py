"""Fitness shaping and the search-gradient estimate of OpenAI-style evolution strategies.

Salimans et al. 2017 (arXiv:1703.03864): antithetic pairs `theta +- sigma * eps_i`, returns shaped
into weights, and the ascent direction `sum_i (w+_i - w-_i) eps_i / n - l2coeff * theta`, which is
`2 * sigma` times the finite-difference estimate of the gradient of the smoothed objective (the
`2 * sigma` is absorbed by the learning rate, as in Google Brax).
"""

from __future__ import annotations

import enum
from typing import Any

import jax
import jax.numpy as jnp


class FitnessShaping(enum.StrEnum):
    """How returns become update weights (Google Brax's `es.train.FitnessShaping` members; strings, so
    configs record them as their names)."""

    ORIGINAL = "ORIGINAL"
    """The returns themselves."""
    CENTERED_RANK = "CENTERED_RANK"
    """Ranks scaled to [-0.5, 0.5] (Salimans et al. 2017)."""
    WIERSTRA = "WIERSTRA"
    """Log-rank utilities of natural evolution strategies (Wierstra et al. 2014), summing to zero."""


def fitness_shaping_of(value: Any) -> FitnessShaping:
    """`value` as a `FitnessShaping`: a member, any enum member with one of its names, or the name."""
    if isinstance(value, FitnessShaping):
        return value
    name = value.name if isinstance(value, enum.Enum) else value
    if isinstance(name, str) and name.upper() in FitnessShaping.__members__:
        return FitnessShaping[name.upper()]
    raise ValueError(f"fitness_shaping must be one of {', '.join(FitnessShaping.__members__)}, got {value!r}")


def _ranks(x: jax.Array) -> jax.Array:
    """(n,) float32 ranks 0 (lowest) .. n - 1 (highest); ties keep their order (stable sort)."""
    ranks: jax.Array = jnp.argsort(jnp.argsort(x)).astype(jnp.float32)
    return ranks


def centered_rank(x: jax.Array) -> jax.Array:
    """(n,) ranks of `x` (n,) scaled to [-0.5, 0.5] (n >= 2)."""
    out: jax.Array = _ranks(x) / jnp.float32(x.shape[0] - 1) - 0.5
    return out


def wierstra(x: jax.Array) -> jax.Array:
    """(n,) utilities `max(0, log(n/2 + 1) - log(k))` of the k-th best, normalized, minus 1/n."""
    n = x.shape[0]
    k = jnp.float32(n) - _ranks(x)  # the best is 1, the worst n
    u = jnp.maximum(0.0, jnp.log(jnp.float32(n / 2 + 1)) - jnp.log(k))
    out: jax.Array = u / jnp.sum(u) - jnp.float32(1.0 / n)
    return out


def shape_fitness(returns: jax.Array, shaping: FitnessShaping, center: bool = False) -> jax.Array:
    """(n,) weights of `returns` (n,); with `center` also standardized (mean 0, std 1)."""
    if shaping is FitnessShaping.CENTERED_RANK:
        w = centered_rank(returns)
    elif shaping is FitnessShaping.WIERSTRA:
        w = wierstra(returns)
    else:
        w = returns
    if center:
        w = (w - jnp.mean(w)) / (1e-6 + jnp.std(w))
    return w


def pair_weights(weights: jax.Array) -> jax.Array:
    """(n,) `w+_i - w-_i` of antithetic weights laid out `[w+_1..n, w-_1..n]` (2n,)."""
    plus, minus = jnp.split(weights, 2)
    return plus - minus


def ascent_direction(params: Any, noise: Any, weights: jax.Array, l2coeff: float = 0.0) -> Any:
    """`sum_i weights_i * noise_i / n - l2coeff * params` leafwise (noise leaves (n, ...), weights (n,))."""
    n = weights.shape[0]

    def leaf(p: jax.Array, eps: jax.Array) -> jax.Array:
        out: jax.Array = jnp.tensordot(weights, eps, axes=1) / jnp.float32(n) - l2coeff * p
        return out

    return jax.tree.map(leaf, params, noise)


__all__ = [
    "FitnessShaping",
    "ascent_direction",
    "centered_rank",
    "fitness_shaping_of",
    "pair_weights",
    "shape_fitness",
    "wierstra",
]
