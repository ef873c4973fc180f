"""Behaviour cloning with DAgger relabelling from a teacher policy, with Brax's `bc.train` interface."""

from brax_train.bc.config import BCConfig, BCConfigError, env_steps_per_update, teacher_first
from brax_train.bc.networks import (
    BCNetworks,
    BCParams,
    make_bc_networks,
    make_inference_fn,
    networks_from_description,
)
from brax_train.bc.spec import CODEC, SPEC, policy_from_checkpoint
from brax_train.bc.train import NonFiniteError, TrainingState, TrainResult, bc_loss, teacher_label, train

__all__ = [
    "CODEC",
    "SPEC",
    "BCConfig",
    "BCConfigError",
    "BCNetworks",
    "BCParams",
    "NonFiniteError",
    "TrainResult",
    "TrainingState",
    "bc_loss",
    "env_steps_per_update",
    "make_bc_networks",
    "make_inference_fn",
    "networks_from_description",
    "policy_from_checkpoint",
    "teacher_first",
    "teacher_label",
    "train",
]
