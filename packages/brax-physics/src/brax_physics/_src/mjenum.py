"""MJCF keywords of MuJoCo's enum values, for messages that name a model's settings."""

from __future__ import annotations

from typing import Any


def keyword(enum: Any, value: int) -> str:
    """MJCF keyword of `value` in MuJoCo enum `enum` (mjtDyn 2: "filter"), or the number if it has none."""
    for name, member in enum.__members__.items():
        # Members look like mjDYN_FILTER; counts such as mjNGEOMTYPES have no keyword.
        if "_" in name and int(member) == value:
            return str(name.split("_", 1)[1].lower())
    return str(value)
