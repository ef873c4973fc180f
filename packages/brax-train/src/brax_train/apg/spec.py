"""APG as the runner's users see it (`brax_train.agents`): config, trainer, checkpoint codec."""

from __future__ import annotations

from brax_train import checkpoint
from brax_train.apg import config, networks, train

CODEC = checkpoint.NetworksCodec(
    "apg", networks.networks_from_description, networks.APGParams, networks.make_inference_fn,
)
"""How APG's networks and parameters come back from a checkpoint."""
SPEC = CODEC.spec(
    config.APGConfig, config.validate, train.train, config.env_steps_per_update, resolve=config.resolve,
)
"""APG: what checkpoints and the CLI use (`agents.spec("apg")`)."""
policy_from_checkpoint = SPEC.policy_from_checkpoint

__all__ = ["CODEC", "SPEC", "policy_from_checkpoint"]
