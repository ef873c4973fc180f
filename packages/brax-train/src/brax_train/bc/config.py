"""`BCConfig`: every `bc.train` setting, typed and frozen, with validation before any compile."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp

from brax_train.bc import networks as bc_networks
from brax_train.config import ConfigError, RunConfig, check_ints, is_int, is_num, run_errors
from brax_train.config import merge as _merge


class BCConfigError(ConfigError):
    """Invalid or inconsistent BC settings; the message names every offending key and rule."""


def teacher_first(step: jax.Array) -> jax.Array:
    """Brax's default DAgger schedule: the teacher acts in the first DAgger step, the student after."""
    return jnp.where(step == 0, 1.0, 0.0).astype(jnp.float32)


@dataclasses.dataclass(frozen=True, kw_only=True)
class BCConfig(RunConfig):
    """All settings of `bc.train`, named and defaulted as in Google Brax's `bc.train`.

    The runner's settings (environments, schedule, evaluation, checkpoints) come from `RunConfig`.
    The length of a run is `dagger_steps` (Brax's) or, equivalently, `num_timesteps` (env steps).
    `teacher_checkpoint_path` and `num_timesteps`-based lengths are brax-train additions.
    """

    demo_length: int | None = None
    """Steps each environment is rolled out per DAgger step (required)."""
    teacher_inference_fn: Callable[..., Any] | None = None
    """The teacher `policy(obs, key) -> (action, extras)` labelling visited observations (or give
    `teacher_checkpoint_path`); its action, or `tanh(extras['loc'])` when present, is the label."""
    teacher_checkpoint_path: str | os.PathLike[str] | None = None
    """A brax_train run or step directory whose deterministic policy is the teacher."""
    dagger_steps: int = 1
    """DAgger iterations (training steps): collect `num_envs * demo_length` labelled steps, then fit."""
    dagger_beta_fn: Callable[[jax.Array], Any] = teacher_first
    """`fn(dagger_step) -> beta`, the probability that the teacher (not the student) acts at a step."""
    epochs: int = 50
    """Passes of minibatch Adam over each DAgger step's data."""
    batch_size: int = 256
    """Samples per minibatch; must divide `num_envs * demo_length`."""
    learning_rate: float = 4e-4
    """Adam learning rate."""
    normalize_observations: bool = True
    """Normalize observations with running statistics (updated before each fit)."""
    tanh_squash: bool = True
    """The student acts `tanh(loc)`; False: `loc` (the loss compares `tanh(loc)` either way, as Brax)."""
    scramble_time: int = 0
    """Stagger the first episodes: random episode clocks in [0, scramble_time) before the first step."""
    reset: bool = True
    """Reset every environment once per evaluation interval (at least one `num_resets_per_eval`)."""
    eval_length: int | None = None
    """Brax's name for the episode length when `episode_length` is not given."""
    num_evals: int = 0
    """Evaluations over the run (Brax's BC default: none)."""
    network_factory: Callable[..., bc_networks.BCNetworks] | Mapping[str, Any] = bc_networks.make_bc_networks
    """`fn(observation_size, action_size, preprocess_observations_fn=) -> BCNetworks`, or a mapping of
    `make_bc_networks` keywords."""
    restore_params: bc_networks.BCParams | None = None
    """Start from these student parameters (overrides the checkpoint's)."""
    madrona_backend: bool = False
    """Madrona batch renderer; not supported (must be False)."""
    augment_pixels: bool = False
    """Pixel augmentation; not supported (must be False)."""


FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(BCConfig))
"""Names of all `BCConfig` fields (the keywords `bc.train` accepts)."""


def merge(config: BCConfig | None, kwargs: Mapping[str, Any]) -> BCConfig:
    """`config` updated with `bc.train` keywords; unknown keys and keys set in both places raise."""
    try:
        return _merge(BCConfig, config, kwargs, "bc.train")
    except ConfigError as e:
        raise BCConfigError(str(e)) from None


def env_steps_per_update(c: BCConfig) -> int:
    """Environment steps one DAgger step collects (all envs, action repeats included)."""
    assert c.demo_length is not None
    return c.num_envs * c.demo_length * c.action_repeat


def num_minibatches(c: BCConfig) -> int:
    """Minibatches per epoch."""
    assert c.demo_length is not None
    return c.num_envs * c.demo_length // c.batch_size


