"""Built-in environments (registered by name in `brax_envs.registry`)."""

from brax_envs.envs.ant import Ant
from brax_envs.envs.fast import Fast
from brax_envs.envs.halfcheetah import Halfcheetah
from brax_envs.envs.hopper import Hopper
from brax_envs.envs.humanoid import Humanoid
from brax_envs.envs.humanoidstandup import HumanoidStandup
from brax_envs.envs.inverted_double_pendulum import InvertedDoublePendulum
from brax_envs.envs.inverted_pendulum import InvertedPendulum
from brax_envs.envs.pendulum_swingup import PendulumSwingup
from brax_envs.envs.pusher import Pusher
from brax_envs.envs.reacher import Reacher
from brax_envs.envs.swimmer import Swimmer
from brax_envs.envs.walker2d import Walker2d

STANDARD_ENVIRONMENTS: dict[str, type] = {
    "ant": Ant,
    "halfcheetah": Halfcheetah,
    "hopper": Hopper,
    "humanoid": Humanoid,
    "humanoidstandup": HumanoidStandup,
    "inverted_double_pendulum": InvertedDoublePendulum,
    "inverted_pendulum": InvertedPendulum,
    "pusher": Pusher,
    "reacher": Reacher,
    "swimmer": Swimmer,
    "walker2d": Walker2d,
}
"""The standard suite by its Brax/Gym name (`brax_envs.registry` registers each)."""

__all__ = [
    "STANDARD_ENVIRONMENTS",
    "Ant",
    "Fast",
    "Halfcheetah",
    "Hopper",
    "Humanoid",
    "HumanoidStandup",
    "InvertedDoublePendulum",
    "InvertedPendulum",
    "PendulumSwingup",
    "Pusher",
    "Reacher",
    "Swimmer",
    "Walker2d",
]
