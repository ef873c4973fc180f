"""Rebuilding a PPO policy from a checkpoint step alone (what `checkpoint.load` calls for PPO)."""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import jax

from brax_train import checkpoint, networks, running_statistics
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
    desc = meta.get("network", {})
    normalize = bool(meta.get("normalize_observations", desc.get("normalize_observations", False)))
    pre = running_statistics.normalize if normalize else networks.identity_observation_preprocessor
    if network_factory is not None:
        net = network_factory(
            networks.observation_size_from_json(meta["observation_shapes"]),
            int(meta["action_size"]),
            preprocess_observations_fn=pre,
        )
    else:
        try:
            net = ppo_networks.networks_from_description(desc)
        except (ValueError, ImportError, AttributeError, KeyError) as e:
            where = step_dir / "meta"
            raise checkpoint.CheckpointMismatchError(f"{where}: {e}; pass network_factory=") from e
    key_policy, key_value = jax.random.split(jax.random.PRNGKey(0))
    normalizer = running_statistics.init_state(
        networks.observation_shapes(meta["observation_shapes"]),
        std_eps=float(meta.get("normalize_observations_std_eps", 0.0)),
        mode=str(meta.get("normalize_observations_mode", "welford")),
    )
    target = ppo_networks.PPOParams(
        normalizer=normalizer,
        policy=net.policy_network.init(key_policy),
        value=net.value_network.init(key_value),
    )
    params = checkpoint.restore_item(step_dir, "params", target)
    return ppo_networks.make_inference_fn(net), params


__all__ = ["policy_from_checkpoint"]
