"""Shared types of brax-train: keys, parameters, metrics, transitions and a 64-bit counter."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

import jax
import jax.numpy as jnp
import numpy as np

PRNGKey: TypeAlias = jax.Array
"""A raw (2,) uint32 JAX key."""
Params: TypeAlias = Any
"""A pytree of network parameters."""
Observation: TypeAlias = jax.Array | Mapping[str, jax.Array]
"""An observation: one array or a mapping from names to arrays."""
Metrics: TypeAlias = Mapping[str, float]
"""Host-side metrics reported to `progress_fn`."""
Policy: TypeAlias = Callable[[Observation, PRNGKey], tuple[jax.Array, dict[str, Any]]]
"""`policy(obs, key) -> (action, extras)`."""

_TWO_32 = 1 << 32


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class UInt64:
    """An unsigned 64-bit counter made of two uint32 words; works without `jax_enable_x64`."""

    hi: jax.Array
    """() uint32 high word."""
    lo: jax.Array
    """() uint32 low word."""

    @staticmethod
    def from_int(value: int) -> UInt64:
        """The counter holding the Python int `value` (0 <= value < 2**64)."""
        if not 0 <= value < 1 << 64:
            raise ValueError(f"UInt64 holds 0 <= value < 2**64, got {value}")
        return UInt64(hi=jnp.asarray(np.uint32(value >> 32)), lo=jnp.asarray(np.uint32(value % _TWO_32)))

    def add(self, n: jax.Array | int) -> UInt64:
        """`self + n` for a non-negative `n` below 2**32 (traceable)."""
        n32 = jnp.asarray(n).astype(jnp.uint32)
        lo = self.lo + n32
        carry = (lo < self.lo).astype(jnp.uint32)
        return UInt64(hi=self.hi + carry, lo=lo)

    def to_float32(self) -> jax.Array:
        """() float32 approximation (24-bit mantissa) for divisions."""
        out: jax.Array = self.hi.astype(jnp.float32) * jnp.float32(_TWO_32) + self.lo.astype(jnp.float32)
        return out

    def to_int(self) -> int:
        """The exact value as a Python int (host only)."""
        return (int(np.asarray(self.hi)) << 32) + int(np.asarray(self.lo))


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Transition:
    """A batch of environment transitions collected by `acting.generate_unroll`."""

    observation: Any
    """Observation before the step."""
    action: jax.Array
    """Action taken (after the policy's postprocessing)."""
    reward: jax.Array
    """Reward of the step."""
    discount: jax.Array
    """1 - done."""
    next_observation: Any
    """Observation the step ended in (before any auto-reset: `info['final_obs']`)."""
    extras: dict[str, Any] = dataclasses.field(default_factory=dict)
    """`policy_extras` (log-probs, raw actions) and `state_extras` (truncation, episode metrics)."""


__all__ = ["Metrics", "Observation", "PRNGKey", "Params", "Policy", "Transition", "UInt64"]
