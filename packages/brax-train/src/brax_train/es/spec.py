"""ES as the runner's users see it (`brax_train.agents`): config, trainer, checkpoint codec."""

from __future__ import annotations

from brax_train import checkpoint
from brax_train.es import config, networks, train

CODEC = checkpoint.NetworksCodec(
    "es", networks.networks_from_description, networks.ESParams, networks.make_inference_fn,
)
"""How ES's networks and parameters come back from a checkpoint."""
SPEC = CODEC.spec(
    config.ESConfig, config.validate, train.train, config.env_steps_per_update, counts_env_steps=True,
)
"""ES: what checkpoints and the CLI use (`agents.spec("es")`)."""
policy_from_checkpoint = SPEC.policy_from_checkpoint

__all__ = ["CODEC", "SPEC", "policy_from_checkpoint"]
