"""The ES policy: a deterministic MLP with a tanh output, and how to rebuild it from a checkpoint.

`make_es_networks` takes Google Brax's keywords (`hidden_layer_sizes`, `activation`). The policy is
deterministic: evolution strategies explore in parameter space, so actions carry no sampling noise
(`deterministic=` is accepted and changes nothing).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from brax_train import networks
from brax_train.types import Observation, Policy

_RECIPE = networks.Recipe(callables=("activation",), sequences=("hidden_layer_sizes",))


class ESParams(networks.PolicyParams):
    """An ES policy's parameters: observation statistics and the policy MLP's variables."""


@dataclasses.dataclass(frozen=True)
class ESNetworks(networks.Recorded):
    """The policy network and the JSON recipe to rebuild it (`description`: see `make_es_networks`)."""

    policy_network: networks.FeedForwardNetwork
    """Observations -> pre-tanh actions (action_size,)."""


@_RECIPE.record
def make_es_networks(
    observation_size: Any,
    action_size: int,
    preprocess_observations_fn: networks.PreprocessObservationFn = networks.identity_observation_preprocessor,
    hidden_layer_sizes: Sequence[int] = (32,) * 4,
    activation: networks.ActivationFn = jax.nn.relu,
) -> ESNetworks:
    """An MLP policy from (normalized) observations to `action_size` outputs (tanh applied by the policy).

    `activation` may be any callable; named ones (`jax.nn.*`, importable functions) are recorded in
    checkpoints so the policy can be rebuilt without the training script.
    """
    policy_network = networks.make_mlp_network(
        action_size, observation_size, hidden_layer_sizes=hidden_layer_sizes, activation=activation,
        kernel_init=jax.nn.initializers.lecun_uniform(),
        preprocess_observations_fn=preprocess_observations_fn,
    )
    return ESNetworks(policy_network=policy_network)


def networks_from_description(description: Mapping[str, Any]) -> ESNetworks:
    """Rebuild `ESNetworks` from an `ESNetworks.description` (as stored in checkpoints)."""
    return _RECIPE.rebuild(make_es_networks, description)


def actions(net: ESNetworks, normalizer: Any, policy_params: Any, obs: Observation) -> jax.Array:
    """Actions in [-1, 1]: `tanh` of the MLP's output for `obs` (..., obs_size) -> (..., action_size)."""
    return jnp.tanh(net.policy_network.apply(normalizer, policy_params, obs))


MakePolicy = Callable[..., Policy]
"""`make_policy(params: ESParams, deterministic: bool = False) -> policy`."""


def make_inference_fn(net: ESNetworks) -> MakePolicy:
    """`make_policy(params, deterministic=False)` building `policy(obs, key) -> (action, {})`."""
    return networks.deterministic_policy(
        functools.partial(actions, net), lambda p: networks.pair_params(p, ESParams, "es")
    )


__all__ = [
    "ESNetworks",
    "ESParams",
    "MakePolicy",
    "actions",
    "make_es_networks",
    "make_inference_fn",
    "networks_from_description",
]