def validate(c: BCConfig, device_count: int) -> None:
    """Raise `BCConfigError` listing every violated rule (names keys and values); no compilation."""
    if c.episode_length is None and c.eval_length is not None:
        c = c.replace(episode_length=c.eval_length)
    errors = run_errors(c, device_count)
    check_ints(c, errors, 1, ("demo_length", "eval_length"), optional=True)
    if c.demo_length is None:
        errors.append("demo_length is required (steps per environment per DAgger step)")
    check_ints(c, errors, 1, ("epochs", "batch_size"))
    check_ints(c, errors, 0, ("dagger_steps", "scramble_time"))
    if not is_num(c.learning_rate) or not c.learning_rate > 0:
        errors.append(f"learning_rate must be a number > 0, got {c.learning_rate!r}")
    for name in ("normalize_observations", "tanh_squash", "reset"):
        if not isinstance(getattr(c, name), bool):
            errors.append(f"{name} must be a bool, got {getattr(c, name)!r}")
    for name in ("madrona_backend", "augment_pixels"):
        if getattr(c, name):
            errors.append(f"{name}=True is not supported by brax_train.bc")
    _teacher_errors(c, errors)
    beta_fn: object = c.dagger_beta_fn
    if not callable(beta_fn):
        errors.append(f"dagger_beta_fn must be callable (dagger_step -> beta), got {beta_fn!r}")
    nf: object = c.network_factory
    if not (callable(nf) or isinstance(nf, Mapping)):
        errors.append(
            "network_factory must be callable or a mapping of make_bc_networks keywords, "
            f"got {type(nf).__name__}"
        )
    restore_params: object = c.restore_params
    if restore_params is not None and not isinstance(restore_params, bc_networks.BCParams):
        errors.append(f"restore_params must be BCParams, got {type(restore_params).__name__}")
    if c.eval_length is not None and c.episode_length is not None and c.eval_length != c.episode_length:
        errors.append(
            f"eval_length ({c.eval_length}) and episode_length ({c.episode_length}) disagree; give one"
        )
    if not errors:
        _batch_errors(c, device_count, errors)
    if errors:
        raise BCConfigError("invalid BC settings:\n  - " + "\n  - ".join(errors))


def _teacher_errors(c: BCConfig, errors: list[str]) -> None:
    fn: object = c.teacher_inference_fn
    path: object = c.teacher_checkpoint_path
    if (fn is None) == (path is None):
        errors.append(
            "give exactly one teacher: teacher_inference_fn (a policy(obs, key) function) or "
            f"teacher_checkpoint_path (a brax_train run directory); got {'both' if fn else 'neither'}"
        )
    if fn is not None and not callable(fn):
        errors.append(f"teacher_inference_fn must be callable, got {type(fn).__name__}")
    if path is not None and not isinstance(path, str | os.PathLike):
        errors.append(f"teacher_checkpoint_path must be a path, got {type(path).__name__}")


def _batch_errors(c: BCConfig, device_count: int, errors: list[str]) -> None:
    assert c.demo_length is not None
    samples = c.num_envs * c.demo_length
    if samples % c.batch_size:
        errors.append(
            f"batch_size ({c.batch_size}) must divide num_envs * demo_length "
            f"({c.num_envs} * {c.demo_length} = {samples}): each epoch is whole minibatches"
        )
    if c.batch_size % device_count:
        errors.append(
            f"batch_size ({c.batch_size}) must be divisible by the number of devices used "
            f"({device_count}): every minibatch is split evenly over the devices"
        )
    if c.num_timesteps and c.dagger_steps != 1 and is_int(c.dagger_steps):
        per_update = env_steps_per_update(c)
        if math.ceil(c.num_timesteps / per_update) != c.dagger_steps:
            errors.append(
                f"dagger_steps ({c.dagger_steps}) and num_timesteps ({c.num_timesteps}) disagree: one "
                f"DAgger step is {per_update} env steps (num_envs * demo_length); give only one of them"
            )


def resolve(c: BCConfig) -> BCConfig:
    """A validated config in the runner's terms: `episode_length` (from `eval_length`), `num_timesteps`
    (from `dagger_steps` unless given) and at least one reset per evaluation interval with `reset`."""
    changes: dict[str, Any] = {}
    if c.episode_length is None and c.eval_length is not None:
        changes["episode_length"] = c.eval_length
    if c.num_timesteps == 0:
        changes["num_timesteps"] = c.dagger_steps * env_steps_per_update(c)
    if c.reset and c.num_resets_per_eval == 0:
        changes["num_resets_per_eval"] = 1
    return c.replace(**changes)


__all__ = [
    "FIELDS",
    "BCConfig",
    "BCConfigError",
    "env_steps_per_update",
    "merge",
    "num_minibatches",
    "resolve",
    "teacher_first",
    "validate",
]
