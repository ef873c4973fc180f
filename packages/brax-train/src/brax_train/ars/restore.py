"""Rebuilding an ARS policy from a checkpoint step alone (what `checkpoint.load` calls for ARS)."""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import jax

from brax_train import checkpoint, networks
from brax_train.ars import networks as ars_networks


def policy_from_checkpoint(
    step_dir: pathlib.Path,
    meta: dict[str, Any],
    network_factory: Callable[..., networks.FeedForwardNetwork] | None = None,
) -> tuple[ars_networks.MakePolicy, ars_networks.ARSParams]:
    """`(make_policy, params)` of an ARS checkpoint step, the network rebuilt from `meta`.

    Give `network_factory` (called like the trainer calls it: `fn(observation_size, action_size,
    preprocess_observations_fn=)`) when the checkpoint notes that its network cannot be rebuilt.
    """
    net = checkpoint.rebuild_networks(
        step_dir, meta, network_factory, ars_networks.network_from_description, "ars"
    )
    target = ars_networks.ARSParams(
        normalizer=checkpoint.normalizer_target(meta), policy=net.init(jax.random.PRNGKey(0))
    )
    params = checkpoint.restore_item(step_dir, "params", target)
    return ars_networks.make_inference_fn(net), params


__all__ = ["policy_from_checkpoint"]
