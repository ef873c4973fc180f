"""Manipulation tasks, and an arm of our own with a parallel gripper to run them on.

`PickCube(mjcf, PickScene(...))` turns an MJCF with an arm of position servos, a gripper servo, a
free cube and a mocap target into a pick-and-lift task; `arm_pick_cube` builds it on the Panda-class
arm in `assets/` (registered as `manipulation/arm-pick-cube`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from brax_envs._model import asset_path
from brax_envs.manipulation.pick import PickCube, PickScene, RewardWeights, pick_reward_terms

_ASSETS = Path(__file__).parent / "assets"

ARM_PICK_SCENE = PickScene()
"""Our arm's pick scene (`assets/arm_pick_scene.xml`): its site, pads, gripper, cube, target and keyframe."""


def asset(name: str) -> Path:
    """The path of a model file in `assets/` (a ValueError lists them when `name` is not one)."""
    return asset_path(_ASSETS, name, "brax_envs.manipulation")


def arm_pick_cube(**kwargs: Any) -> PickCube:
    """The pick-and-lift task on our arm (`PickCube` keywords in `kwargs`)."""
    return PickCube(asset("arm_pick_scene.xml"), ARM_PICK_SCENE, **kwargs)


__all__ = [
    "ARM_PICK_SCENE",
    "PickCube",
    "PickScene",
    "RewardWeights",
    "arm_pick_cube",
    "asset",
    "pick_reward_terms",
]
