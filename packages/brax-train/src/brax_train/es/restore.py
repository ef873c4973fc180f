"""Rebuilding an ES policy from a checkpoint step alone (what `checkpoint.load` calls for ES)."""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import jax

from brax_train import checkpoint
from brax_train.es import networks as es_networks


def policy_from_checkpoint(
    step_dir: pathlib.Path,
    meta: dict[str, Any],
    network_factory: Callable[..., es_networks.ESNetworks] | None = None,
) -> tuple[es_networks.MakePolicy, es_networks.ESParams]:
    """`(make_policy, params)` of an ES checkpoint step, the network rebuilt from `meta`.

    Give `network_factory` (called like the trainer calls it: `fn(observation_size, action_size,
    preprocess_observations_fn=)`) when the checkpoint notes that its network cannot be rebuilt.
    """
    net = checkpoint.rebuild_networks(
        step_dir, meta, network_factory, es_networks.networks_from_description, "es"
    )
    target = es_networks.ESParams(
        normalizer=checkpoint.normalizer_target(meta), policy=net.policy_network.init(jax.random.PRNGKey(0))
    )
    params = checkpoint.restore_item(step_dir, "params", target)
    return es_networks.make_inference_fn(net), params


__all__ = ["policy_from_checkpoint"]
