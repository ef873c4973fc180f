"""Default PPO settings of `brax-train train`, per environment.

`fast`, `inverted_pendulum`, `inverted_double_pendulum`, `pendulum_swingup` and `reacher` are sized
for a laptop CPU: Google Brax's published hyper-parameters for these tasks with smaller value
networks and fewer evaluation episodes (the 256x5 value MLP and 128 x 1000-step evaluations
dominate CPU time and buy nothing on these tasks). The locomotion tasks keep Google Brax's
accelerator settings: they train on a CPU too, but in hours, not minutes.
"""

from __future__ import annotations

import copy
from typing import Any

COMMON: dict[str, Any] = {
    "num_timesteps": 5_000_000,
    "num_evals": 10,
    "episode_length": 1000,
    "action_repeat": 1,
    "num_envs": 256,
    "batch_size": 256,
    "num_minibatches": 8,
    "unroll_length": 10,
    "num_updates_per_batch": 4,
    "discounting": 0.97,
    "learning_rate": 3e-4,
    "entropy_cost": 1e-2,
    "normalize_observations": True,
    "reward_scaling": 1.0,
    "num_eval_envs": 128,
    # Training-episode metrics after every training step keep the progress bar and metrics.jsonl
    # live between evaluations; they cost one small host transfer per training step.
    "log_training_metrics": True,
    "network_factory": {},
}
"""Settings of every environment, including custom ones registered with `--import`."""

_CPU_NETS = {"policy_hidden_layer_sizes": [32, 32, 32, 32], "value_hidden_layer_sizes": [64, 64, 64, 64]}

ENV_DEFAULTS: dict[str, dict[str, Any]] = {
    "fast": {
        "num_timesteps": 60_000,
        "episode_length": 100,
        "num_envs": 16,
        "batch_size": 16,
        "num_minibatches": 4,
        "unroll_length": 20,
        "num_updates_per_batch": 4,
        "discounting": 0.99,
        "learning_rate": 3e-3,
        "entropy_cost": 1e-2,
        "normalize_observations": False,
        "num_eval_envs": 16,
        "deterministic_eval": True,
        "seed": 1,
        "network_factory": {"policy_hidden_layer_sizes": [16, 16], "value_hidden_layer_sizes": [16, 16]},
    },
    "inverted_pendulum": {
        "num_timesteps": 2_000_000,
        "reward_scaling": 10.0,
        "num_envs": 2048,
        "batch_size": 1024,
        "num_minibatches": 32,
        "unroll_length": 5,
        "num_eval_envs": 16,
        "seed": 1,
        "network_factory": _CPU_NETS,
    },
    "inverted_double_pendulum": {
        "num_timesteps": 10_000_000,
        "num_evals": 20,
        "reward_scaling": 10.0,
        "num_envs": 2048,
        "batch_size": 1024,
        "num_minibatches": 32,
        "unroll_length": 5,
        "num_eval_envs": 16,
        "seed": 1,
        "network_factory": _CPU_NETS,
    },
    "pendulum_swingup": {
        "num_timesteps": 1_000_000,
        "episode_length": 200,
        "num_envs": 256,
        "batch_size": 256,
        "num_minibatches": 8,
        "reward_scaling": 10.0,
        "num_eval_envs": 16,
        "network_factory": _CPU_NETS,
    },
    "reacher": {
        "num_timesteps": 10_000_000,
        "num_evals": 20,
        "reward_scaling": 5.0,
        "action_repeat": 4,
        "num_envs": 1024,
        "batch_size": 256,
        "num_minibatches": 32,
        "unroll_length": 50,
        "num_updates_per_batch": 8,
        "discounting": 0.95,
        "entropy_cost": 1e-3,
        "num_eval_envs": 16,
        "network_factory": _CPU_NETS,
    },
    "ant": {
        "num_timesteps": 50_000_000,
        "reward_scaling": 10.0,
        "num_envs": 4096,
        "batch_size": 2048,
        "num_minibatches": 32,
        "unroll_length": 5,
    },
    "halfcheetah": {
        "num_timesteps": 50_000_000,
        "num_evals": 20,
        "num_envs": 2048,
        "batch_size": 512,
        "num_minibatches": 32,
        "unroll_length": 20,
        "num_updates_per_batch": 8,
        "discounting": 0.95,
        "entropy_cost": 1e-3,
    },
    "hopper": {
        "num_timesteps": 50_000_000,
        "reward_scaling": 1.0,
        "num_envs": 2048,
        "batch_size": 1024,
        "num_minibatches": 32,
        "unroll_length": 10,
        "num_updates_per_batch": 8,
        "entropy_cost": 1e-3,
    },
    "walker2d": {
        "num_timesteps": 50_000_000,
        "reward_scaling": 1.0,
        "num_envs": 2048,
        "batch_size": 1024,
        "num_minibatches": 32,
        "unroll_length": 10,
        "num_updates_per_batch": 8,
        "entropy_cost": 1e-3,
    },
    "humanoid": {
        "num_timesteps": 50_000_000,
        "reward_scaling": 0.1,
        "num_envs": 2048,
        "batch_size": 1024,
        "num_minibatches": 32,
        "unroll_length": 10,
        "num_updates_per_batch": 8,
        "entropy_cost": 1e-3,
    },
    "humanoidstandup": {
        "num_timesteps": 100_000_000,
        "num_evals": 20,
        "reward_scaling": 0.1,
        "num_envs": 2048,
        "batch_size": 1024,
        "num_minibatches": 32,
        "unroll_length": 15,
        "num_updates_per_batch": 8,
        "learning_rate": 6e-4,
    },
    "pusher": {
        "num_timesteps": 50_000_000,
        "num_evals": 20,
        "reward_scaling": 5.0,
        "num_envs": 2048,
        "batch_size": 512,
        "num_minibatches": 16,
        "unroll_length": 30,
        "num_updates_per_batch": 8,
        "discounting": 0.95,
    },
    "swimmer": {
        "num_timesteps": 50_000_000,
        "num_envs": 2048,
        "batch_size": 1024,
        "num_minibatches": 32,
        "unroll_length": 10,
        "num_updates_per_batch": 8,
        "discounting": 0.995,
        "entropy_cost": 1e-3,
    },
}
"""Per-environment changes to `COMMON`."""


def defaults_for(env: str) -> dict[str, Any]:
    """The default settings for environment `env` (a fresh, mutable copy)."""
    return copy.deepcopy({**COMMON, **ENV_DEFAULTS.get(env, {})})


__all__ = ["COMMON", "ENV_DEFAULTS", "defaults_for"]
