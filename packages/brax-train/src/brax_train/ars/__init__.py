"""Augmented random search (Mania et al. 2018) with Google Brax's `ars.train` interface."""

from brax_train.ars.config import ARSConfig, ARSConfigError, env_steps_per_update
from brax_train.ars.networks import (
    ARSNetwork,
    ARSParams,
    make_inference_fn,
    make_policy_network,
    network_from_description,
)
from brax_train.ars.spec import CODEC, SPEC, policy_from_checkpoint
from brax_train.ars.train import (
    NonFiniteError,
    TrainingState,
    TrainResult,
    step_direction,
    top_direction_mask,
    train,
)

__all__ = [
    "CODEC",
    "SPEC",
    "ARSConfig",
    "ARSConfigError",
    "ARSNetwork",
    "ARSParams",
    "NonFiniteError",
    "TrainResult",
    "TrainingState",
    "env_steps_per_update",
    "make_inference_fn",
    "make_policy_network",
    "network_from_description",
    "policy_from_checkpoint",
    "step_direction",
    "top_direction_mask",
    "train",
]
