"""Field checks declared on config fields: one validator, messages naming key and value."""

from __future__ import annotations

import dataclasses

from brax_train import config
from brax_train.config import (
    Bool,
    Int,
    Num,
    OneOf,
    RunConfig,
    Unsupported,
    field_checks,
    field_errors,
    setting,
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Config(RunConfig):
    rate: float = setting(0.1, Num(gt=0, le=1))
    steps: int | None = setting(None, Int(ge=1, optional=True))
    mode: str = setting("a", OneOf(("a", "b")))
    flag: bool = setting(False, Bool())
    pixels: bool = setting(False, Unsupported("brax_train.x", " (no camera)"))


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Sub(_Config):
    rate: float = 0.5  # a new default keeps the inherited check


def test_messages_name_key_rule_and_value() -> None:
    bad = _Config(num_envs=0, rate=float("nan"), steps=0, mode="c", flag=1, pixels=True)  # type: ignore[arg-type]
    assert field_errors(bad) == [
        "num_envs must be an int >= 1, got 0",
        "rate must be a number in (0, 1], got nan",
        "steps must be None or an int >= 1, got 0",
        "mode must be one of a, b, got 'c'",
        "flag must be a bool, got 1",
        "pixels=True is not supported by brax_train.x (no camera)",
    ]
    assert field_errors(_Config()) == []


def test_bounds_read_as_written() -> None:
    assert Num().expected() == "a number"
    assert Num(ge=0).expected() == "a number >= 0"
    assert Num(lt=1).expected() == "a number < 1"
    assert Num(ge=0, lt=1).expected() == "a number in [0, 1)"
    assert Num(gt=0).error("x", True) == "x must be a number > 0, got True"  # a bool is no number
    assert Num(ge=0).error("x", float("nan")) is None  # left to the runner's NaN guard


def test_redeclared_default_keeps_the_inherited_check() -> None:
    assert field_checks(_Sub)["rate"] == Num(gt=0, le=1)
    assert field_errors(_Sub(rate=2.0)) == ["rate must be a number in (0, 1], got 2.0"]
    assert [f.default for f in dataclasses.fields(_Sub) if f.name == "rate"] == [0.5]


def test_raise_errors_lists_every_message() -> None:
    config.raise_errors([], config.ConfigError, "X")
    try:
        config.raise_errors(["a", "b"], config.ConfigError, "X")
    except config.ConfigError as e:
        assert str(e) == "invalid X settings:\n  - a\n  - b"
    else:
        raise AssertionError("no error raised")
