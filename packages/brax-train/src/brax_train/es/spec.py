"""ES as the runner's users see it (`brax_train.agents`): config, trainer, checkpoint codec."""

from __future__ import annotations

from brax_train import agents, checkpoint
from brax_train.es import config, networks, train

CODEC = checkpoint.NetworksCodec(
    "es", networks.networks_from_description, networks.ESParams, networks.make_inference_fn,
)
"""How ES's networks and parameters come back from a checkpoint."""
policy_from_checkpoint = CODEC.policy_from_checkpoint
SPEC = agents.AgentSpec(
    name="es", config_class=config.ESConfig, validate=config.validate, train=train.train,
    env_steps_per_update=config.env_steps_per_update, policy_from_checkpoint=policy_from_checkpoint,
    counts_env_steps=True,
)
"""ES: what checkpoints and the CLI use (`agents.spec("es")`)."""

__all__ = ["CODEC", "SPEC", "policy_from_checkpoint"]
