"""BC as the runner's users see it: config, trainer and checkpoint codec (`brax_train.agents`)."""

from __future__ import annotations

from typing import Any

import jax

from brax_train import agents, checkpoint, running_statistics
from brax_train.bc import config, networks
from brax_train.bc.config import env_steps_per_update
from brax_train.bc.train import train


def _params_target(net: networks.BCNetworks,
                   normalizer: running_statistics.RunningStatisticsState) -> networks.BCParams:
    """Fresh parameters shaped as a checkpoint's (the restore target)."""
    return networks.BCParams(normalizer=normalizer, policy=net.policy_network.init(jax.random.PRNGKey(0)))


def _make_inference_fn(net: networks.BCNetworks, meta: dict[str, Any]) -> networks.MakePolicy:
    """`make_policy` of restored networks."""
    return networks.make_inference_fn(net, bool(meta.get("tanh_squash", True)))


CODEC = checkpoint.NetworksCodec(
    agent="bc", from_description=networks.networks_from_description, params_target=_params_target,
    make_inference_fn=_make_inference_fn,
)
"""How BC's networks and parameters come back from a checkpoint."""

policy_from_checkpoint = CODEC.policy_from_checkpoint

SPEC = agents.AgentSpec(
    name="bc", config_class=config.BCConfig, validate=config.validate,
    resolve=config.resolve,
    env_steps_per_update=env_steps_per_update, train=train,
    policy_from_checkpoint=policy_from_checkpoint,
)
"""BC: what checkpoints and the CLI use (`agents.spec("bc")`)."""

__all__ = ["CODEC", "SPEC", "policy_from_checkpoint"]
