"""Static row helpers of the kinematics: takes as slices or gathers, assembly without scatters."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from brax_physics._src.kinematics import assemble_rows, take_rows


def test_take_rows_matches_indexing_for_runs_and_scattered_indices() -> None:
    x = jnp.arange(24.0).reshape(8, 3)
    for idx in (np.array([2, 3, 4]), np.array([5, 0, 0, 7]), np.array([], np.int32)):
        np.testing.assert_array_equal(take_rows(x, idx), np.asarray(x)[idx])


def test_assemble_rows_places_parts_and_zero_fills_the_rest() -> None:
    a = jnp.asarray([[1.0, 2.0], [3.0, 4.0]])
    b = jnp.asarray([[5.0, 6.0]])
    got = assemble_rows([a, b], [np.array([4, 1]), np.array([2])], 6)
    want = np.zeros((6, 2), np.float32)
    want[[4, 1]] = np.asarray(a)
    want[2] = np.asarray(b)[0]
    np.testing.assert_array_equal(got, want)
    # under vmap and jit the rows are the same (the step assembles per env)
    batched = jax.jit(jax.vmap(lambda u: assemble_rows([u], [np.array([2, 0])], 3)))(jnp.ones((4, 2)))
    np.testing.assert_array_equal(batched, np.tile([1.0, 0.0, 1.0], (4, 1)))


def test_assemble_rows_rejects_repeated_rows() -> None:
    with pytest.raises(ValueError, match=r"assemble_rows: rows repeat among \[1, 3, 1\]"):
        assemble_rows([jnp.zeros(2), jnp.zeros(1)], [np.array([1, 3]), np.array([1])], 4)
