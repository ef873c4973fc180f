"""brax-envs: Reinforcement-learning environments and wrappers on brax-physics."""

from importlib.metadata import PackageNotFoundError, version

from brax_envs import locomotion, manipulation, testing, wrappers
from brax_envs.base import (
    Env,
    Observation,
    ObservationSize,
    PipelineEnv,
    State,
    Wrapper,
    observation_size_of,
)
from brax_envs.registry import (
    UnknownEnvironmentError,
    create,
    get_environment,
    register_environment,
    registered_environments,
)

try:
    __version__ = version("brax-envs")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0"

__all__ = [
    "Env",
    "Observation",
    "ObservationSize",
    "PipelineEnv",
    "State",
    "UnknownEnvironmentError",
    "Wrapper",
    "__version__",
    "create",
    "get_environment",
    "locomotion",
    "manipulation",
    "observation_size_of",
    "register_environment",
    "registered_environments",
    "testing",
    "wrappers",
]
