"""The ARS policy: linear in the (normalized) observation (Mania et al. 2018), as in Google Brax.

`make_policy_network(observation_size, action_size, preprocess_observations_fn)` is Brax's
factory: a zero-initialized (observation_size, action_size) matrix `M` with actions `obs @ M`. Our
policies clip the actions to [-1, 1], the action range of every brax-train policy.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from brax_train import networks, running_statistics
from brax_train.types import Observation, Policy, PRNGKey

_RECIPE = networks.Recipe()


class ARSParams(NamedTuple):
    """An ARS policy's parameters; Brax-style indexing (`params[0]` normalizer, `params[1]` matrix) works."""

    normalizer: running_statistics.RunningStatisticsState
    """Observation running statistics (used only when observations are normalized)."""
    policy: jax.Array
    """(observation_size, action_size) float32 policy matrix."""


@dataclasses.dataclass(frozen=True)
class ARSNetwork(networks.FeedForwardNetwork, networks.Recorded):
    """A `FeedForwardNetwork` (`init`, `apply`) with the recipe to rebuild it (see `make_policy_network`)."""


@_RECIPE.record
def make_policy_network(
    observation_size: Any,
    action_size: int,
    preprocess_observations_fn: networks.PreprocessObservationFn = networks.identity_observation_preprocessor,
) -> ARSNetwork:
    """The linear policy `apply(normalizer, M, obs) = preprocess(obs) @ M` with `M` starting at zero."""
    features = networks.observation_feature_size(observation_size, "state")

    def init(key: PRNGKey) -> jax.Array:
        del key  # the paper's and Brax's policy starts at zero
        return jnp.zeros((features, action_size), jnp.float32)

    def apply(normalizer_params: Any, policy_params: jax.Array, obs: jax.Array) -> jax.Array:
        x: jax.Array = preprocess_observations_fn(obs, normalizer_params)
        return jnp.matmul(x, policy_params)

    return ARSNetwork(init=init, apply=apply)


def network_from_description(description: Mapping[str, Any]) -> ARSNetwork:
    """Rebuild the `ARSNetwork` an `ARSNetwork.description` (as stored in checkpoints) records."""
    return _RECIPE.rebuild(make_policy_network, description)


def actions(
    net: networks.FeedForwardNetwork, normalizer: Any, matrix: jax.Array, obs: jax.Array
) -> jax.Array:
    """Actions `clip(preprocess(obs) @ matrix, -1, 1)` (..., action_size)."""
    return jnp.clip(net.apply(normalizer, matrix, obs), -1.0, 1.0)


MakePolicy = Callable[..., Policy]
"""`make_policy(params: ARSParams, deterministic: bool = False) -> policy`."""


def make_inference_fn(net: networks.FeedForwardNetwork) -> MakePolicy:
    """`make_policy(params, deterministic=False)` building `policy(obs, key) -> (action, {})`."""

    def act(normalizer: Any, matrix: jax.Array, obs: Observation) -> jax.Array:
        if isinstance(obs, Mapping):
            raise TypeError("the ARS policy takes array observations, got a dict")
        return actions(net, normalizer, matrix, obs)

    return networks.deterministic_policy(act, lambda p: networks.pair_params(p, ARSParams, "ars"))


__all__ = [
    "ARSNetwork",
    "ARSParams",
    "MakePolicy",
    "actions",
    "make_inference_fn",
    "make_policy_network",
    "network_from_description",
]
