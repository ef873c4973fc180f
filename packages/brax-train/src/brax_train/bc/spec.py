"""BC as the runner's users see it (`brax_train.agents`): config, trainer, checkpoint codec."""

from __future__ import annotations

from typing import Any

from brax_train import checkpoint
from brax_train.bc import config, networks, train


def _inference_options(meta: dict[str, Any]) -> dict[str, Any]:
    """BC's squashing, as its checkpoint records it."""
    return {"tanh_squash": bool(meta.get("tanh_squash", True))}


CODEC = checkpoint.NetworksCodec(
    "bc", networks.networks_from_description, networks.BCParams, networks.make_inference_fn,
    inference_options=_inference_options,
)
"""How BC's networks and parameters come back from a checkpoint."""
SPEC = CODEC.spec(
    config.BCConfig, config.validate, train.train, config.env_steps_per_update, resolve=config.resolve,
)
"""BC: what checkpoints and the CLI use (`agents.spec("bc")`)."""
policy_from_checkpoint = SPEC.policy_from_checkpoint

__all__ = ["CODEC", "SPEC", "policy_from_checkpoint"]
