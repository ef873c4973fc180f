"""`PPOConfig`: every `ppo.train` setting, typed and frozen, with validation before any compile."""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Callable, Mapping
from typing import Any

import brax_envs

from brax_train import networks
from brax_train.ppo import networks as ppo_networks

_PRECISIONS = ("highest", "float32", "high", "bfloat16_3x", "tensorfloat32", "default", "bfloat16", "fastest")


class PPOConfigError(ValueError):
    """Invalid or inconsistent PPO settings; the message names every offending key and rule."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class PPOConfig:
    """All settings of `ppo.train`, named and defaulted as in Google Brax's `ppo.train`.

    Fields after `run_evals` are brax-train additions.
    """

    num_timesteps: int = 0
    """Environment steps to train for (counting action repeats); 0 returns the initial parameters."""
    max_devices_per_host: int | None = None
    """Use at most this many local devices."""
    wrap_env: bool = True
    """Wrap `environment` for training (episodes, batching, auto-reset)."""
    vision: bool = False
    """Pixel observations; not supported (must be False)."""
    augment_pixels: bool = False
    """Pixel augmentation; not supported (must be False)."""
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
    learning_rate: float = 1e-4
    """Adam learning rate (the initial one under the adaptive-KL schedule)."""
    entropy_cost: float = 1e-4
    """Weight of the entropy bonus."""
    discounting: float = 0.9
    """Discount factor."""
    unroll_length: int = 10
    """Steps per unroll (the time axis of the loss)."""
    batch_size: int = 32
    """Unrolls per minibatch."""
    num_minibatches: int = 16
    """Minibatches per update pass; `batch_size * num_minibatches` unrolls are collected per training step."""
    num_updates_per_batch: int = 2
    """Passes over the collected data per training step."""
    num_resets_per_eval: int = 0
    """Full environment resets between two evaluations."""
    normalize_observations: bool = False
    """Normalize observations with running statistics."""
    normalize_observations_std_eps: float = 0.0
    """Added to the variance before the square root."""
    normalize_observations_mode: str = "welford"
    """`welford` (exact moments) or `ema`."""
    normalize_until_count: int | None = None
    """Freeze the statistics after this many samples."""
    reward_scaling: float = 1.0
    """Multiplier of rewards in the loss."""
    clipping_epsilon: float = 0.3
    """PPO ratio clip."""
    clipping_epsilon_value: float | None = None
    """Value clip around the rollout-time value; None disables it."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    max_grad_norm: float | None = None
    """Global gradient-norm clip; None disables it."""
    normalize_advantage: bool = True
    """Standardize advantages per minibatch."""
    vf_loss_coefficient: float = 0.5
    """Weight of the value loss."""
    bootstrap_on_timeout: bool = False
    """On time-limit steps add `discounting * V(final_obs)` to the reward instead of masking the step."""
    use_distributional_critic: bool = False
    """Distributional critic; not supported (must be False)."""
    desired_kl: float = 0.01
    """Target KL of the adaptive-KL learning-rate schedule."""
    learning_rate_schedule: str | None = None
    """None/'NONE' (constant) or 'ADAPTIVE_KL'."""
    learning_rate_schedule_min_lr: float = 1e-5
    """Lower bound of the adaptive learning rate."""
    learning_rate_schedule_max_lr: float = 1e-2
    """Upper bound of the adaptive learning rate."""
    network_factory: Callable[..., ppo_networks.PPONetworks] | Mapping[str, Any] = (
        ppo_networks.make_ppo_networks
    )
    """`fn(observation_size, action_size, preprocess_observations_fn=) -> PPONetworks`, or a mapping of
    `make_ppo_networks` keywords (as in MuJoCo Playground configs)."""
    seed: int = 0
    """Random seed."""
    use_pmap_on_reset: bool = True
    """Accepted for compatibility; resets always run sharded under `jax.jit`."""
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
    restore_params: ppo_networks.PPOParams | None = None
    """Start from these parameters (overrides the checkpoint's parameters)."""
    restore_value_fn: bool = True
    """Resume everything from the checkpoint; False: restore policy and normalizer only (warm start)."""
    run_evals: bool = True
    """Run evaluations; False reports training metrics at evaluation points instead."""
    matmul_precision: str = "highest"
    """`jax.default_matmul_precision` for training and evaluation (explicit: no silent TF32)."""
    checkpoint_max_to_keep: int | None = None
    """Keep at most this many checkpoint steps (None keeps all)."""
    randomize_per_episode: bool = False
    """Draw each training env's `randomization_fn` parameters anew at every auto-reset (called as
    `fn(sys, rng=keys)` inside the jitted reset) instead of once per run; evaluation stays once per run."""

    def replace(self, **changes: Any) -> PPOConfig:
        """A copy with the given fields changed."""
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        """A JSON-able description: plain values as is, callables by importable name with a note."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v is None or isinstance(v, bool | int | float | str):
                out[f.name] = v
            elif isinstance(v, os.PathLike):
                out[f.name] = os.fspath(v)
            elif isinstance(v, Mapping):
                out[f.name] = {str(k): _json_value(x) for k, x in v.items()}
            elif isinstance(v, brax_envs.Env):
                out[f.name] = {"environment": type(v.unwrapped).__name__}
            elif isinstance(v, ppo_networks.PPOParams):
                out[f.name] = {"params": "PPOParams (not recorded)"}
            elif callable(v):
                name = networks.callable_name(v)
                out[f.name] = (
                    {"callable": name} if name else {"callable": None, "note": f"unrecordable {v!r}"}
                )
            else:
                out[f.name] = repr(v)
        return out


def _json_value(v: Any) -> Any:
    if v is None or isinstance(v, bool | int | float | str):
        return v
    if isinstance(v, list | tuple):
        return [_json_value(x) for x in v]
    if callable(v):
        return networks.callable_name(v) or repr(v)
    return repr(v)


FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(PPOConfig))
"""Names of all `PPOConfig` fields (the keywords `ppo.train` accepts)."""
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(PPOConfig)}


def merge(config: PPOConfig | None, kwargs: Mapping[str, Any]) -> PPOConfig:
    """`config` updated with keyword settings; unknown keys and keys set in both places raise.

    A keyword may fill in a key that `config` leaves at its default; a key `config` sets to another
    value must not also be given as a keyword.
    """
    unknown = [k for k in kwargs if k not in _DEFAULTS]
    if unknown:
        hints = []
        for k in unknown:
            close = difflib.get_close_matches(k, FIELDS, n=1)
            hints.append(f"{k!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise PPOConfigError(f"unknown ppo.train setting(s): {', '.join(hints)}")
    if config is None:
        return PPOConfig(**kwargs)
    if not isinstance(config, PPOConfig):
        raise TypeError(f"config must be a PPOConfig, got {type(config).__name__}")
    both = [
        k for k in kwargs if getattr(config, k) is not _DEFAULTS[k] and getattr(config, k) != _DEFAULTS[k]
    ]
    if both:
        raise PPOConfigError(
            f"setting(s) {', '.join(map(repr, both))} given both in config= and as keywords; "
            "give each in one place (e.g. config.replace(...))"
        )
    return config.replace(**kwargs)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def validate(c: PPOConfig, device_count: int) -> None:
    """Raise `PPOConfigError` listing every violated rule (names keys and values); no compilation."""
    errors: list[str] = []
    for name in ("num_timesteps", "num_resets_per_eval", "num_evals", "seed"):
        v = getattr(c, name)
        if not _is_int(v) or v < 0:
            errors.append(f"{name} must be an int >= 0, got {v!r}")
    for name in (
        "num_envs",
        "action_repeat",
        "unroll_length",
        "batch_size",
        "num_minibatches",
        "num_updates_per_batch",
        "num_eval_envs",
    ):
        v = getattr(c, name)
        if not _is_int(v) or v < 1:
            errors.append(f"{name} must be an int >= 1, got {v!r}")
    for name in (
        "max_devices_per_host",
        "episode_length",
        "training_metrics_steps",
        "normalize_until_count",
        "checkpoint_max_to_keep",
    ):
        v = getattr(c, name)
        if v is not None and (not _is_int(v) or v < 1):
            errors.append(f"{name} must be None or an int >= 1, got {v!r}")
    for name in (
        "learning_rate",
        "entropy_cost",
        "discounting",
        "reward_scaling",
        "clipping_epsilon",
        "gae_lambda",
        "vf_loss_coefficient",
        "desired_kl",
        "learning_rate_schedule_min_lr",
        "learning_rate_schedule_max_lr",
        "normalize_observations_std_eps",
    ):
        v = getattr(c, name)
        if not _is_num(v) or v < 0:
            errors.append(f"{name} must be a number >= 0, got {v!r}")
    for name in ("clipping_epsilon_value", "max_grad_norm"):
        v = getattr(c, name)
        if v is not None and (not _is_num(v) or v <= 0):
            errors.append(f"{name} must be None or a number > 0, got {v!r}")
    if _is_num(c.discounting) and not 0 <= c.discounting <= 1:
        errors.append(f"discounting must be in [0, 1], got {c.discounting!r}")
    if _is_num(c.gae_lambda) and not 0 <= c.gae_lambda <= 1:
        errors.append(f"gae_lambda must be in [0, 1], got {c.gae_lambda!r}")
    for name in ("vision", "augment_pixels", "use_distributional_critic"):
        if getattr(c, name):
            errors.append(f"{name}=True is not supported by brax_train.ppo")
    if c.normalize_observations_mode not in ("welford", "ema"):
        errors.append(
            f"normalize_observations_mode must be 'welford' or 'ema', got {c.normalize_observations_mode!r}"
        )
    if schedule_name(c.learning_rate_schedule) not in ("NONE", "ADAPTIVE_KL"):
        errors.append(
            f"learning_rate_schedule must be None, 'NONE' or 'ADAPTIVE_KL', got {c.learning_rate_schedule!r}"
        )
    if c.matmul_precision not in _PRECISIONS:
        errors.append(f"matmul_precision must be one of {', '.join(_PRECISIONS)}, got {c.matmul_precision!r}")
    if c.wrap_env and c.episode_length is None:
        errors.append(
            "episode_length is required when wrap_env=True (the training wrappers need a time limit)"
        )
    nf: object = c.network_factory  # runtime checks of values typed statically
    if not (callable(nf) or isinstance(nf, Mapping)):
        errors.append(
            f"network_factory must be callable or a mapping of make_ppo_networks keywords, "
            f"got {type(nf).__name__}"
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
    eval_env: object = c.eval_env
    if eval_env is not None and not isinstance(eval_env, brax_envs.Env):
        errors.append(f"eval_env must be a brax_envs.Env, got {type(eval_env).__name__}")
    restore_params: object = c.restore_params
    if restore_params is not None and not isinstance(restore_params, ppo_networks.PPOParams):
        errors.append(f"restore_params must be PPOParams, got {type(restore_params).__name__}")
    ints_ok = all(
        _is_int(getattr(c, n)) and getattr(c, n) >= 1 for n in ("num_envs", "batch_size", "num_minibatches")
    )
    if ints_ok:
        if c.num_envs % device_count:
            errors.append(
                f"num_envs ({c.num_envs}) must be divisible by the number of devices used "
                f"({device_count}; see max_devices_per_host)"
            )
        if (c.batch_size * c.num_minibatches) % c.num_envs:
            errors.append(
                f"batch_size * num_minibatches ({c.batch_size} * {c.num_minibatches} = "
                f"{c.batch_size * c.num_minibatches}) must be divisible by num_envs ({c.num_envs})"
            )
        if c.batch_size % device_count:
            errors.append(
                f"batch_size ({c.batch_size}) must be divisible by the number of devices used "
                f"({device_count}): every minibatch is split evenly over the devices"
            )
    if errors:
        raise PPOConfigError("invalid PPO settings:\n  - " + "\n  - ".join(errors))


def schedule_name(schedule: Any) -> str:
    """Canonical name of a learning-rate schedule setting ('NONE' or 'ADAPTIVE_KL')."""
    if schedule is None:
        return "NONE"
    value = getattr(schedule, "value", schedule)  # accept enum members such as Brax's LRSchedule
    return str(value).upper()


__all__ = ["FIELDS", "PPOConfig", "PPOConfigError", "merge", "schedule_name", "validate"]
