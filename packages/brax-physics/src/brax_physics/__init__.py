"""brax-physics: JAX rigid-body physics that loads MuJoCo MJCF and matches MuJoCo's dynamics."""

from importlib.metadata import PackageNotFoundError, version

from brax_physics._src.collision.contact import Contact
from brax_physics._src.loader import from_mjmodel, load_mjcf
from brax_physics._src.lowering.settings import Lowering
from brax_physics._src.options_check import OptionWarning
from brax_physics._src.pipeline import contacts, forward_kinematics, init, step
from brax_physics._src.ray import Hit, ray
from brax_physics._src.sensor import sensor, sites
from brax_physics._src.state import State
from brax_physics._src.system import ModelRef, Options, System

try:
    __version__ = version("brax-physics")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0"

__all__ = [
    "Contact",
    "Hit",
    "Lowering",
    "ModelRef",
    "OptionWarning",
    "Options",
    "State",
    "System",
    "__version__",
    "contacts",
    "forward_kinematics",
    "from_mjmodel",
    "init",
    "load_mjcf",
    "ray",
    "sensor",
    "sites",
    "step",
]
