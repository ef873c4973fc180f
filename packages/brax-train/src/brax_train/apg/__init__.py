"""Analytic policy gradients through the differentiable simulator, with Brax's `apg.train` interface."""

from brax_train.apg.config import APGConfig, APGConfigError, env_steps_per_update
from brax_train.apg.networks import (
    APGNetworks,
    APGParams,
    make_apg_networks,
    make_inference_fn,
    networks_from_description,
)
from brax_train.apg.spec import CODEC, SPEC, policy_from_checkpoint
from brax_train.apg.train import (
    NonFiniteError,
    TrainingState,
    TrainResult,
    make_optimizer,
    rollout_loss,
    train,
)

__all__ = [
    "CODEC",
    "SPEC",
    "APGConfig",
    "APGConfigError",
    "APGNetworks",
    "APGParams",
    "NonFiniteError",
    "TrainResult",
    "TrainingState",
    "env_steps_per_update",
    "make_apg_networks",
    "make_inference_fn",
    "make_optimizer",
    "networks_from_description",
    "policy_from_checkpoint",
    "rollout_loss",
    "train",
]
