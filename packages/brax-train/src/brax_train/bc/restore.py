"""Rebuilding a BC student from a checkpoint step alone (what `checkpoint.load` calls for BC)."""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import jax

from brax_train import checkpoint
from brax_train.bc import networks as bc_networks


def policy_from_checkpoint(
    step_dir: pathlib.Path,
    meta: dict[str, Any],
    network_factory: Callable[..., bc_networks.BCNetworks] | None = None,
) -> tuple[bc_networks.MakePolicy, bc_networks.BCParams]:
    """`(make_policy, params)` of a BC checkpoint step, networks rebuilt from `meta`.

    Give `network_factory` (called like the trainer calls it: `fn(observation_size, action_size,
    preprocess_observations_fn=)`) when the checkpoint notes that its networks cannot be rebuilt.
    """
    net = checkpoint.rebuild_networks(
        step_dir, meta, network_factory, bc_networks.networks_from_description, "bc"
    )
    target = bc_networks.BCParams(
        normalizer=checkpoint.normalizer_target(meta), policy=net.policy_network.init(jax.random.PRNGKey(0))
    )
    params = checkpoint.restore_item(step_dir, "params", target)
    return bc_networks.make_inference_fn(net, bool(meta.get("tanh_squash", True))), params


__all__ = ["policy_from_checkpoint"]
