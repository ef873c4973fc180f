"""Rebuilding a PPO policy from a checkpoint step alone (what `checkpoint.load` calls for PPO)."""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import jax

from brax_train import checkpoint
from brax_train.ppo import networks as ppo_networks


def policy_from_checkpoint(
    step_dir: pathlib.Path,
    meta: dict[str, Any],
    network_factory: Callable[..., ppo_networks.PPONetworks] | None = None,
) -> tuple[ppo_networks.MakePolicy, ppo_networks.PPOParams]:
    """`(make_policy, params)` of a PPO checkpoint step, networks rebuilt from `meta`.

    Give `network_factory` (called like the trainer calls it: `fn(observation_size, action_size,
    preprocess_observations_fn=)`) when the checkpoint notes that its networks cannot be rebuilt.
    """
    net = checkpoint.rebuild_networks(
        step_dir, meta, network_factory, ppo_networks.networks_from_description, "ppo"
    )
    return restore_policy(step_dir, meta, net)


def restore_policy(step_dir: pathlib.Path, meta: dict[str, Any],
                   net: ppo_networks.PPONetworks) -> tuple[ppo_networks.MakePolicy, ppo_networks.PPOParams]:
    """`(make_policy, params)` of a checkpoint step of a PPO-family agent whose networks are `net`."""
    key_policy, key_value = jax.random.split(jax.random.PRNGKey(0))
    target = ppo_networks.PPOParams(
        normalizer=checkpoint.normalizer_target(meta),
        policy=net.policy_network.init(key_policy),
        value=net.value_network.init(key_value),
    )
    params = checkpoint.restore_item(step_dir, "params", target)
    return ppo_networks.make_inference_fn(net), params


__all__ = ["policy_from_checkpoint"]
