"""Rebuilding an APG policy from a checkpoint step alone (what `checkpoint.load` calls for APG)."""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import jax

from brax_train import checkpoint
from brax_train.apg import networks as apg_networks


def policy_from_checkpoint(
    step_dir: pathlib.Path,
    meta: dict[str, Any],
    network_factory: Callable[..., apg_networks.APGNetworks] | None = None,
) -> tuple[apg_networks.MakePolicy, apg_networks.APGParams]:
    """`(make_policy, params)` of an APG checkpoint step, networks rebuilt from `meta`.

    Give `network_factory` (called like the trainer calls it: `fn(observation_size, action_size,
    preprocess_observations_fn=)`) when the checkpoint notes that its networks cannot be rebuilt.
    """
    net = checkpoint.rebuild_networks(
        step_dir, meta, network_factory, apg_networks.networks_from_description, "apg"
    )
    target = apg_networks.APGParams(
        normalizer=checkpoint.normalizer_target(meta), policy=net.policy_network.init(jax.random.PRNGKey(0))
    )
    params = checkpoint.restore_item(step_dir, "params", target)
    return apg_networks.make_inference_fn(net), params


__all__ = ["policy_from_checkpoint"]
