"""The learner state of the agents that train one policy network with optax (APG, BC, ES)."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax

from brax_train import networks, running_statistics
from brax_train.types import PRNGKey


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class PolicyState:
    """Device-side learner state: policy parameters, observation statistics, optimizer state.

    Agents subclass it (their `TrainingState`, registered as a pytree again) to add their own fields.
    """

    params: Any
    """Policy parameters (flax variables dict)."""
    normalizer: running_statistics.RunningStatisticsState
    """Observation statistics."""
    optimizer_state: Any
    """optax state."""


def initial_fields(
    policy_network: networks.FeedForwardNetwork, observation_size: Any, optimizer: Any, key: PRNGKey
) -> tuple[Any, running_statistics.RunningStatisticsState, Any]:
    """`PolicyState`'s fields at the start: fresh parameters, empty statistics, `optimizer`'s state."""
    params = policy_network.init(key)
    normalizer = running_statistics.init_state(networks.observation_shapes(observation_size))
    return params, normalizer, optimizer.init(params)


def warm_fields(
    params: networks.PolicyParams, optimizer: Any
) -> tuple[Any, running_statistics.RunningStatisticsState, Any]:
    """`PolicyState`'s fields warm-started from `params`: its policy and statistics, fresh optimizer state."""
    return params.policy, params.normalizer, optimizer.init(params.policy)


__all__ = ["PolicyState", "initial_fields", "warm_fields"]
