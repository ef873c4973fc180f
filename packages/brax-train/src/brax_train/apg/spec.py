"""APG as the runner's users see it (`brax_train.agents`): config, trainer, checkpoint codec."""

from __future__ import annotations

from brax_train import agents, checkpoint
from brax_train.apg import config, networks, train

CODEC = checkpoint.NetworksCodec(
    "apg", networks.networks_from_description, networks.APGParams, networks.make_inference_fn,
)
"""How APG's networks and parameters come back from a checkpoint."""
policy_from_checkpoint = CODEC.policy_from_checkpoint
SPEC = agents.AgentSpec(
    name="apg", config_class=config.APGConfig, validate=config.validate, train=train.train,
    env_steps_per_update=config.env_steps_per_update, policy_from_checkpoint=policy_from_checkpoint,
    resolve=config.resolve,
)
"""APG: what checkpoints and the CLI use (`agents.spec("apg")`)."""

__all__ = ["CODEC", "SPEC", "policy_from_checkpoint"]
