"""dm_control's humanoid_CMU domain: the CMU motion-capture humanoid that stands, walks or runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from brax_envs.dm_control.humanoid import Humanoid


class HumanoidCMU(Humanoid):
    """Humanoid_CMU: the 56-actuator CMU humanoid, with humanoid's observation features and rewards.

    As `Humanoid`'s features tasks, measured on the thorax: its frame for `extremities` (hands and
    feet) and `torso_vertical`, its subtree's centre-of-mass velocity, and uprightness from its
    y axis (the CMU model's up axis). 1000 control steps of 0.02 s.
    """

    domain = "humanoid_CMU"
    time_limit = 20.0
    control_timestep = 0.02
    fast_solver: ClassVar[Mapping[str, int]] = {"iterations": 4, "ls_iterations": 8}
    speeds: ClassVar[Mapping[str, float]] = {"stand": 0.0, "walk": 1.0, "run": 10.0}
    root: ClassVar[str] = "thorax"
    limbs: ClassVar[tuple[str, ...]] = ("lhand", "lfoot", "rhand", "rfoot")
    upright_column: ClassVar[int] = 1


ENV = HumanoidCMU
