"""Tests of the running observation statistics."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from brax_train import running_statistics as rs
from brax_train.types import UInt64


def _batches() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [(rng.normal(size=(4, 3, 2)) * [2.0, 0.01] + [3.0, -1.0]).astype(np.float32) for _ in range(5)]


def test_welford_matches_numpy() -> None:
    s = rs.init_state((2,))
    for b in _batches():
        s = rs.update(s, jnp.asarray(b))
    data = np.concatenate([b.reshape(-1, 2) for b in _batches()])
    np.testing.assert_allclose(np.asarray(s.mean), data.mean(0), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(s.std), data.std(0), rtol=1e-4)
    assert s.count.to_int() == 60
    x = jnp.asarray(data[:3])
    np.testing.assert_allclose(
        np.asarray(rs.normalize(x, s)), (data[:3] - data.mean(0)) / data.std(0), rtol=1e-3, atol=1e-4
    )


def test_ema_tracks_the_moments_and_until_count_freezes() -> None:
    s = rs.init_state({"a": (2,)}, mode="ema")
    for b in _batches():
        s = rs.update(s, {"a": jnp.asarray(b)})
    data = np.concatenate([b.reshape(-1, 2) for b in _batches()])
    # with rate batch/count and equal batch sizes, EMA equals the pooled moments
    np.testing.assert_allclose(np.asarray(s.mean["a"]), data.mean(0), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(s.std["a"]), data.std(0), rtol=1e-3)
    frozen = rs.init_state((2,))
    for b in _batches():
        frozen = rs.update(frozen, jnp.asarray(b), until_count=12)
    first_two = np.concatenate([b.reshape(-1, 2) for b in _batches()[:2]])
    assert frozen.count.to_int() == 24
    np.testing.assert_allclose(np.asarray(frozen.mean), first_two.mean(0), rtol=1e-5)


def test_uint64_counter_carries_past_32_bits() -> None:
    c = UInt64.from_int(2**32 - 3).add(5)
    assert c.to_int() == 2**32 + 2
    assert float(c.to_float32()) == float(np.float32(2**32 + 2))


def test_init_state_fields_hold_their_own_buffers() -> None:
    # A training step donates its state: fields sharing a buffer would be donated twice.
    state = rs.init_state({"a": (3,), "b": (2, 2)})
    leaves = jax.tree.leaves((state.mean, state.summed_variance, state.std))
    pointers = [leaf.unsafe_buffer_pointer() for leaf in leaves]
    assert len(set(pointers)) == len(leaves) == 6
    np.testing.assert_array_equal(np.asarray(state.std["b"]), np.ones((2, 2), np.float32))
    np.testing.assert_array_equal(np.asarray(state.summed_variance["a"]), np.zeros(3, np.float32))
