"""Rebuilding a SAC policy from a checkpoint step alone (what `checkpoint.load` calls for SAC)."""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Mapping
from typing import Any

import jax

from brax_train import checkpoint, networks, running_statistics
from brax_train.sac import networks as sac_networks


def policy_from_checkpoint(
    step_dir: pathlib.Path,
    meta: Mapping[str, Any],
    network_factory: Callable[..., sac_networks.SACNetworks] | None = None,
) -> tuple[sac_networks.MakePolicy, sac_networks.SACParams]:
    """`(make_policy, params)` of a SAC checkpoint step, networks rebuilt from `meta`.

    Give `network_factory` (called like the trainer calls it: `fn(observation_size, action_size,
    preprocess_observations_fn=)`) when the checkpoint notes that its networks cannot be rebuilt.
    """
    desc = meta.get("network", {})
    normalize = bool(meta.get("normalize_observations", desc.get("normalize_observations", False)))
    if network_factory is not None:
        pre = running_statistics.normalize if normalize else networks.identity_observation_preprocessor
        net = network_factory(
            networks.observation_size_from_json(meta["observation_shapes"]),
            int(meta["action_size"]),
            preprocess_observations_fn=pre,
        )
    else:
        try:
            net = sac_networks.networks_from_description(desc)
        except (ValueError, ImportError, AttributeError, KeyError) as e:
            where = step_dir / "meta"
            raise checkpoint.CheckpointMismatchError(f"{where}: {e}; pass network_factory=") from e
    target = sac_networks.SACParams(
        normalizer=running_statistics.init_state(networks.observation_shapes(meta["observation_shapes"])),
        policy=jax.jit(net.policy_network.init)(jax.random.PRNGKey(0)),
    )
    params = checkpoint.restore_item(step_dir, "params", target)
    return sac_networks.make_inference_fn(net), params


__all__ = ["policy_from_checkpoint"]
