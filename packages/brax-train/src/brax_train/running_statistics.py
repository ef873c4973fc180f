"""Running mean/std of observations (Welford or EMA) for observation normalization.

Statistics are computed over the whole (global) batch: when the batch is sharded over devices,
the sums become cross-device reductions, so every device count gives the same statistics.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Literal

import jax
import jax.numpy as jnp

from brax_train.types import UInt64

NormalizationMode = Literal["welford", "ema"]
"""`welford`: exact running moments; `ema`: rate batch/count moving average (RSL-RL style)."""

STD_MIN = 1e-6
"""Lower clip of the running standard deviation."""
STD_MAX = 1e6
"""Upper clip of the running standard deviation."""


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class RunningStatisticsState:
    """Running statistics of a nest of arrays (an observation, or a dict of them)."""

    count: UInt64
    """Number of samples seen (64-bit)."""
    mean: Any
    """Running mean, same nest as the data (per-sample shapes)."""
    summed_variance: Any
    """Welford: sum of squared deviations; EMA: the variance itself."""
    std: Any
    """Clipped standard deviation used for normalization."""
    std_eps: float = dataclasses.field(default=0.0, metadata={"static": True})
    """Added to the variance before the square root."""
    mode: str = dataclasses.field(default="welford", metadata={"static": True})
    """`welford` or `ema`."""


def _lead(a: jax.Array, ndim: int) -> jax.Array:
    """`a` with leading unit axes up to `ndim` dimensions (explicit broadcasting)."""
    return jnp.reshape(a, (1,) * (ndim - a.ndim) + a.shape)


def init_state(shapes: Any, std_eps: float = 0.0, mode: str = "welford") -> RunningStatisticsState:
    """Zero-count statistics for a nest of per-sample shapes (tuples) or arrays."""
    if mode not in ("welford", "ema"):
        raise ValueError(f"normalize_observations_mode must be 'welford' or 'ema', got {mode!r}")

    def shape_of(x: Any) -> tuple[int, ...]:
        return tuple(x) if isinstance(x, tuple) else tuple(jnp.shape(x))

    is_leaf = lambda x: isinstance(x, tuple) and all(isinstance(d, int) for d in x)  # noqa: E731
    # One array per field: a training step donates its state (runner._loop._chunk_fn), and two fields
    # sharing one buffer would be donated twice (XLA refuses the call).
    def filled(value: float) -> Any:
        return jax.tree.map(lambda s: jnp.full(shape_of(s), value, jnp.float32), shapes, is_leaf=is_leaf)

    return RunningStatisticsState(
        count=UInt64.from_int(0),
        mean=filled(0.0),
        summed_variance=filled(0.0),
        std=filled(1.0),
        std_eps=float(std_eps),
        mode=mode,
    )


def _batch_dims(state: RunningStatisticsState, batch: Any) -> tuple[int, ...] | None:
    """The leading batch axes of `batch` over the statistics' shapes (None for an empty batch);
    ValueError when its structure or shapes do not match."""
    batch_def: Any = jax.tree.structure(batch)
    if batch_def != jax.tree.structure(state.mean):
        raise ValueError(
            f"batch structure {jax.tree.structure(batch)} differs from the statistics' "
            f"{jax.tree.structure(state.mean)}"
        )
    leaves = jax.tree.leaves(batch)
    if not leaves:
        return None
    ref = jax.tree.leaves(state.mean)[0]
    batch_dims = tuple(leaves[0].shape[: leaves[0].ndim - ref.ndim])
    for leaf, m in zip(leaves, jax.tree.leaves(state.mean), strict=True):
        if tuple(leaf.shape) != batch_dims + tuple(m.shape):
            raise ValueError(f"batch leaf shape {leaf.shape} is not {batch_dims} + {m.shape}")
    return batch_dims


def update(
    state: RunningStatisticsState, batch: Any, until_count: int | None = None
) -> RunningStatisticsState:
    """Statistics after also seeing `batch` (leading axes are batch axes; the rest match `mean`).

    With `until_count`, statistics stop changing once more than `until_count` samples were seen.
    """
    batch_dims = _batch_dims(state, batch)
    if batch_dims is None:
        return state
    axes = tuple(range(len(batch_dims)))
    n = math.prod(int(d) for d in batch_dims)
    count = state.count.add(n)
    count_f = count.to_float32()
    frozen = jnp.asarray(False)
    if until_count is not None:
        frozen = state.count.to_float32() > jnp.float32(until_count)

    if state.mode == "ema":
        rate = jnp.float32(n) / count_f

        def ema(mean: jax.Array, var: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
            x = x.astype(jnp.float32)
            bm = jnp.mean(x, axis=axes)
            bv = jnp.mean(jnp.square(x - _lead(bm, x.ndim)), axis=axes)
            delta = bm - mean
            new_mean = mean + rate * delta
            new_var = var + rate * (bv - var + delta * (bm - new_mean))
            return new_mean, new_var

        pairs = jax.tree.map(ema, state.mean, state.summed_variance, batch)

        def var_of(v: jax.Array) -> jax.Array:
            return jnp.maximum(v, 0.0)
    else:

        def welford(mean: jax.Array, sv: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
            x = x.astype(jnp.float32)
            d_old = x - _lead(mean, x.ndim)
            new_mean = mean + jnp.sum(d_old, axis=axes) / count_f
            new_sv = sv + jnp.sum(d_old * (x - _lead(new_mean, x.ndim)), axis=axes)
            return new_mean, new_sv

        pairs = jax.tree.map(welford, state.mean, state.summed_variance, batch)

        def var_of(v: jax.Array) -> jax.Array:
            return jnp.maximum(v, 0.0) / count_f

    is_pair = lambda x: isinstance(x, tuple) and len(x) == 2 and not isinstance(x[0], tuple)  # noqa: E731
    mean = jax.tree.map(lambda p: p[0], pairs, is_leaf=is_pair)
    second = jax.tree.map(lambda p: p[1], pairs, is_leaf=is_pair)
    std = jax.tree.map(lambda v: jnp.clip(jnp.sqrt(var_of(v) + state.std_eps), STD_MIN, STD_MAX), second)
    new = RunningStatisticsState(
        count=count, mean=mean, summed_variance=second, std=std, std_eps=state.std_eps, mode=state.mode
    )
    if until_count is None:
        return new
    kept: RunningStatisticsState = jax.tree.map(lambda a, b: jnp.where(frozen, a, b), state, new)
    return kept


def normalize(batch: Any, stats: RunningStatisticsState | None) -> Any:
    """`(x - mean) / std` leafwise for floating leaves; identity when `stats` is None."""
    if stats is None:
        return batch

    def one(x: jax.Array, mean: jax.Array, std: jax.Array) -> jax.Array:
        if not jnp.issubdtype(x.dtype, jnp.inexact):
            return x
        return (x - _lead(mean, x.ndim)) / _lead(std, x.ndim)

    return jax.tree.map(one, batch, stats.mean, stats.std)


def select(stats: RunningStatisticsState | None, key: str) -> RunningStatisticsState | None:
    """The statistics of entry `key` of dict-valued statistics (None stays None)."""
    if stats is None:
        return None
    return RunningStatisticsState(
        count=stats.count,
        mean=stats.mean[key],
        summed_variance=stats.summed_variance[key],
        std=stats.std[key],
        std_eps=stats.std_eps,
        mode=stats.mode,
    )


__all__ = ["NormalizationMode", "RunningStatisticsState", "init_state", "normalize", "select", "update"]
