"""Proximal policy optimization with Google Brax's `ppo.train` interface."""

from brax_train.ppo.config import PPOConfig, PPOConfigError
from brax_train.ppo.losses import compute_gae, compute_ppo_loss
from brax_train.ppo.networks import (
    PPONetworks,
    PPOParams,
    make_inference_fn,
    make_ppo_networks,
    networks_from_description,
)
from brax_train.ppo.optim import AdaptiveKLState, make_optimizer, scale_by_adaptive_kl
from brax_train.ppo.spec import CODEC, SPEC, policy_from_checkpoint
from brax_train.ppo.train import NonFiniteError, TrainResult, env_steps_per_update, train

__all__ = [
    "CODEC",
    "SPEC",
    "AdaptiveKLState",
    "NonFiniteError",
    "PPOConfig",
    "PPOConfigError",
    "PPONetworks",
    "PPOParams",
    "TrainResult",
    "compute_gae",
    "compute_ppo_loss",
    "env_steps_per_update",
    "make_inference_fn",
    "make_optimizer",
    "make_ppo_networks",
    "networks_from_description",
    "policy_from_checkpoint",
    "scale_by_adaptive_kl",
    "train",
]
