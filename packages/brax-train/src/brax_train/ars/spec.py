"""ARS as the runner's users see it (`brax_train.agents`): config, trainer, checkpoint codec."""

from __future__ import annotations

from brax_train import checkpoint
from brax_train.ars import config, networks, train

CODEC = checkpoint.NetworksCodec(
    "ars", networks.network_from_description, networks.ARSParams, networks.make_inference_fn,
)
"""How ARS's networks and parameters come back from a checkpoint."""
SPEC = CODEC.spec(
    config.ARSConfig, config.validate, train.train, config.env_steps_per_update, counts_env_steps=True,
)
"""ARS: what checkpoints and the CLI use (`agents.spec("ars")`)."""
policy_from_checkpoint = SPEC.policy_from_checkpoint

__all__ = ["CODEC", "SPEC", "policy_from_checkpoint"]
