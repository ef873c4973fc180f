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
from brax_train.config import (
    Bool,
    ConfigError,
    Function,
    Instance,
    Int,
    Num,
    RunConfig,
    Unsupported,
    factory_setting,
    is_int,
    raise_errors,
    run_errors,
    setting,
)
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

    demo_length: int | None = setting(None, Int(ge=1, optional=True))
    """Steps each environment is rolled out per DAgger step (required)."""
    teacher_inference_fn: Callable[..., Any] | None = setting(None, Function(optional=True))
    """The teacher `policy(obs, key) -> (action, extras)` labelling visited observations (or give
    `teacher_checkpoint_path`); its action, or `tanh(extras['loc'])` when present, is the label."""
    teacher_checkpoint_path: str | os.PathLike[str] | None = setting(
        None, Instance((str, os.PathLike), "a path", optional=True)
    )
    """A brax_train run or step directory whose deterministic policy is the teacher."""
    dagger_steps: int = setting(1, Int(ge=0))
    """DAgger iterations (training steps): collect `num_envs * demo_length` labelled steps, then fit."""
    dagger_beta_fn: Callable[[jax.Array], Any] = setting(teacher_first, Function("dagger_step -> beta"))
    """`fn(dagger_step) -> beta`, the probability that the teacher (not the student) acts at a step."""
    epochs: int = setting(50, Int(ge=1))
    """Passes of minibatch Adam over each DAgger step's data."""
    batch_size: int = setting(256, Int(ge=1))
    """Samples per minibatch; must divide `num_envs * demo_length`."""
    learning_rate: float = setting(4e-4, Num(gt=0))
    """Adam learning rate."""
    normalize_observations: bool = setting(True, Bool())
    """Normalize observations with running statistics (updated before each fit)."""
    tanh_squash: bool = setting(True, Bool())
    """The student acts `tanh(loc)`; False: `loc` (the loss compares `tanh(loc)` either way, as Brax)."""
    scramble_time: int = setting(0, Int(ge=0))
    """Stagger the first episodes: random episode clocks in [0, scramble_time) before the first step."""
    reset: bool = setting(True, Bool())
    """Reset every environment once per evaluation interval (at least one `num_resets_per_eval`)."""
    eval_length: int | None = setting(None, Int(ge=1, optional=True))
    """Brax's name for the episode length when `episode_length` is not given."""
    num_evals: int = 0
    """Evaluations over the run (Brax's BC default: none)."""
    network_factory: Callable[..., bc_networks.BCNetworks] | Mapping[str, Any] = factory_setting(
        bc_networks.make_bc_networks
    )
    """`fn(observation_size, action_size, preprocess_observations_fn=) -> BCNetworks`, or a mapping of
    `make_bc_networks` keywords."""
    restore_params: bc_networks.BCParams | None = setting(
        None, Instance(bc_networks.BCParams, "BCParams", optional=True)
    )
    """Start from these student parameters (overrides the checkpoint's)."""
    madrona_backend: bool = setting(False, Unsupported("brax_train.bc"))
    """Madrona batch renderer; not supported (must be False)."""
    augment_pixels: bool = setting(False, Unsupported("brax_train.bc"))
    """Pixel augmentation; not supported (must be False)."""


FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(BCConfig))
"""Names of all `BCConfig` fields (the keywords `bc.train` accepts)."""


def merge(config: BCConfig | None, kwargs: Mapping[str, Any]) -> BCConfig:
    """`config` updated with `bc.train` keywords; unknown keys and keys set in both places raise."""
    return _merge(BCConfig, config, kwargs, "bc.train", BCConfigError)


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
    if c.demo_length is None:
        errors.append("demo_length is required (steps per environment per DAgger step)")
    fn, path = c.teacher_inference_fn, c.teacher_checkpoint_path
    if (fn is None) == (path is None):
        errors.append(
            "give exactly one teacher: teacher_inference_fn (a policy(obs, key) function) or "
            f"teacher_checkpoint_path (a brax_train run directory); got {'both' if fn else 'neither'}"
        )
    if c.eval_length is not None and c.episode_length is not None and c.eval_length != c.episode_length:
        errors.append(
            f"eval_length ({c.eval_length}) and episode_length ({c.episode_length}) disagree; give one"
        )
    if not errors:
        _batch_errors(c, device_count, errors)
    raise_errors(errors, BCConfigError, "BC")


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
