"""Rebuilding a SAC policy from a checkpoint step alone (what `checkpoint.load` calls for SAC)."""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import jax

from brax_train import checkpoint
from brax_train.sac import networks as sac_networks


def policy_from_checkpoint(
    step_dir: pathlib.Path,
    meta: dict[str, Any],
    network_factory: Callable[..., sac_networks.SACNetworks] | None = None,
) -> tuple[sac_networks.MakePolicy, sac_networks.SACParams]:
    """`(make_policy, params)` of a SAC checkpoint step, networks rebuilt from `meta`.

    Give `network_factory` (called like the trainer calls it: `fn(observation_size, action_size,
    preprocess_observations_fn=)`) when the checkpoint notes that its networks cannot be rebuilt.
    """
    net = checkpoint.rebuild_networks(
        step_dir, meta, network_factory, sac_networks.networks_from_description, "sac"
    )
    target = sac_networks.SACParams(
        normalizer=checkpoint.normalizer_target(meta),
        policy=jax.jit(net.policy_network.init)(jax.random.PRNGKey(0)),
    )
    params = checkpoint.restore_item(step_dir, "params", target)
    return sac_networks.make_inference_fn(net), params


__all__ = ["policy_from_checkpoint"]
