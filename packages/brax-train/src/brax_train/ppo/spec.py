"""PPO as the runner's users see it: config, trainer and checkpoint codec (`brax_train.agents`)."""

from __future__ import annotations

from typing import Any

import jax

from brax_train import agents, checkpoint, running_statistics
from brax_train.ppo import config, networks
from brax_train.ppo.train import env_steps_per_update, train


def _params_target(net: networks.PPONetworks,
                   normalizer: running_statistics.RunningStatisticsState) -> networks.PPOParams:
    """Fresh parameters shaped as a checkpoint's (the restore target)."""
    key_policy, key_value = jax.random.split(jax.random.PRNGKey(0))
    return networks.PPOParams(normalizer=normalizer, policy=net.policy_network.init(key_policy),
                              value=net.value_network.init(key_value))


def _make_inference_fn(net: networks.PPONetworks, meta: dict[str, Any]) -> networks.MakePolicy:
    """`make_policy` of restored networks."""
    return networks.make_inference_fn(net)


CODEC = checkpoint.NetworksCodec(
    agent="ppo", from_description=networks.networks_from_description, params_target=_params_target,
    make_inference_fn=_make_inference_fn,
)
"""How PPO's networks and parameters come back from a checkpoint."""

policy_from_checkpoint = CODEC.policy_from_checkpoint

SPEC = agents.AgentSpec(
    name="ppo", config_class=config.PPOConfig, validate=config.validate,
    env_steps_per_update=env_steps_per_update, train=train,
    policy_from_checkpoint=policy_from_checkpoint,
)
"""PPO: what checkpoints and the CLI use (`agents.spec("ppo")`)."""

__all__ = ["CODEC", "SPEC", "policy_from_checkpoint"]
