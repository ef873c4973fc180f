"""`RunConfig`: the settings every agent shares (the runner's), typed and frozen; merging and checks."""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Callable, Mapping
from typing import Any, TypeGuard, TypeVar

import brax_envs

from brax_train import networks

_PRECISIONS = ("highest", "float32", "high", "bfloat16_3x", "tensorfloat32", "default", "bfloat16", "fastest")

C = TypeVar("C", bound="RunConfig")
T = TypeVar("T")
_F = TypeVar("_F", bound=Callable[..., Any])


class ConfigError(ValueError):
    """Invalid or inconsistent settings; the message names every offending key and rule."""


def is_int(v: object) -> TypeGuard[int]:
    """An int that is not a bool."""
    return isinstance(v, int) and not isinstance(v, bool)


def is_num(v: object) -> TypeGuard[int | float]:
    """An int or float that is not a bool."""
    return isinstance(v, int | float) and not isinstance(v, bool)


# ---- field checks: declared on a config's fields, read by one validator ------------------------------

_CHECK = "brax_train.check"


class Check:
    """A rule on one setting's value alone, declared on its field with `setting(default, check)`.

    Rules that tie several settings together stay hand-written in the config's `validate`.
    """

    optional: bool = False
    """None is accepted too."""
    show_type: bool = False
    """Messages show the value's type name rather than its repr."""

    def accepts(self, value: object) -> bool:
        """Whether `value` (not None when `optional`) keeps the rule."""
        raise NotImplementedError

    def expected(self) -> str:
        """What the rule asks for, after `must be` ("an int >= 1")."""
        raise NotImplementedError

    def error(self, name: str, value: object) -> str | None:
        """The message naming setting `name` and `value`, or None when it keeps the rule."""
        if (value is None and self.optional) or self.accepts(value):
            return None
        got = type(value).__name__ if self.show_type else repr(value)
        return f"{name} must be {'None or ' if self.optional else ''}{self.expected()}, got {got}"


@dataclasses.dataclass(frozen=True)
class Int(Check):
    """An int (not a bool) >= `ge`."""

    ge: int
    optional: bool = False

    def accepts(self, value: object) -> bool:
        return is_int(value) and value >= self.ge

    def expected(self) -> str:
        return f"an int >= {self.ge}"


@dataclasses.dataclass(frozen=True)
class Num(Check):
    """An int or float (not a bool) within the given bounds.

    NaN is outside every bound but `ge`: a NaN rate reaches the runner's NaN guard, which names it.
    """

    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None
    optional: bool = False

    def accepts(self, value: object) -> bool:
        if not is_num(value):
            return False
        return (
            (self.gt is None or value > self.gt)
            and (self.ge is None or not value < self.ge)
            and (self.lt is None or value < self.lt)
            and (self.le is None or value <= self.le)
        )

    def expected(self) -> str:
        low = ("[", ">=", self.ge) if self.ge is not None else ("(", ">", self.gt)
        high = ("]", "<=", self.le) if self.le is not None else (")", "<", self.lt)
        if low[2] is not None and high[2] is not None:
            return f"a number in {low[0]}{low[2]}, {high[2]}{high[0]}"
        bound = low if low[2] is not None else high
        return "a number" + (f" {bound[1]} {bound[2]}" if bound[2] is not None else "")


@dataclasses.dataclass(frozen=True)
class Bool(Check):
    """True or False."""

    optional: bool = False

    def accepts(self, value: object) -> bool:
        return isinstance(value, bool)

    def expected(self) -> str:
        return "a bool"


@dataclasses.dataclass(frozen=True)
class OneOf(Check):
    """One of `choices`, after `canonical` (which may raise `ValueError` for a value it cannot read)."""

    choices: tuple[str, ...]
    canonical: Callable[[object], object] = str
    optional: bool = False

    def accepts(self, value: object) -> bool:
        try:
            return self.canonical(value) in self.choices
        except ValueError:
            return False

    def expected(self) -> str:
        return f"one of {', '.join(self.choices)}"


