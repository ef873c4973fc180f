"""APG's policy network: a tanh-squashed Gaussian MLP whose samples are reparameterized.

`make_apg_networks` follows Google Brax's keyword names and defaults (ELU, layer norm, orthogonal
kernels of scale 0.01, a Gaussian whose scale is multiplied by 0.1). Sampling is `tanh(loc + scale *
noise)`, differentiable in the parameters, so rewards can be differentiated through the simulator
back into the policy. The returned `APGNetworks` carries a JSON-able `description` that checkpoints
store, so a policy can be rebuilt without the training script.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax

from brax_train import networks
from brax_train.distribution import NormalTanhDistribution
from brax_train.types import Policy

_RECIPE = networks.Recipe(callables=("activation",), sequences=("hidden_layer_sizes",))
_KERNEL_SCALE = 0.01  # Brax's orthogonal(0.01): near-zero initial actions, so early rollouts stay calm
_VAR_SCALE = 0.1  # Brax's exploration noise multiplier for APG


class APGParams(networks.PolicyParams):
    """Everything an APG policy needs: observation statistics and policy parameters."""


class APGNetworks(networks.TanhGaussianPolicyNetworks):
    """The policy network and its action distribution (`description`: see `make_apg_networks`)."""


@_RECIPE.record
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
    dist = NormalTanhDistribution(event_size=action_size, var_scale=_VAR_SCALE)
    policy_network = networks.make_mlp_network(
        dist.param_size, observation_size, hidden_layer_sizes=hidden_layer_sizes, activation=activation,
        kernel_init=jax.nn.initializers.orthogonal(_KERNEL_SCALE), obs_key=policy_obs_key,
        preprocess_observations_fn=preprocess_observations_fn, layer_norm=layer_norm,
    )
    return APGNetworks(policy_network, dist)


def networks_from_description(description: Mapping[str, Any]) -> APGNetworks:
    """Rebuild `APGNetworks` from an `APGNetworks.description` (as stored in checkpoints)."""
    return _RECIPE.rebuild(make_apg_networks, description)


def check_params(params: Any) -> APGParams:
    """`params` if it is an `APGParams` (a Brax-style pair is converted); otherwise a TypeError."""
    return networks.pair_params(params, APGParams, "apg")


MakePolicy = Callable[..., Policy]
"""`make_policy(params: APGParams, deterministic: bool = False) -> policy`."""


def make_inference_fn(apg_networks: APGNetworks) -> MakePolicy:
    """`make_policy(params, deterministic=False)` building `policy(obs, key) -> (action, extras)`.

    Stochastic policies return `tanh(loc + scale * noise)` (differentiable in the parameters),
    deterministic ones `tanh(loc)`; extras are empty (as Brax's APG).
    """
    return networks.tanh_gaussian_policy(
        apg_networks.parametric_action_distribution, apg_networks.policy_network, check_params
    )


__all__ = [
    "APGNetworks",
    "APGParams",
    "MakePolicy",
    "check_params",
    "make_apg_networks",
    "make_inference_fn",
    "networks_from_description",
]
