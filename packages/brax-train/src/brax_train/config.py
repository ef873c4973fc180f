"""`RunConfig`: the settings every agent shares (the runner's), typed and frozen; merging and checks."""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import brax_envs

from brax_train import networks

_PRECISIONS = ("highest", "float32", "high", "bfloat16_3x", "tensorfloat32", "default", "bfloat16", "fastest")

C = TypeVar("C", bound="RunConfig")


class ConfigError(ValueError):
    """Invalid or inconsistent settings; the message names every offending key and rule."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunConfig:
    """Settings of the shared runner, named and defaulted as in Google Brax's trainers.

    Each agent's config subclasses it; `run_evals` and the fields after it are brax-train additions.
    """

    num_timesteps: int = 0
    """Environment steps to train for (counting action repeats); 0 returns the initial parameters."""
    max_devices_per_host: int | None = None
    """Use at most this many local devices."""
    wrap_env: bool = True
    """Wrap `environment` for training (episodes, batching, auto-reset)."""
    num_envs: int = 1
    """Parallel training environments (split evenly over devices)."""
    episode_length: int | None = None
    """Time limit in environment steps; required when `wrap_env`."""
    action_repeat: int = 1
    """Times each action is repeated."""
    wrap_env_fn: Callable[..., Any] | None = None
    """`fn(env, episode_length=, action_repeat=, randomization_fn=) -> env` replacing the default wrapping."""
    randomization_fn: Callable[..., Any] | None = None
    """Domain randomization `fn(sys, rng) -> (batched_sys, in_axes)`; `rng` holds one key per environment."""
    num_resets_per_eval: int = 0
    """Full environment resets between two evaluations."""
    seed: int = 0
    """Random seed."""
    num_evals: int = 1
    """Evaluations over the run (including the one at step 0 when > 1)."""
    eval_env: brax_envs.Env | None = None
    """Environment to evaluate on (default: the training environment)."""
    num_eval_envs: int = 128
    """Parallel evaluation episodes."""
    deterministic_eval: bool = False
    """Evaluate the mode of the policy."""
    log_training_metrics: bool = False
    """Report metrics of training episodes (and losses) through `progress_fn`."""
    training_metrics_steps: int | None = None
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
    matmul_precision: str = "highest"
    """`jax.default_matmul_precision` for training and evaluation (explicit: no silent TF32)."""
    checkpoint_max_to_keep: int | None = None
    """Keep at most this many checkpoint steps (None keeps all)."""
    randomize_per_episode: bool = False
    """Draw each training env's `randomization_fn` parameters anew at every auto-reset (called as
    `fn(sys, rng=keys)` inside the jitted reset) instead of once per run; evaluation stays once per run."""
    fresh_reset: bool | None = None
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


def merge(cls: type[C], config: C | None, kwargs: Mapping[str, Any], what: str) -> C:
    """`config` (a `cls`) updated with keyword settings; unknown keys and keys set in both places raise.

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
        raise ConfigError(f"unknown {what} setting(s): {', '.join(hints)}")
    if config is None:
        return cls(**kwargs)
    if not isinstance(config, cls):
        raise TypeError(f"config must be a {cls.__name__}, got {type(config).__name__}")
    both = [k for k in kwargs if getattr(config, k) is not defaults[k] and getattr(config, k) != defaults[k]]
    if both:
        raise ConfigError(
            f"setting(s) {', '.join(map(repr, both))} given both in config= and as keywords; "
            "give each in one place (e.g. config.replace(...))"
        )
    return config.replace(**kwargs)


def is_int(v: Any) -> bool:
    """An int that is not a bool."""
    return isinstance(v, int) and not isinstance(v, bool)


def is_num(v: Any) -> bool:
    """An int or float that is not a bool."""
    return isinstance(v, int | float) and not isinstance(v, bool)


def check_ints(
    c: Any, errors: list[str], minimum: int, names: tuple[str, ...], optional: bool = False
) -> None:
    """Append an error for each of `names` that is not an int >= `minimum` (or None if `optional`)."""
    for name in names:
        v = getattr(c, name)
        if optional and v is None:
            continue
        if not is_int(v) or v < minimum:
            errors.append(f"{name} must be {'None or ' if optional else ''}an int >= {minimum}, got {v!r}")


def run_errors(c: RunConfig, device_count: int) -> list[str]:
    """Every violated rule of the runner's settings, as messages naming key and value."""
    errors: list[str] = []
    check_ints(c, errors, 0, ("num_timesteps", "num_resets_per_eval", "num_evals", "seed"))
    check_ints(c, errors, 1, ("num_envs", "action_repeat", "num_eval_envs"))
    check_ints(
        c,
        errors,
        1,
        ("max_devices_per_host", "episode_length", "training_metrics_steps", "checkpoint_max_to_keep"),
        optional=True,
    )
    if c.matmul_precision not in _PRECISIONS:
        errors.append(f"matmul_precision must be one of {', '.join(_PRECISIONS)}, got {c.matmul_precision!r}")
    if c.wrap_env and c.episode_length is None:
        errors.append(
            "episode_length is required when wrap_env=True (the training wrappers need a time limit)"
        )
    per_episode: object = c.randomize_per_episode
    if not isinstance(per_episode, bool):
        errors.append(f"randomize_per_episode must be a bool, got {per_episode!r}")
    elif per_episode:
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
    if fresh is not None and not isinstance(fresh, bool):
        errors.append(f"fresh_reset must be a bool or None, got {fresh!r}")
    elif fresh is False and per_episode is True:
        errors.append("fresh_reset=False cannot restart randomize_per_episode=True episodes (a new System "
                      "needs its own initial state); leave fresh_reset unset or True")
    elif fresh is not None and c.wrap_env_fn is not None:
        errors.append("fresh_reset cannot be combined with wrap_env_fn; pass fresh_reset= to "
                      "brax_envs.wrappers.wrap_for_training inside it instead")
    eval_env: object = c.eval_env
    if eval_env is not None and not isinstance(eval_env, brax_envs.Env):
        errors.append(f"eval_env must be a brax_envs.Env, got {type(eval_env).__name__}")
    if is_int(c.num_envs) and c.num_envs >= 1 and c.num_envs % device_count:
        errors.append(
            f"num_envs ({c.num_envs}) must be divisible by the number of devices used "
            f"({device_count}; see max_devices_per_host)"
        )
    return errors


__all__ = ["ConfigError", "RunConfig", "check_ints", "is_int", "is_num", "merge", "run_errors"]
