"""What the robot tasks share: compiling a model given as a path, XML or `MjModel`, naming its parts
in errors, and reading reward weights given as a dataclass or a mapping (private)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import mujoco

Weights = TypeVar("Weights")


def load_model(model: str | os.PathLike[str] | mujoco.MjModel) -> mujoco.MjModel:
    """`model` compiled: an `MjModel` as is, an XML string, or the path of an MJCF file."""
    if isinstance(model, mujoco.MjModel):
        return model
    if str(model).lstrip().startswith("<"):
        return mujoco.MjModel.from_xml_string(str(model))
    return mujoco.MjModel.from_xml_path(os.fspath(model))


def index_of(owner: str, kind: str, names: Sequence[str], wanted: str, field: str) -> int:
    """The index of `wanted` among the model's `names` of a `kind` (body, geom, ...), or a ValueError
    naming `owner.field`, the missing name and the model's names of that kind."""
    if not wanted or wanted not in names:
        known = [n for n in names if n]
        plural = "bodies" if kind == "body" else f"{kind}s"
        raise ValueError(f"{owner}.{field}: the model has no {kind} named {wanted!r}; {plural}: {known}")
    return list(names).index(wanted)


def weights_of(cls: type[Weights], weights: Weights | Mapping[str, float] | None, owner: str) -> Weights:
    """`weights` as the dataclass `cls` (its defaults where None), naming unknown terms of a mapping."""
    if weights is None:
        return cls()
    if isinstance(weights, cls):
        return weights
    assert isinstance(weights, Mapping), f"{owner}: weights must be a {cls.__name__} or a mapping"
    terms = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    unknown = sorted(set(weights) - set(terms))
    if unknown:
        raise ValueError(f"{owner}: unknown reward terms {unknown}; terms: {terms}")
    values: dict[str, Any] = {k: float(v) for k, v in weights.items()}
    return cls(**values)


def asset_path(folder: Path, name: str, owner: str) -> Path:
    """The model file `name` in `folder` (a ValueError naming `owner` lists its models otherwise)."""
    path = folder / name
    if not path.is_file():
        names = sorted(p.name for p in folder.glob("*.xml"))
        raise ValueError(f"{owner}: no asset {name!r}; assets: {names}")
    return path
