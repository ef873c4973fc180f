"""brax-train: PPO and friends for brax-envs: typed configs, exact resume, checkpoints and the brax-train CLI."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("brax-train")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0"

__all__ = ["__version__"]
