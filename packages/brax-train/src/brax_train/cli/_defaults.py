"""The presets of `brax-train train`: config instances per agent and environment (configs hold every default).

`fast`, `inverted_pendulum`, `inverted_double_pendulum`, `pendulum_swingup` and `reacher` are sized
for a laptop CPU: Google Brax's published hyper-parameters for these tasks with smaller value
networks and fewer evaluation episodes (the 256x5 value MLP and 128 x 1000-step evaluations
dominate CPU time and buy nothing on these tasks). The locomotion tasks keep Google Brax's
accelerator settings: they train on a CPU too, but in hours, not minutes.
"""

from __future__ import annotations

from typing import Any

from brax_train import agents
from brax_train.ppo.config import PPOConfig

CLI_BASE = PPOConfig(
    num_timesteps=5_000_000, num_evals=10, episode_length=1000, action_repeat=1, num_envs=256,
    batch_size=256, num_minibatches=8, unroll_length=10, num_updates_per_batch=4, discounting=0.97,
    learning_rate=3e-4, entropy_cost=1e-2, normalize_observations=True, reward_scaling=1.0,
    num_eval_envs=128, network_factory={},
    # Training-episode metrics after every training step keep the progress bar and metrics.jsonl
    # live between evaluations; they cost one small host transfer per training step.
    log_training_metrics=True,
)
"""The settings of every environment without a preset, including custom ones from `--import`."""

_CPU_NETS = {"policy_hidden_layer_sizes": [32, 32, 32, 32], "value_hidden_layer_sizes": [64, 64, 64, 64]}
_CPU: dict[str, Any] = {"num_eval_envs": 16, "network_factory": _CPU_NETS}
_GPU: dict[str, Any] = {"num_timesteps": 50_000_000, "num_minibatches": 32, "num_updates_per_batch": 8}

PRESETS: dict[str, PPOConfig] = {
    "fast": CLI_BASE.replace(
        num_timesteps=60_000, episode_length=100, num_envs=16, batch_size=16, num_minibatches=4,
        unroll_length=20, num_updates_per_batch=4, discounting=0.99, learning_rate=3e-3, entropy_cost=1e-2,
        normalize_observations=False, num_eval_envs=16, deterministic_eval=True, seed=1,
        network_factory={"policy_hidden_layer_sizes": [16, 16], "value_hidden_layer_sizes": [16, 16]},
    ),
    "inverted_pendulum": CLI_BASE.replace(
        **_CPU, num_timesteps=2_000_000, reward_scaling=10.0, num_envs=2048, batch_size=1024,
        num_minibatches=32, unroll_length=5, seed=1,
    ),
    "inverted_double_pendulum": CLI_BASE.replace(
        **_CPU, num_timesteps=10_000_000, num_evals=20, reward_scaling=10.0, num_envs=2048,
        batch_size=1024, num_minibatches=32, unroll_length=5, seed=1,
    ),
    "pendulum_swingup": CLI_BASE.replace(
        **_CPU, num_timesteps=1_000_000, episode_length=200, num_envs=256, batch_size=256,
        num_minibatches=8, reward_scaling=10.0,
    ),
    "reacher": CLI_BASE.replace(
        **_CPU, num_timesteps=10_000_000, num_evals=20, reward_scaling=5.0, action_repeat=4,
        num_envs=1024, batch_size=256, num_minibatches=32, unroll_length=50, num_updates_per_batch=8,
        discounting=0.95, entropy_cost=1e-3,
    ),
    "ant": CLI_BASE.replace(
        num_timesteps=50_000_000, reward_scaling=10.0, num_envs=4096, batch_size=2048, num_minibatches=32,
        unroll_length=5,
    ),
    "halfcheetah": CLI_BASE.replace(
        **_GPU, num_evals=20, num_envs=2048, batch_size=512, unroll_length=20, discounting=0.95,
        entropy_cost=1e-3,
    ),
    "hopper": CLI_BASE.replace(
        **_GPU, reward_scaling=1.0, num_envs=2048, batch_size=1024, unroll_length=10, entropy_cost=1e-3
    ),
    "walker2d": CLI_BASE.replace(
        **_GPU, reward_scaling=1.0, num_envs=2048, batch_size=1024, unroll_length=10, entropy_cost=1e-3
    ),
    "humanoid": CLI_BASE.replace(
        **_GPU, reward_scaling=0.1, num_envs=2048, batch_size=1024, unroll_length=10, entropy_cost=1e-3
    ),
    "humanoidstandup": CLI_BASE.replace(
        **{**_GPU, "num_timesteps": 100_000_000}, num_evals=20, reward_scaling=0.1, num_envs=2048,
        batch_size=1024, unroll_length=15, learning_rate=6e-4,
    ),
    "pusher": CLI_BASE.replace(
        **{**_GPU, "num_minibatches": 16}, num_evals=20, reward_scaling=5.0, num_envs=2048, batch_size=512,
        unroll_length=30, discounting=0.95,
    ),
    "swimmer": CLI_BASE.replace(
        **_GPU, num_envs=2048, batch_size=1024, unroll_length=10, discounting=0.995, entropy_cost=1e-3
    ),
}
"""Per-environment presets: `CLI_BASE` with Google Brax's (or the CPU-sized) hyper-parameters."""


def preset(env: str, agent: str = "ppo") -> Any:
    """`agent`'s preset for `env`: PPO's presets, else the agent's config with the CLI's run settings."""
    if agent == "ppo":
        return PRESETS.get(env, CLI_BASE)
    run: dict[str, Any] = {"num_timesteps": 1_000_000, "num_evals": 10, "episode_length": 1000}
    return agents.spec(agent).config_class(**run, log_training_metrics=True)


__all__ = ["CLI_BASE", "PRESETS", "preset"]
