"""Saving and loading parameter pytrees in a safe, pickle-free format, written atomically.

A params file is a NumPy `.npz` archive written with `allow_pickle=False`. It holds one array per
leaf (`leaf_00000`, `leaf_00001`, ...) and a UTF-8 JSON document (`__structure__`, stored as a
uint8 array) that describes the pytree: nested dicts with string keys, lists, tuples,
NamedTuples, `None`, array leaves and Python scalars. Pytree nodes of any other kind (flax
structures, registered dataclasses, ...) are stored as an opaque node whose leaves are keyed by
their JAX key path; load those with `target=` to get the original structure back.
"""

from __future__ import annotations

import collections
import json
import os
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from brax_io import _atomic

__all__ = ["load_params", "save_params"]

_FORMAT = "brax-io.params"
_VERSION = 1
_STRUCTURE_KEY = "__structure__"
_BUILTIN_KINDS = "biufc"

KeyPath = tuple[Any, ...]


def _is_namedtuple(x: object) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


class _Encoder:
    """Walks a pytree, collecting leaves and a JSON-able description of its structure."""

    def __init__(self) -> None:
        self.arrays: list[np.ndarray] = []
        self.paths: list[str] = []
        self.dtypes: list[str] = []

    def leaf(self, path: KeyPath, value: Any) -> dict[str, Any]:
        desc: dict[str, Any] = {"leaf": len(self.arrays)}
        if isinstance(value, bool):
            desc["py"] = "bool"
        elif isinstance(value, int):
            desc["py"] = "int"
        elif isinstance(value, float):
            desc["py"] = "float"
        elif isinstance(value, complex):
            desc["py"] = "complex"
        arr = np.asarray(value)
        if arr.dtype.kind not in _BUILTIN_KINDS:
            name = str(arr.dtype)
            try:
                restored = np.dtype(jax.numpy.dtype(name))
            except TypeError:
                restored = None
            if restored != arr.dtype or arr.dtype.itemsize not in (1, 2, 4, 8):
                raise ValueError(
                    f"leaf {jax.tree_util.keystr(path) or '<root>'} has dtype {arr.dtype}, "
                    "which cannot be saved without pickle"
                )
            arr = arr.view(np.dtype(f"u{arr.dtype.itemsize}"))
        self.arrays.append(arr if arr.flags.c_contiguous else arr.copy(order="C"))
        self.paths.append(jax.tree_util.keystr(path))
        self.dtypes.append(str(np.asarray(value).dtype))
        return desc

    def encode(self, path: KeyPath, node: Any) -> dict[str, Any]:
        if node is None:
            return {"none": True}
        if isinstance(node, dict) and type(node) is dict:
            items = {}
            for key in sorted(node):
                if not isinstance(key, str):
                    raise ValueError(
                        f"dict key {key!r} at {jax.tree_util.keystr(path) or '<root>'} is not a string"
                    )
                items[key] = self.encode((*path, jax.tree_util.DictKey(key)), node[key])
            return {"dict": items}
        if _is_namedtuple(node):
            fields = list(type(node)._fields)
            return {
                "namedtuple": type(node).__name__,
                "fields": {
                    f: self.encode((*path, jax.tree_util.GetAttrKey(f)), getattr(node, f)) for f in fields
                },
            }
        if type(node) in (list, tuple):
            kind = "list" if isinstance(node, list) else "tuple"
            return {kind: [self.encode((*path, jax.tree_util.SequenceKey(i)), v) for i, v in enumerate(node)]}
        if isinstance(node, (np.ndarray, np.generic, jax.Array, bool, int, float, complex)):
            return self.leaf(path, node)
        # Any other registered pytree node: keep its leaves, keyed by their JAX key path.
        children, _ = jax.tree_util.tree_flatten_with_path(node)
        if len(children) == 1 and children[0][0] == ():
            # Not a pytree node at all: an unsupported leaf (str, object, ...).
            raise ValueError(
                f"leaf {jax.tree_util.keystr(path) or '<root>'} of type "
                f"{type(node).__name__} cannot be saved (only arrays and numbers)"
            )
        return {
            "opaque": f"{type(node).__module__}.{type(node).__qualname__}",
            "leaves": {jax.tree_util.keystr(sub): self.leaf((*path, *sub), v)["leaf"] for sub, v in children},
        }


