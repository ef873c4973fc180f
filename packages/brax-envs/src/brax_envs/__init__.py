"""brax-envs: Reinforcement-learning environments and wrappers on brax-physics."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("brax-envs")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0"

__all__ = ["__version__"]
