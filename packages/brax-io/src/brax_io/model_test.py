"""Tests for brax_io.model: pickle-free params files, structure round trips, atomic writes."""

import dataclasses
import os
import pathlib
import zipfile
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from brax_io import model


class Pair(NamedTuple):
    mean: Any
    std: Any


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Layer:
    w: jax.Array
    b: jax.Array


def _params() -> dict[str, Any]:
    return {
        "policy": {
            "dense_0": {
                "kernel": np.arange(6, dtype=np.float32).reshape(2, 3),
                "bias": jnp.zeros(3, jnp.float32),
            }
        },
        "normalizer": Pair(mean=np.ones(4, np.float32), std=np.full(4, 2.0, np.float32)),
        "steps": [np.int32(7), 3, 0.5, True],
        "pair": (np.array([1, 2], np.int64), None),
        "bf16": jnp.array([1.5, -2.0], jnp.bfloat16),
    }


def _assert_tree_equal(a: Any, b: Any) -> None:
    la, ta = jax.tree_util.tree_flatten(a)
    assert str(ta) == str(jax.tree_util.tree_structure(a))
    lb, _ = jax.tree_util.tree_flatten(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb, strict=True):
        assert np.asarray(x).dtype == np.asarray(y).dtype
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_round_trip_plain_structure(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "params.npz"
    params = _params()
    model.save_params(path, params)
    got = model.load_params(path)
    assert set(got) == set(params)
    assert isinstance(got["pair"], tuple) and got["pair"][1] is None
    assert isinstance(got["steps"], list)
    assert got["steps"][1:] == [3, 0.5, True] and type(got["steps"][1]) is int
    assert got["normalizer"].mean.shape == (4,) and type(got["normalizer"]).__name__ == "Pair"
    np.testing.assert_array_equal(got["normalizer"].std, params["normalizer"].std)
    assert got["bf16"].dtype == jnp.bfloat16
    # With a target, the original NamedTuple type comes back.
    got_t = model.load_params(path, target=params)
    assert isinstance(got_t["normalizer"], Pair)
    _assert_tree_equal(got_t, params)


def test_file_is_plain_npz_without_pickle(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "p.npz"
    model.save_params(path, _params())
    with zipfile.ZipFile(path) as z:
        assert all(n.endswith(".npy") for n in z.namelist())
    with np.load(path, allow_pickle=False) as data:  # would raise on object arrays
        assert "__structure__" in data.files
        for name in data.files:
            assert data[name].dtype != object


def test_opaque_pytree_needs_target(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "layer.npz"
    layer = Layer(w=jnp.ones((2, 2), jnp.float32), b=jnp.arange(2, dtype=jnp.float32))
    model.save_params(path, {"layer": layer})
    got = model.load_params(path, target={"layer": layer})
    assert isinstance(got["layer"], Layer)
    _assert_tree_equal(got, {"layer": layer})
    # Without a target the leaves come back keyed by their key path.
    loose = model.load_params(path)
    assert sorted(loose["layer"]) == [".b", ".w"]


def test_target_shape_mismatch_names_key_path(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "p.npz"
    model.save_params(path, {"a": {"kernel": np.zeros((2, 3), np.float32)}})
    with pytest.raises(ValueError, match=r"\['a'\]\['kernel'\].*\(2, 3\).*\(3, 3\)"):
        model.load_params(path, target={"a": {"kernel": np.zeros((3, 3), np.float32)}})
    with pytest.raises(ValueError, match=r"missing.*\['b'\]"):
        model.load_params(path, target={"a": {"kernel": np.zeros((2, 3), np.float32)}, "b": 1.0})


def test_unsupported_leaf_rejected_without_touching_old_file(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "p.npz"
    model.save_params(path, {"w": np.ones(3, np.float32)})
    before = path.read_bytes()
    with pytest.raises(ValueError, match=r"\['name'\].*str"):
        model.save_params(path, {"w": np.zeros(3, np.float32), "name": "x"})
    assert path.read_bytes() == before
    with pytest.raises(ValueError, match="not a string"):
        model.save_params(path, {1: np.zeros(3, np.float32)})
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["p.npz"]


def test_failed_write_midway_keeps_old_file(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "p.npz"
    model.save_params(path, {"w": np.ones(3, np.float32)})
    before = path.read_bytes()

    def broken_writer(fileobj: Any, arrays: Any) -> None:
        fileobj.write(b"PK\x03\x04 partial archive")
        raise OSError("disk full")

    monkeypatch.setattr(model, "_write_npz", broken_writer)
    with pytest.raises(OSError, match="disk full"):
        model.save_params(path, {"w": np.zeros(1000, np.float32)})
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["p.npz"]  # temp file cleaned up
    np.testing.assert_array_equal(model.load_params(path)["w"], np.ones(3, np.float32))


def test_not_a_params_file(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "other.npz"
    np.savez(path, x=np.zeros(2))
    with pytest.raises(ValueError, match="not a brax-io params file"):
        model.load_params(path)
