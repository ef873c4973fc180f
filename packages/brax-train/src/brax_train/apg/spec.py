"""APG as the runner's users see it: config, trainer and checkpoint codec (`brax_train.agents`)."""

from __future__ import annotations

from typing import Any

import jax

from brax_train import agents, checkpoint, running_statistics
from brax_train.apg import config, networks
from brax_train.apg.config import env_steps_per_update
from brax_train.apg.train import train


def _params_target(net: networks.APGNetworks,
                   normalizer: running_statistics.RunningStatisticsState) -> networks.APGParams:
    """Fresh parameters shaped as a checkpoint's (the restore target)."""
    return networks.APGParams(normalizer=normalizer, policy=net.policy_network.init(jax.random.PRNGKey(0)))


def _make_inference_fn(net: networks.APGNetworks, meta: dict[str, Any]) -> networks.MakePolicy:
    """`make_policy` of restored networks."""
    return networks.make_inference_fn(net)


CODEC = checkpoint.NetworksCodec(
    agent="apg", from_description=networks.networks_from_description, params_target=_params_target,
    make_inference_fn=_make_inference_fn,
)
"""How APG's networks and parameters come back from a checkpoint."""

policy_from_checkpoint = CODEC.policy_from_checkpoint

SPEC = agents.AgentSpec(
    name="apg", config_class=config.APGConfig, validate=config.validate,
    resolve=config.resolve,
    env_steps_per_update=env_steps_per_update, train=train,
    policy_from_checkpoint=policy_from_checkpoint,
)
"""APG: what checkpoints and the CLI use (`agents.spec("apg")`)."""

__all__ = ["CODEC", "SPEC", "policy_from_checkpoint"]