@dataclasses.dataclass(frozen=True)
class Function(Check):
    """A callable (`signature` in messages), or a mapping of the keywords of `keywords_of` when given."""

    signature: str = ""
    keywords_of: str | None = None
    optional: bool = False
    show_type: bool = True

    def accepts(self, value: object) -> bool:
        return callable(value) or (self.keywords_of is not None and isinstance(value, Mapping))

    def expected(self) -> str:
        mapping = f" or a mapping of {self.keywords_of} keywords" if self.keywords_of else ""
        return "callable" + (f" ({self.signature})" if self.signature else "") + mapping


@dataclasses.dataclass(frozen=True)
class Instance(Check):
    """An instance of `types`, described as `description` ("a path")."""

    types: type | tuple[type, ...]
    description: str
    optional: bool = False
    show_type: bool = True

    def accepts(self, value: object) -> bool:
        return isinstance(value, self.types)

    def expected(self) -> str:
        return self.description


@dataclasses.dataclass(frozen=True)
class Satisfies(Check):
    """A rule of its own: `test(value)`, described as `description`."""

    test: Callable[[object], bool]
    description: str
    optional: bool = False

    def accepts(self, value: object) -> bool:
        return self.test(value)

    def expected(self) -> str:
        return self.description


@dataclasses.dataclass(frozen=True)
class Unsupported(Check):
    """A switch the agent `by` ("brax_train.ppo") does not implement: it must stay False."""

    by: str
    why: str = ""

    def error(self, name: str, value: object) -> str | None:
        return f"{name}=True is not supported by {self.by}{self.why}" if value else None


def setting(default: T, check: Check) -> T:
    """A config field defaulting to `default` whose values `check` validates (see `field_errors`)."""
    return dataclasses.field(default=default, metadata={_CHECK: check})


def factory_setting(default: _F, keywords: bool = True) -> _F:
    """A `network_factory` field defaulting to the factory `default`: any callable, or with `keywords` a
    mapping of `default`'s keywords (named after it in messages)."""
    return setting(default, Function(keywords_of=default.__name__ if keywords else None))


def field_checks(cls: type[RunConfig]) -> dict[str, Check]:
    """The checks declared on `cls`'s fields, in field order; a subclass redeclaring a field's default
    without a check keeps the check of the class it inherits the field from."""
    found: dict[str, Check] = {}
    for klass in reversed(cls.__mro__):
        for f in getattr(klass, "__dataclass_fields__", {}).values():
            check = f.metadata.get(_CHECK)
            if check is not None:
                found[f.name] = check
    return {f.name: found[f.name] for f in dataclasses.fields(cls) if f.name in found}


def field_errors(c: RunConfig) -> list[str]:
    """Every violated field check of config `c`, as messages naming key and value."""
    errors = (check.error(name, getattr(c, name)) for name, check in field_checks(type(c)).items())
    return [e for e in errors if e is not None]


