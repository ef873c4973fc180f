"""Recurrent PPO: a GRU policy whose hidden state the environment state carries, trained with PPO."""

from brax_train.rppo.config import RPPOConfig, RPPOConfigError
from brax_train.rppo.memory import MemoryWrapper, policy_env
from brax_train.rppo.networks import (
    MemoryTanhDistribution,
    RecurrentPolicy,
    RPPONetworks,
    make_rppo_networks,
    networks_from_description,
)
from brax_train.rppo.spec import CODEC, SPEC, policy_from_checkpoint
from brax_train.rppo.train import env_steps_per_update, replay_hidden, sequence_loss, train

__all__ = [
    "CODEC",
    "SPEC",
    "MemoryTanhDistribution",
    "MemoryWrapper",
    "RPPOConfig",
    "RPPOConfigError",
    "RPPONetworks",
    "RecurrentPolicy",
    "env_steps_per_update",
    "make_rppo_networks",
    "networks_from_description",
    "policy_env",
    "policy_from_checkpoint",
    "replay_hidden",
    "sequence_loss",
    "train",
]
