"""Joystick locomotion tasks for legged MJCF robots, and two robots of our own to run them on.

`Joystick(mjcf, LeggedRobot(...))` turns any legged MJCF with position actuators and a standing
keyframe into a velocity-tracking task; `quadruped_joystick` and `humanoid_joystick` build it on
the models in `assets/` (registered as `locomotion/quadruped-joystick-flat` and
`locomotion/humanoid-joystick-flat`); `quadruped_joystick_rough` and `humanoid_joystick_rough` put
them on per-episode rough terrain with a difficulty curriculum (`terrain.Terrain`). `GetUp`
(getup.py) makes a get-up task of the same robots: `quadruped_getup` and `humanoid_getup`
(registered as `locomotion/quadruped-getup` and `locomotion/humanoid-getup`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from brax_envs._model import asset_path
from brax_envs.locomotion.getup import (
    GetUp,
    GetUpWeights,
    getup_reward_terms,
    getup_success,
    humanoid_getup,
    quadruped_getup,
)
from brax_envs.locomotion.joystick import Joystick, LeggedRobot, RewardWeights, reward_terms
from brax_envs.locomotion.terrain import Terrain

_ASSETS = Path(__file__).parent / "assets"

QUADRUPED = LeggedRobot(torso="trunk", feet=("FR_foot", "FL_foot", "RR_foot", "RL_foot"), min_height=0.12)
"""Our Go1-class quadruped (`assets/quadruped.xml`): trunk, four foot spheres, keyframe `home`."""

HUMANOID = LeggedRobot(torso="pelvis", feet=("left_foot", "right_foot"), min_height=0.45, action_scale=0.25)
"""Our G1-class humanoid (`assets/humanoid.xml`): pelvis, two foot boxes, keyframe `home`."""


def asset(name: str) -> Path:
    """The path of a model file in `assets/` (a ValueError lists them when `name` is not one)."""
    return asset_path(_ASSETS, name, "brax_envs.locomotion")


def _scene(robot: str, full_collision: bool) -> Path:
    """The flat-ground scene of `robot`, feet-only or with every link colliding."""
    return asset(f"{robot}{'_full_collision' if full_collision else ''}_scene_flat.xml")


def quadruped_joystick(full_collision: bool = False, **kwargs: Any) -> Joystick:
    """The joystick task on our quadruped on flat ground (`Joystick` keywords in `kwargs`)."""
    return Joystick(_scene("quadruped", full_collision), QUADRUPED, **kwargs)


def humanoid_joystick(full_collision: bool = False, **kwargs: Any) -> Joystick:
    """The joystick task on our humanoid on flat ground (`Joystick` keywords in `kwargs`)."""
    kwargs.setdefault("command_range", ((-0.8, 0.8), (-0.4, 0.4), (-0.8, 0.8)))
    return Joystick(_scene("humanoid", full_collision), HUMANOID, **kwargs)


QUADRUPED_TERRAIN = Terrain(max_height=0.3)
"""The quadruped's rough terrain: fields up to 0.3 m (`assets/quadruped_scene_rough.xml`'s scale)."""

HUMANOID_TERRAIN = Terrain(max_height=0.2)
"""The humanoid's rough terrain: fields up to 0.2 m (`assets/humanoid_scene_rough.xml`'s scale)."""


def quadruped_joystick_rough(terrain: Terrain = QUADRUPED_TERRAIN, **kwargs: Any) -> Joystick:
    """The joystick task on our quadruped on curriculum rough terrain (`Joystick` keywords in `kwargs`).

    Train under `AutoResetWrapper(fresh_reset=True)` for a new field every episode; `reset_level` sets
    the level of plain resets (evaluation).
    """
    return Joystick(asset("quadruped_scene_rough.xml"), QUADRUPED, terrain=terrain, **kwargs)


def humanoid_joystick_rough(terrain: Terrain = HUMANOID_TERRAIN, **kwargs: Any) -> Joystick:
    """The joystick task on our humanoid on curriculum rough terrain (`Joystick` keywords in `kwargs`)."""
    kwargs.setdefault("command_range", ((-0.8, 0.8), (-0.4, 0.4), (-0.8, 0.8)))
    return Joystick(asset("humanoid_scene_rough.xml"), HUMANOID, terrain=terrain, **kwargs)


__all__ = [
    "HUMANOID",
    "HUMANOID_TERRAIN",
    "QUADRUPED",
    "QUADRUPED_TERRAIN",
    "GetUp",
    "GetUpWeights",
    "Joystick",
    "LeggedRobot",
    "RewardWeights",
    "Terrain",
    "asset",
    "getup_reward_terms",
    "getup_success",
    "humanoid_getup",
    "humanoid_joystick",
    "humanoid_joystick_rough",
    "quadruped_getup",
    "quadruped_joystick",
    "quadruped_joystick_rough",
    "reward_terms",
]
