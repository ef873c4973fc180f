"""brax-physics: JAX rigid-body physics that loads MuJoCo MJCF and matches MuJoCo's dynamics."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("brax-physics")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0"

__all__ = ["__version__"]
