"""Rebuilding an APG policy from a checkpoint step alone (what `checkpoint.load` calls for APG)."""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import jax

from brax_train import checkpoint, networks, running_statistics
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
    if meta.get("agent") != "apg":
        raise checkpoint.CheckpointMismatchError(
            f"{step_dir / 'meta'}: written by agent {meta.get('agent')!r}, not 'apg'"
        )
    desc = meta.get("network", {})
    if network_factory is not None:
        normalize = bool(meta.get("normalize_observations", False))
        pre = running_statistics.normalize if normalize else networks.identity_observation_preprocessor
        net = network_factory(
            networks.observation_size_from_json(meta["observation_shapes"]),
            int(meta["action_size"]),
            preprocess_observations_fn=pre,
        )
    else:
        try:
            net = apg_networks.networks_from_description(desc)
        except (ValueError, ImportError, AttributeError, KeyError, TypeError) as e:
            raise checkpoint.CheckpointMismatchError(
                f"{step_dir / 'meta'}: {e}; pass network_factory="
            ) from e
    target = apg_networks.APGParams(
        normalizer=running_statistics.init_state(networks.observation_shapes(meta["observation_shapes"])),
        policy=net.policy_network.init(jax.random.PRNGKey(0)),
    )
    params = checkpoint.restore_item(step_dir, "params", target)
    return apg_networks.make_inference_fn(net), params


__all__ = ["policy_from_checkpoint"]
