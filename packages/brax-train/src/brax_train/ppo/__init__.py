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
from brax_train.ppo.train import NonFiniteError, TrainResult, train

__all__ = [
    "NonFiniteError",
    "PPOConfig",
    "PPOConfigError",
    "PPONetworks",
    "PPOParams",
    "TrainResult",
    "compute_gae",
    "compute_ppo_loss",
    "make_inference_fn",
    "make_ppo_networks",
    "networks_from_description",
    "train",
]
