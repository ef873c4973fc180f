"""SAC as the runner's users see it (`brax_train.agents`): config, trainer, checkpoint codec."""

from __future__ import annotations

from brax_train import agents, checkpoint
from brax_train.sac import config, networks, train

CODEC = checkpoint.NetworksCodec(
    "sac", networks.networks_from_description, networks.SACParams, networks.make_inference_fn,
)
"""How SAC's networks and parameters come back from a checkpoint."""
policy_from_checkpoint = CODEC.policy_from_checkpoint
SPEC = agents.AgentSpec(
    name="sac", config_class=config.SACConfig, validate=config.validate, train=train.train,
    env_steps_per_update=train.env_steps_per_update, policy_from_checkpoint=policy_from_checkpoint,
)
"""SAC: what checkpoints and the CLI use (`agents.spec("sac")`)."""

__all__ = ["CODEC", "SPEC", "policy_from_checkpoint"]
