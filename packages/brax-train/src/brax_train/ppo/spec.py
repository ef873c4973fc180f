"""PPO as the runner's users see it (`brax_train.agents`): config, trainer, checkpoint codec."""

from __future__ import annotations

from brax_train import checkpoint
from brax_train.ppo import config, networks, train

CODEC = checkpoint.NetworksCodec(
    "ppo", networks.networks_from_description, networks.PPOParams, networks.make_inference_fn,
)
"""How PPO's networks and parameters come back from a checkpoint."""
SPEC = CODEC.spec(config.PPOConfig, config.validate, train.train, train.env_steps_per_update)
"""PPO: what checkpoints and the CLI use (`agents.spec("ppo")`)."""
policy_from_checkpoint = SPEC.policy_from_checkpoint

__all__ = ["CODEC", "SPEC", "policy_from_checkpoint"]
