"""Environments by name: `register_environment`, `get_environment`, `registered_environments`, `create`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from brax_envs.base import Env
from brax_envs.envs import STANDARD_ENVIRONMENTS, Fast, PendulumSwingup
from brax_envs.wrappers import training

EnvFactory = Callable[..., Env]
"""Anything that builds an `Env` from keyword options, e.g. an `Env` subclass."""

_REGISTRY: dict[str, EnvFactory] = {}


class UnknownEnvironmentError(KeyError, ValueError):
    """An environment name that is not registered (both a `KeyError` and a `ValueError`)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def register_environment(name: str, factory: EnvFactory) -> None:
    """Register `factory(**kwargs) -> Env` under `name` (replacing any previous registration)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"environment name must be a non-empty str, got {name!r}")
    if not callable(factory):
        raise TypeError(f"factory for {name!r} must be callable, got {type(factory).__name__}")
    _REGISTRY[name] = factory


def registered_environments() -> tuple[str, ...]:
    """Registered environment names, sorted."""
    return tuple(sorted(_REGISTRY))


def get_environment(name: str, **kwargs: Any) -> Env:
    """Build the environment registered as `name` with keyword options `kwargs`."""
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise UnknownEnvironmentError(
            f"unknown environment {name!r}; registered: {', '.join(registered_environments())}") from None
    return factory(**kwargs)


def create(name: str, episode_length: int | None = 1000, action_repeat: int = 1, auto_reset: bool = True,
           batch_size: int | None = None, **kwargs: Any) -> Env:
    """`get_environment(name, **kwargs)` wrapped for use as Brax's `envs.create` does.

    Adds `EpisodeWrapper(episode_length, action_repeat)` unless `episode_length` is None,
    `VmapWrapper(batch_size)` when `batch_size` is set (then `reset` takes one key), and
    `AutoResetWrapper` when `auto_reset`.
    """
    env = get_environment(name, **kwargs)
    if episode_length is not None:
        env = training.EpisodeWrapper(env, episode_length, action_repeat)
    if batch_size:
        env = training.VmapWrapper(env, batch_size)
    if auto_reset:
        env = training.AutoResetWrapper(env)
    return env


register_environment("fast", Fast)
register_environment("pendulum_swingup", PendulumSwingup)
for _name, _cls in STANDARD_ENVIRONMENTS.items():
    register_environment(_name, _cls)


def _suite_factory(domain: str, task: str) -> EnvFactory:
    def make(flatten_observation: bool = True, **kwargs: Any) -> Env:
        from brax_envs import dm_control

        env: Env = dm_control.load(domain, task, **kwargs)
        return training.FlattenObservationWrapper(env) if flatten_observation else env

    make.__doc__ = (f"dm_control's {domain}-{task} (`brax_envs.dm_control`); "
                    "`flatten_observation=False` keeps its dict observation.")
    return make


def _register_suite() -> None:
    from brax_envs.dm_control import ALL_TASKS

    for domain, task in ALL_TASKS:
        register_environment(f"dm_control/{domain}-{task}", _suite_factory(domain, task))


_register_suite()


def _register_locomotion() -> None:
    from brax_envs import locomotion

    register_environment("locomotion/quadruped-joystick-flat", locomotion.quadruped_joystick)
    register_environment("locomotion/humanoid-joystick-flat", locomotion.humanoid_joystick)
    register_environment("locomotion/quadruped-joystick-rough", locomotion.quadruped_joystick_rough)
    register_environment("locomotion/humanoid-joystick-rough", locomotion.humanoid_joystick_rough)
    register_environment("locomotion/quadruped-getup", locomotion.quadruped_getup)
    register_environment("locomotion/humanoid-getup", locomotion.humanoid_getup)


_register_locomotion()


def _register_manipulation() -> None:
    from brax_envs import manipulation

    register_environment("manipulation/arm-pick-cube", manipulation.arm_pick_cube)


_register_manipulation()
