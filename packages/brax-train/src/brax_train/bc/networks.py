"""BC's student network: an MLP whose Gaussian mean, squashed by tanh, is the (deterministic) action.

`make_bc_networks` follows Google Brax's keyword names and defaults. The network outputs
`[loc, raw_scale]` like a PPO policy (so the layouts match), but only `loc` is trained: the student
acts deterministically. The returned `BCNetworks` carries a JSON-able `description` that checkpoints
store, so a policy can be rebuilt without the training script.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from brax_train import networks
from brax_train.distribution import NormalTanhDistribution
from brax_train.types import Observation, Policy, PRNGKey

_RECIPE = networks.Recipe(callables=("activation",), sequences=("policy_hidden_layer_sizes",))


class BCParams(networks.PolicyParams):
    """Everything a BC student needs: observation statistics and policy parameters."""


class BCNetworks(networks.TanhGaussianPolicyNetworks):
    """The student's policy network and its action distribution (`description`: see `make_bc_networks`)."""


@_RECIPE.record
def make_bc_networks(
    observation_size: Any,
    action_size: int,
    preprocess_observations_fn: networks.PreprocessObservationFn = networks.identity_observation_preprocessor,
    *,
    policy_hidden_layer_sizes: Sequence[int] = (32,) * 4,
    activation: networks.ActivationFn = jax.nn.swish,
    policy_obs_key: str = "state",
) -> BCNetworks:
    """The student MLP (Google Brax's `make_bc_networks` keywords and defaults; lecun-uniform kernels).

    `observation_size` is an int, a shape, or a mapping of shapes (the policy reads
    `obs[policy_obs_key]`). `activation` may be any callable; named ones are recorded in checkpoints.
    """
    dist = NormalTanhDistribution(event_size=action_size)
    policy_network = networks.make_mlp_network(
        dist.param_size, observation_size, hidden_layer_sizes=policy_hidden_layer_sizes,
        activation=activation, kernel_init=jax.nn.initializers.lecun_uniform(), obs_key=policy_obs_key,
        preprocess_observations_fn=preprocess_observations_fn,
    )
    return BCNetworks(policy_network, dist)


def networks_from_description(description: Mapping[str, Any]) -> BCNetworks:
    """Rebuild `BCNetworks` from a `BCNetworks.description` (as stored in checkpoints)."""
    return _RECIPE.rebuild(make_bc_networks, description)


def check_params(params: Any) -> BCParams:
    """`params` if it is a `BCParams` (a Brax-style pair is converted); otherwise a TypeError."""
    return networks.pair_params(params, BCParams, "bc")


MakePolicy = Callable[..., Policy]
"""`make_policy(params: BCParams, deterministic: bool = True) -> policy`."""


def make_inference_fn(bc_networks: BCNetworks, tanh_squash: bool = True) -> MakePolicy:
    """`make_policy(params, deterministic=True)` building `policy(obs, key) -> (action, extras)`.

    The student is deterministic (`deterministic` and `key` are accepted for the common interface):
    the action is `tanh(loc)` with `tanh_squash`, else `loc`. Extras hold `loc` and `scale` (as Brax),
    so a student can teach another student.
    """
    dist = bc_networks.parametric_action_distribution
    policy_network = bc_networks.policy_network

    def make_policy(params: BCParams, deterministic: bool = True) -> Policy:
        del deterministic
        p = check_params(params)

        def policy(obs: Observation, key: PRNGKey) -> tuple[jax.Array, dict[str, Any]]:
            del key
            d = dist.create_dist(policy_network.apply(p.normalizer, p.policy, obs))
            action = jnp.tanh(d.loc) if tanh_squash else d.loc
            return action, {"loc": d.loc, "scale": d.scale}

        return policy

    return make_policy


__all__ = [
    "BCNetworks",
    "BCParams",
    "MakePolicy",
    "check_params",
    "make_bc_networks",
    "make_inference_fn",
    "networks_from_description",
]
