"""Installed distribution versions: the one lookup `__version__`, the CLI and its doctor share."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

RECORDED: tuple[str, ...] = (
    "brax-train",
    "brax-envs",
    "brax-io",
    "brax-physics",
    "brax-math",
    "jax",
    "jaxlib",
    "mujoco",
    "flax",
    "optax",
    "orbax-checkpoint",
)
"""Distributions whose versions a run directory's config.json records."""


def installed_version(dist: str) -> str | None:
    """The installed version of distribution `dist`, or None when it is not installed."""
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def package_versions(names: tuple[str, ...] = RECORDED) -> dict[str, str | None]:
    """`{name: installed version or None}` for `names`."""
    return {n: installed_version(n) for n in names}


__all__ = ["RECORDED", "installed_version", "package_versions"]