def _decode(desc: Mapping[str, Any], leaves: list[np.ndarray]) -> Any:
    if "none" in desc:
        return None
    if "dict" in desc:
        return {k: _decode(v, leaves) for k, v in desc["dict"].items()}
    if "list" in desc:
        return [_decode(v, leaves) for v in desc["list"]]
    if "tuple" in desc:
        return tuple(_decode(v, leaves) for v in desc["tuple"])
    if "namedtuple" in desc:
        # The class itself is not imported (that would be pickle-like); an equivalent
        # namedtuple with the same name and fields is built unless `target` supplies the type.
        cls = collections.namedtuple(desc["namedtuple"], list(desc["fields"]), rename=True)  # type: ignore[misc]
        return cls(*(_decode(v, leaves) for v in desc["fields"].values()))
    if "opaque" in desc:
        return {k: leaves[i] for k, i in desc["leaves"].items()}
    if "leaf" in desc:
        value = leaves[desc["leaf"]]
        py = desc.get("py")
        if py is not None:
            return {"bool": bool, "int": int, "float": float, "complex": complex}[py](value)
        return value
    raise ValueError(f"unrecognised structure entry {sorted(desc)}")


def _write_npz(fileobj: Any, arrays: Mapping[str, np.ndarray]) -> None:
    np.savez(fileobj, allow_pickle=False, **arrays)


def save_params(path: str | os.PathLike[str], params: Any) -> None:
    """Save a pytree of arrays to `path` (an `.npz` without pickle), replacing it atomically."""
    enc = _Encoder()
    structure = enc.encode((), params)
    doc = {
        "format": _FORMAT,
        "version": _VERSION,
        "structure": structure,
        "paths": enc.paths,
        "dtypes": enc.dtypes,
    }
    arrays: dict[str, np.ndarray] = {f"leaf_{i:05d}": a for i, a in enumerate(enc.arrays)}
    arrays[_STRUCTURE_KEY] = np.frombuffer(json.dumps(doc).encode("utf-8"), dtype=np.uint8)

    _atomic.write_atomic(path, lambda f: _write_npz(f, arrays))


def _restore_dtype(arr: np.ndarray, dtype_name: str) -> np.ndarray:
    if str(arr.dtype) == dtype_name:
        return arr
    return arr.view(np.dtype(jax.numpy.dtype(dtype_name)))


def load_params(path: str | os.PathLike[str], target: Any = None) -> Any:
    """Load a pytree saved by `save_params`; with `target`, unflatten into its structure."""
    with np.load(os.fspath(path), allow_pickle=False) as data:
        if _STRUCTURE_KEY not in data.files:
            raise ValueError(f"{os.fspath(path)} is not a brax-io params file")
        doc = json.loads(bytes(data[_STRUCTURE_KEY]).decode("utf-8"))
        if doc.get("format") != _FORMAT or doc.get("version", 0) > _VERSION:
            raise ValueError(
                f"{os.fspath(path)}: unsupported params format {doc.get('format')!r} "
                f"version {doc.get('version')!r}"
            )
        leaves = [_restore_dtype(data[f"leaf_{i:05d}"], dt) for i, dt in enumerate(doc["dtypes"])]
    if target is None:
        return _decode(doc["structure"], leaves)

    by_path = dict(zip(doc["paths"], leaves, strict=True))
    flat, treedef = jax.tree_util.tree_flatten_with_path(target)
    want = [jax.tree_util.keystr(p) for p, _ in flat]
    missing = [p for p in want if p not in by_path]
    extra = sorted(set(by_path) - set(want))
    if missing or extra:
        raise ValueError(
            f"params in {os.fspath(path)} do not match target structure: "
            f"missing {missing or 'nothing'}, unexpected {extra or 'nothing'}"
        )
    out = []
    for (_, ref), key in zip(flat, want, strict=True):
        got = by_path[key]
        ref_shape = tuple(np.shape(ref))
        if got.shape != ref_shape:
            raise ValueError(
                f"params in {os.fspath(path)}: leaf {key or '<root>'} has shape {got.shape}, "
                f"target expects {ref_shape}"
            )
        if isinstance(ref, (bool, int, float, complex)) and not isinstance(ref, np.generic):
            out.append(type(ref)(got))
        else:
            out.append(got)
    return jax.tree_util.tree_unflatten(treedef, out)
