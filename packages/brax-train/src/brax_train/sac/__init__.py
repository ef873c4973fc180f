"""Soft actor-critic with Google Brax's `sac.train` interface and an on-device replay buffer."""

from brax_train.sac.config import SACConfig, SACConfigError
from brax_train.sac.losses import actor_loss, alpha_loss, bootstrap_mask, critic_loss
from brax_train.sac.networks import (
    SACNetworks,
    SACParams,
    make_inference_fn,
    make_q_network,
    make_sac_networks,
    networks_from_description,
)
from brax_train.sac.replay import ReplayBuffer
from brax_train.sac.spec import CODEC, SPEC, policy_from_checkpoint
from brax_train.sac.train import (
    Learner,
    NonFiniteError,
    TrainingState,
    TrainResult,
    env_steps_per_update,
    train,
)

__all__ = [
    "CODEC",
    "SPEC",
    "Learner",
    "NonFiniteError",
    "ReplayBuffer",
    "SACConfig",
    "SACConfigError",
    "SACNetworks",
    "SACParams",
    "TrainResult",
    "TrainingState",
    "actor_loss",
    "alpha_loss",
    "bootstrap_mask",
    "critic_loss",
    "env_steps_per_update",
    "make_inference_fn",
    "make_q_network",
    "make_sac_networks",
    "networks_from_description",
    "policy_from_checkpoint",
    "train",
]
