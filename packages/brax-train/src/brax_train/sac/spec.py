"""SAC as the runner's users see it (`brax_train.agents`): config, trainer, checkpoint codec."""

from __future__ import annotations

from brax_train import checkpoint
from brax_train.sac import config, networks, train

CODEC = checkpoint.NetworksCodec(
    "sac", networks.networks_from_description, networks.SACParams, networks.make_inference_fn,
)
"""How SAC's networks and parameters come back from a checkpoint."""
SPEC = CODEC.spec(config.SACConfig, config.validate, train.train, train.env_steps_per_update)
"""SAC: what checkpoints and the CLI use (`agents.spec("sac")`)."""
policy_from_checkpoint = SPEC.policy_from_checkpoint

__all__ = ["CODEC", "SPEC", "policy_from_checkpoint"]
