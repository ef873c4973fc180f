"""brax-io: HTML viewer, images, video and serialization for brax-physics systems and trajectories."""

from importlib.metadata import PackageNotFoundError, version

from brax_io import html, image, json, model
from brax_io._atomic import write_atomic

try:
    __version__ = version("brax-io")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0"

__all__ = ["__version__", "html", "image", "json", "model", "write_atomic"]
