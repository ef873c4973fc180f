"""The five distributions: versions, one-way dependencies and internal pins (DESIGN §1)."""

from __future__ import annotations

import importlib
import tomllib
from importlib.metadata import requires, version
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ["brax-math", "brax-physics", "brax-envs", "brax-io", "brax-train"]
# Allowed in-repo dependencies: the graph must stay acyclic and one way.
ALLOWED = {
    "brax-math": set(),
    "brax-physics": {"brax-math"},
    # brax-envs and brax-train import brax_math themselves (`all_finite`), so they declare it.
    "brax-envs": {"brax-math", "brax-physics"},
    "brax-io": {"brax-physics"},
    "brax-train": {"brax-math", "brax-envs", "brax-io"},
}
TRAINING_ONLY = {"flax", "optax", "orbax-checkpoint"}


def _pyproject(dist: str) -> dict[str, object]:
    with open(ROOT / "packages" / dist / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def _runtime_requirements(dist: str) -> list[Requirement]:
    return [Requirement(r) for r in requires(dist) or [] if "extra ==" not in r]


@pytest.mark.parametrize("dist", PACKAGES)
def test_installed_version_matches_source_and_module(dist: str) -> None:
    project = _pyproject(dist)["project"]
    assert isinstance(project, dict)
    assert version(dist) == project["version"]
    module = importlib.import_module(dist.replace("-", "_"))
    assert module.__version__ == project["version"]
    assert (ROOT / "packages" / dist / "src" / dist.replace("-", "_") / "py.typed").is_file()
    assert "Typing :: Typed" in project["classifiers"]


@pytest.mark.parametrize("dist", PACKAGES)
def test_internal_dependencies_are_one_way_and_pins_admit_siblings(dist: str) -> None:
    internal = {r.name: r for r in _runtime_requirements(dist) if r.name.startswith("brax-")}
    assert set(internal) == ALLOWED[dist]
    for name, req in internal.items():
        have = version(name)
        assert req.specifier.contains(have), f"{dist} pins {req} but the repo has {name} {have}"
        # Compatible range, not an exact pin: an upper bound on the next minor version.
        assert any(s.operator == "<" for s in req.specifier), f"{dist}: {req} needs an upper bound"


def _closure(dist: str) -> set[str]:
    names: set[str] = set()
    for req in _runtime_requirements(dist):
        names.add(req.name)
        if req.name.startswith("brax-"):
            names |= _closure(req.name)
    return names


def test_math_pulls_only_jax_and_numpy() -> None:
    assert _closure("brax-math") == {"jax", "numpy"}


@pytest.mark.parametrize("dist", ["brax-math", "brax-physics", "brax-envs", "brax-io"])
def test_simulation_packages_never_pull_training_libraries(dist: str) -> None:
    assert not (_closure(dist) & TRAINING_ONLY)


def test_train_declares_its_training_libraries() -> None:
    assert _closure("brax-train") >= TRAINING_ONLY
