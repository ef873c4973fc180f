"""dm_control's reward shaping (`dm_control.utils.rewards.tolerance`) in JAX."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

SIGMOIDS = ("gaussian", "hyperbolic", "long_tail", "reciprocal", "cosine", "linear", "quadratic",
            "tanh_squared")
"""The sigmoid names `tolerance` accepts."""


def _sigmoid(x: jax.Array, value_at_1: float, sigmoid: str) -> jax.Array:
    """1 at x = 0, `value_at_1` at |x| = 1, falling off by the named shape."""
    if sigmoid in ("cosine", "linear", "quadratic"):
        if not 0 <= value_at_1 < 1:
            raise ValueError(f"tolerance: value_at_margin must be in [0, 1) for {sigmoid!r}, "
                             f"got {value_at_1}")
    elif sigmoid in SIGMOIDS:
        if not 0 < value_at_1 < 1:
            raise ValueError(f"tolerance: value_at_margin must be in (0, 1) for {sigmoid!r}, "
                             f"got {value_at_1}")
    else:
        raise ValueError(f"tolerance: unknown sigmoid {sigmoid!r}; choices: {SIGMOIDS}")
    if sigmoid == "gaussian":
        return jnp.exp(-0.5 * (x * math.sqrt(-2 * math.log(value_at_1))) ** 2)
    if sigmoid == "hyperbolic":
        return 1 / jnp.cosh(x * math.acosh(1 / value_at_1))
    if sigmoid == "long_tail":
        return 1 / ((x * math.sqrt(1 / value_at_1 - 1)) ** 2 + 1)
    if sigmoid == "reciprocal":
        return 1 / (jnp.abs(x) * (1 / value_at_1 - 1) + 1)
    if sigmoid == "cosine":
        s = x * (math.acos(2 * value_at_1 - 1) / math.pi)
        return jnp.where(jnp.abs(s) < 1, (1 + jnp.cos(math.pi * s)) / 2, 0.0)
    if sigmoid == "linear":
        s = x * (1 - value_at_1)
        return jnp.where(jnp.abs(s) < 1, 1 - s, 0.0)
    if sigmoid == "quadratic":
        s = x * math.sqrt(1 - value_at_1)
        return jnp.where(jnp.abs(s) < 1, 1 - s * s, 0.0)
    return 1 - jnp.tanh(x * math.atanh(math.sqrt(1 - value_at_1))) ** 2  # tanh_squared


def tolerance(x: jax.Array, bounds: tuple[float, float] = (0.0, 0.0), margin: float = 0.0,
              sigmoid: str = "gaussian", value_at_margin: float = 0.1) -> jax.Array:
    """1 where `x` lies in [lower, upper], else a sigmoid of the distance to the nearest bound in units
    of `margin` (0 outside when `margin` is 0): dm_control's `rewards.tolerance`, elementwise."""
    lower, upper = bounds
    if lower > upper:
        raise ValueError(f"tolerance: lower bound {lower} exceeds upper bound {upper}")
    if margin < 0:
        raise ValueError(f"tolerance: margin must be non-negative, got {margin}")
    x = jnp.asarray(x)
    inside = (lower <= x) & (x <= upper)
    if margin == 0:
        dtype = x.dtype if jnp.issubdtype(x.dtype, jnp.floating) else jnp.float32
        return jnp.where(inside, 1.0, 0.0).astype(dtype)
    d = jnp.where(x < lower, lower - x, x - upper) / margin
    return jnp.where(inside, 1.0, _sigmoid(d, value_at_margin, sigmoid))
