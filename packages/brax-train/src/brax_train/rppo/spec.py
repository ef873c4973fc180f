"""RPPO as the runner's users see it (`brax_train.agents`): config, trainer, checkpoint codec.

Its checkpoints hold PPO's parameters for networks over `MemoryWrapper` observations: the restored
policy maps `[obs, hidden]` to `[action, next_hidden]`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from brax_train import checkpoint
from brax_train.ppo import networks as ppo_networks
from brax_train.rppo import config, memory, networks, train


def _adapt_factory(network_factory: Callable[..., networks.RPPONetworks],
                   meta: dict[str, Any]) -> Callable[..., networks.RPPONetworks]:
    """A factory called with the environment's own sizes and `hidden_size=`, as RPPO's trainer calls it."""
    hidden = int(meta.get("hidden_size", 0))

    def factory(obs: int, act: int, **kw: Any) -> networks.RPPONetworks:
        return network_factory(obs - hidden, act - hidden, hidden_size=hidden, **kw)

    return factory


CODEC = checkpoint.NetworksCodec(
    "rppo", networks.networks_from_description, ppo_networks.PPOParams, ppo_networks.make_inference_fn,
    adapt_factory=_adapt_factory,
)
"""How RPPO's networks and parameters come back from a checkpoint (PPO's parameters, its factory form)."""
SPEC = CODEC.spec(
    config.RPPOConfig, config.validate, train.train, train.env_steps_per_update, policy_env=memory.policy_env,
)
"""RPPO: what checkpoints and the CLI use (`agents.spec("rppo")`)."""
policy_from_checkpoint = SPEC.policy_from_checkpoint

__all__ = ["CODEC", "SPEC", "policy_from_checkpoint"]
