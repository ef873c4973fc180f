"""The learner state of the agents that train one policy network with optax (APG, BC, ES)."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax

from brax_train import running_statistics


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


__all__ = ["PolicyState"]
