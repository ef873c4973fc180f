"""brax-train: PPO for brax-envs with typed configs, exact resume and checkpoints."""

from importlib.metadata import PackageNotFoundError, version

from brax_train import acting, checkpoint, distribution, networks, ppo, running_statistics, types

try:
    __version__ = version("brax-train")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0"

__all__ = [
    "__version__",
    "acting",
    "checkpoint",
    "distribution",
    "networks",
    "ppo",
    "running_statistics",
    "types",
]