def raise_errors(errors: list[str], error: type[ConfigError], agent: str) -> None:
    """Raise `error` listing `errors` (one per line) as `agent`'s invalid settings; nothing if none."""
    if errors:
        raise error(f"invalid {agent} settings:\n  - " + "\n  - ".join(errors))


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunConfig:
    """Settings of the shared runner, named and defaulted as in Google Brax's trainers.

    Each agent's config subclasses it; `run_evals` and the fields after it are brax-train additions.
    """

    num_timesteps: int = setting(0, Int(ge=0))
    """Environment steps to train for (counting action repeats); 0 returns the initial parameters."""
    max_devices_per_host: int | None = setting(None, Int(ge=1, optional=True))
    """Use at most this many local devices."""
    wrap_env: bool = True
    """Wrap `environment` for training (episodes, batching, auto-reset)."""
    num_envs: int = setting(1, Int(ge=1))
    """Parallel training environments (split evenly over devices)."""
    episode_length: int | None = setting(None, Int(ge=1, optional=True))
    """Time limit in environment steps; required when `wrap_env`."""
    action_repeat: int = setting(1, Int(ge=1))
    """Times each action is repeated."""
    wrap_env_fn: Callable[..., Any] | None = None
    """`fn(env, episode_length=, action_repeat=, randomization_fn=) -> env` replacing the default wrapping."""
    randomization_fn: Callable[..., Any] | None = None
    """Domain randomization `fn(sys, rng) -> (batched_sys, in_axes)`; `rng` holds one key per environment."""
    num_resets_per_eval: int = setting(0, Int(ge=0))
    """Full environment resets between two evaluations."""
    seed: int = setting(0, Int(ge=0))
    """Random seed."""
    num_evals: int = setting(1, Int(ge=0))
    """Evaluations over the run (including the one at step 0 when > 1)."""
    eval_env: brax_envs.Env | None = setting(None, Instance(brax_envs.Env, "a brax_envs.Env", optional=True))
    """Environment to evaluate on (default: the training environment)."""
    num_eval_envs: int = setting(128, Int(ge=1))
    """Parallel evaluation episodes."""
    deterministic_eval: bool = False
    """Evaluate the mode of the policy."""
    log_training_metrics: bool = False
    """Report metrics of training episodes (and losses) through `progress_fn`."""
    training_metrics_steps: int | None = setting(None, Int(ge=1, optional=True))
    """Environment steps between training-metric reports (default: one training step)."""
    progress_fn: Callable[[int, Mapping[str, float]], None] | None = None
    """`progress_fn(step, metrics)` after evaluations and training-metric reports."""
    policy_params_fn: Callable[..., None] | None = None
    """`policy_params_fn(step, make_policy, params)` at the start and after every evaluation interval."""
    save_checkpoint_path: str | os.PathLike[str] | None = None
    """Run directory of the orbax checkpoints (one step per evaluation/metrics interval)."""
    restore_checkpoint_path: str | os.PathLike[str] | None = None
    """Run directory (its latest complete step) or one step directory to resume from."""
    run_evals: bool = True
    """Run evaluations; False reports training metrics at evaluation points instead."""
    matmul_precision: str = setting("highest", OneOf(_PRECISIONS))
    """`jax.default_matmul_precision` for training and evaluation (explicit: no silent TF32)."""
    checkpoint_max_to_keep: int | None = setting(None, Int(ge=1, optional=True))
    """Keep at most this many checkpoint steps (None keeps all)."""
    randomize_per_episode: bool = setting(False, Bool())
    """Draw each training env's `randomization_fn` parameters anew at every auto-reset (called as
    `fn(sys, rng=keys)` inside the jitted reset) instead of once per run; evaluation stays once per run."""
    fresh_reset: bool | None = setting(None, Bool(optional=True))
    """Restart finished training episodes from a new `reset` (True: every episode starts anew, as a
    terrain drawn per episode needs) or from each env's first state (False, Google Brax's cached
    restart); None: fresh exactly when `randomize_per_episode`."""

    def replace(self: C, **changes: Any) -> C:
        """A copy with the given fields changed."""
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        """A JSON-able description: plain values as is, callables by importable name with a note."""
        return {f.name: _json_field(getattr(self, f.name)) for f in dataclasses.fields(self)}


def _json_field(v: Any) -> Any:
    if v is None or isinstance(v, bool | int | float | str):
        return v
    if isinstance(v, os.PathLike):
        return os.fspath(v)
    if isinstance(v, Mapping):
        return {str(k): _json_value(x) for k, x in v.items()}
    if isinstance(v, brax_envs.Env):
        return {"environment": type(v.unwrapped).__name__}
    if callable(v):
        name = networks.callable_name(v)
        return {"callable": name} if name else {"callable": None, "note": f"unrecordable {v!r}"}
    if dataclasses.is_dataclass(v) or hasattr(v, "_fields"):
        return {"params": f"{type(v).__name__} (not recorded)"}
    return repr(v)


