"""ARS as the runner's users see it: config, trainer and checkpoint codec (`brax_train.agents`)."""

from __future__ import annotations

from typing import Any

import jax

from brax_train import agents, checkpoint, running_statistics
from brax_train.ars import config, networks
from brax_train.ars.config import env_steps_per_update
from brax_train.ars.train import train


def _params_target(net: networks.ARSNetwork,
                   normalizer: running_statistics.RunningStatisticsState) -> networks.ARSParams:
    """Fresh parameters shaped as a checkpoint's (the restore target)."""
    return networks.ARSParams(normalizer=normalizer, policy=net.init(jax.random.PRNGKey(0)))


def _make_inference_fn(net: networks.ARSNetwork, meta: dict[str, Any]) -> networks.MakePolicy:
    """`make_policy` of restored networks."""
    return networks.make_inference_fn(net)


CODEC = checkpoint.NetworksCodec(
    agent="ars", from_description=networks.network_from_description, params_target=_params_target,
    make_inference_fn=_make_inference_fn,
)
"""How ARS's networks and parameters come back from a checkpoint."""

policy_from_checkpoint = CODEC.policy_from_checkpoint

SPEC = agents.AgentSpec(
    name="ars", config_class=config.ARSConfig, validate=config.validate,
    env_steps_per_update=env_steps_per_update,
    counts_env_steps=config.COUNTS_ENV_STEPS, train=train,
    policy_from_checkpoint=policy_from_checkpoint,
)
"""ARS: what checkpoints and the CLI use (`agents.spec("ars")`)."""

__all__ = ["CODEC", "SPEC", "policy_from_checkpoint"]
