"""APG's policy network: a tanh-squashed Gaussian MLP whose samples are reparameterized.

`make_apg_networks` follows Google Brax's keyword names and defaults (ELU, layer norm, orthogonal
kernels of scale 0.01, a Gaussian whose scale is multiplied by 0.1). Sampling is `tanh(loc + scale *
noise)`, differentiable in the parameters, so rewards can be differentiated through the simulator
back into the policy. The returned `APGNetworks` carries a JSON-able `description` that checkpoints
store, so a policy can be rebuilt without the training script.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax

from brax_train import networks, running_statistics
from brax_train.distribution import NormalTanhDistribution
from brax_train.types import Observation, Policy, PRNGKey

_FACTORY_NAME = "brax_train.apg.networks.make_apg_networks"
_KERNEL_SCALE = 0.01  # Brax's orthogonal(0.01): near-zero initial actions, so early rollouts stay calm
_VAR_SCALE = 0.1  # Brax's exploration noise multiplier for APG


class APGParams(NamedTuple):
    """Everything an APG policy needs: observation statistics and policy parameters.

    A NamedTuple, so Brax-style indexing (`params[0]` normalizer, `params[1]` policy) keeps working.
    """

    normalizer: running_statistics.RunningStatisticsState
    """Observation running statistics (used only when observations are normalized)."""
    policy: Any
    """Policy network parameters (flax variables dict)."""


@dataclasses.dataclass(frozen=True)
class APGNetworks:
    """The policy network and its action distribution."""

    policy_network: networks.FeedForwardNetwork
    """Observations -> distribution parameters `[loc, raw_scale]`."""
    parametric_action_distribution: NormalTanhDistribution
    """Maps policy outputs to (reparameterized) actions."""
    description: dict[str, Any] = dataclasses.field(default_factory=dict)
    """JSON-able recipe to rebuild these networks (see `make_apg_networks`); empty when unknown."""


def make_apg_networks(
    observation_size: Any,
    action_size: int,
    preprocess_observations_fn: networks.PreprocessObservationFn = networks.identity_observation_preprocessor,
    hidden_layer_sizes: Sequence[int] = (32,) * 4,
    activation: networks.ActivationFn = jax.nn.elu,
    layer_norm: bool = True,
    policy_obs_key: str = "state",
) -> APGNetworks:
    """APG's policy MLP (Google Brax's `make_apg_networks` keywords and defaults).

    `observation_size` is an int, a shape, or a mapping of shapes (the policy reads
    `obs[policy_obs_key]`). `activation` may be any callable; named ones are recorded in checkpoints.
    """
    if isinstance(action_size, bool) or not isinstance(action_size, int) or action_size < 1:
        raise ValueError(f"action_size must be a positive int, got {action_size!r}")
    dist = NormalTanhDistribution(event_size=action_size, var_scale=_VAR_SCALE)
    policy_network = networks.make_mlp_network(
        dist.param_size,
        observation_size,
        hidden_layer_sizes=hidden_layer_sizes,
        activation=activation,
        kernel_init=jax.nn.initializers.orthogonal(_KERNEL_SCALE),
        obs_key=policy_obs_key,
        preprocess_observations_fn=preprocess_observations_fn,
        layer_norm=layer_norm,
    )
    notes: list[str] = []
    activation_name = networks.callable_name(activation)
    if activation_name is None:
        notes.append(f"activation={activation!r} has no importable name; pass network_factory=")
    normalize = preprocess_observations_fn is running_statistics.normalize
    if not normalize and preprocess_observations_fn is not networks.identity_observation_preprocessor:
        notes.append(
            f"preprocess_observations_fn={preprocess_observations_fn!r} is neither "
            "running_statistics.normalize nor the identity; pass network_factory="
        )
    description = {
        "factory": _FACTORY_NAME,
        "kwargs": {
            "observation_size": networks.observation_size_to_json(observation_size),
            "action_size": action_size,
            "hidden_layer_sizes": [int(s) for s in hidden_layer_sizes],
            "activation": activation_name,
            "layer_norm": bool(layer_norm),
            "policy_obs_key": policy_obs_key,
        },
        "normalize_observations": normalize,
        "recordable": not notes,
        "notes": notes,
    }
    return APGNetworks(policy_network, dist, description)


def networks_from_description(description: Mapping[str, Any]) -> APGNetworks:
    """Rebuild `APGNetworks` from an `APGNetworks.description` (as stored in checkpoints)."""
    if not description.get("recordable", False):
        notes = "; ".join(description.get("notes", [])) or "no network description was recorded"
        raise ValueError(f"the networks cannot be rebuilt from their description: {notes}")
    kw = dict(description["kwargs"])
    obs = kw["observation_size"]
    kw["observation_size"] = obs if isinstance(obs, int) else networks.observation_shapes(obs)
    kw["activation"] = networks.resolve_name(kw["activation"])
    kw["hidden_layer_sizes"] = tuple(kw["hidden_layer_sizes"])
    pre = (
        running_statistics.normalize
        if description.get("normalize_observations")
        else networks.identity_observation_preprocessor
    )
    return make_apg_networks(preprocess_observations_fn=pre, **kw)


def check_params(params: Any) -> APGParams:
    """`params` if it is an `APGParams` (a Brax-style pair is converted); otherwise a TypeError."""
    if isinstance(params, APGParams):
        return params
    pair = isinstance(params, tuple) and len(params) == 2
    if pair and isinstance(params[0], running_statistics.RunningStatisticsState):
        return APGParams(*params)
    raise TypeError(
        "make_policy expects APGParams(normalizer: running_statistics.RunningStatisticsState, "
        f"policy: flax params), as returned by apg.train; got {type(params).__name__}"
    )


MakePolicy = Callable[..., Policy]
"""`make_policy(params: APGParams, deterministic: bool = False) -> policy`."""


def make_inference_fn(apg_networks: APGNetworks) -> MakePolicy:
    """`make_policy(params, deterministic=False)` building `policy(obs, key) -> (action, extras)`.

    Stochastic policies return `tanh(loc + scale * noise)` (differentiable in the parameters),
    deterministic ones `tanh(loc)`; extras are empty (as Brax's APG).
    """
    dist = apg_networks.parametric_action_distribution
    policy_network = apg_networks.policy_network

    def make_policy(params: APGParams, deterministic: bool = False) -> Policy:
        p = check_params(params)

        def policy(obs: Observation, key: PRNGKey) -> tuple[jax.Array, dict[str, Any]]:
            logits = policy_network.apply(p.normalizer, p.policy, obs)
            if deterministic:
                return dist.mode(logits), {}
            return dist.sample(logits, key), {}

        return policy

    return make_policy


__all__ = [
    "APGNetworks",
    "APGParams",
    "MakePolicy",
    "check_params",
    "make_apg_networks",
    "make_inference_fn",
    "networks_from_description",
]