def _json_value(v: Any) -> Any:
    if v is None or isinstance(v, bool | int | float | str):
        return v
    if isinstance(v, list | tuple):
        return [_json_value(x) for x in v]
    if callable(v):
        return networks.callable_name(v) or repr(v)
    return repr(v)


def merge(
    cls: type[C],
    config: C | None,
    kwargs: Mapping[str, Any],
    what: str,
    error: type[ConfigError] = ConfigError,
) -> C:
    """`config` (a `cls`) updated with keyword settings; unknown keys and keys set in both places raise
    `error`.

    A keyword may fill in a key that `config` leaves at its default; a key `config` sets to another
    value must not also be given as a keyword. `what` names the function in messages (`ppo.train`).
    """
    defaults = {f.name: f.default for f in dataclasses.fields(cls)}
    unknown = [k for k in kwargs if k not in defaults]
    if unknown:
        hints = []
        for k in unknown:
            close = difflib.get_close_matches(k, list(defaults), n=1)
            hints.append(f"{k!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise error(f"unknown {what} setting(s): {', '.join(hints)}")
    if config is None:
        return cls(**kwargs)
    if not isinstance(config, cls):
        raise TypeError(f"config must be a {cls.__name__}, got {type(config).__name__}")
    both = [k for k in kwargs if getattr(config, k) is not defaults[k] and getattr(config, k) != defaults[k]]
    if both:
        raise error(
            f"setting(s) {', '.join(map(repr, both))} given both in config= and as keywords; "
            "give each in one place (e.g. config.replace(...))"
        )
    return config.replace(**kwargs)


def run_errors(c: RunConfig, device_count: int) -> list[str]:
    """Every violated rule of `c`'s settings: its field checks (any agent's), then the runner's
    cross-field rules, as messages naming keys and values."""
    errors = field_errors(c)
    if c.wrap_env and c.episode_length is None:
        errors.append(
            "episode_length is required when wrap_env=True (the training wrappers need a time limit)"
        )
    if c.randomize_per_episode is True:
        if c.randomization_fn is None:
            errors.append("randomize_per_episode=True needs a randomization_fn")
        if not c.wrap_env:
            errors.append("randomize_per_episode=True needs wrap_env=True (the training wrappers draw it)")
        if c.wrap_env_fn is not None:
            errors.append(
                "randomize_per_episode=True cannot be combined with wrap_env_fn; call "
                "brax_envs.wrappers.wrap_for_training(..., randomize_per_episode=True) inside it instead"
            )
    fresh: object = c.fresh_reset
    if fresh is False and c.randomize_per_episode is True:
        errors.append(
            "fresh_reset=False cannot restart randomize_per_episode=True episodes (a new System "
            "needs its own initial state); leave fresh_reset unset or True"
        )
    elif isinstance(fresh, bool) and c.wrap_env_fn is not None:
        errors.append(
            "fresh_reset cannot be combined with wrap_env_fn; pass fresh_reset= to "
            "brax_envs.wrappers.wrap_for_training inside it instead"
        )
    if is_int(c.num_envs) and c.num_envs >= 1 and c.num_envs % device_count:
        errors.append(
            f"num_envs ({c.num_envs}) must be divisible by the number of devices used "
            f"({device_count}; see max_devices_per_host)"
        )
    return errors


__all__ = [
    "Bool",
    "Check",
    "ConfigError",
    "Function",
    "Instance",
    "Int",
    "Num",
    "OneOf",
    "RunConfig",
    "Satisfies",
    "Unsupported",
    "factory_setting",
    "field_checks",
    "field_errors",
    "is_int",
    "is_num",
    "merge",
    "raise_errors",
    "run_errors",
    "setting",
]
