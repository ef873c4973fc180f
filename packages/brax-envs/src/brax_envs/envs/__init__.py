"""Built-in environments (registered by name in `brax_envs.registry`)."""

from brax_envs.envs.fast import Fast
from brax_envs.envs.pendulum_swingup import PendulumSwingup

__all__ = ["Fast", "PendulumSwingup"]
