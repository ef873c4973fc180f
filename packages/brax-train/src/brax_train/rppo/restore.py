"""Rebuilding a recurrent PPO policy from a checkpoint step alone (what `checkpoint.load` calls)."""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

from brax_train import checkpoint
from brax_train.ppo import networks as ppo_networks
from brax_train.ppo.restore import restore_policy
from brax_train.rppo import networks as rppo_networks


def policy_from_checkpoint(
    step_dir: pathlib.Path,
    meta: dict[str, Any],
    network_factory: Callable[..., rppo_networks.RPPONetworks] | None = None,
) -> tuple[ppo_networks.MakePolicy, ppo_networks.PPOParams]:
    """`(make_policy, params)` of an RPPO checkpoint step; the policy maps `[obs, hidden]` to
    `[action, next_hidden]` (see `MemoryWrapper`).

    Give `network_factory` (called like the trainer calls it: with the environment's own sizes,
    `preprocess_observations_fn=` and `hidden_size=`) when the checkpoint notes that its networks
    cannot be rebuilt.
    """
    hidden = int(meta.get("hidden_size", 0))
    factory = None
    if network_factory is not None:
        nf = network_factory

        def factory(obs: int, act: int, **kw: Any) -> rppo_networks.RPPONetworks:
            return nf(obs - hidden, act - hidden, hidden_size=hidden, **kw)

    net = checkpoint.rebuild_networks(
        step_dir, meta, factory, rppo_networks.networks_from_description, "rppo"
    )
    return restore_policy(step_dir, meta, net)

__all__ = ["policy_from_checkpoint"]
