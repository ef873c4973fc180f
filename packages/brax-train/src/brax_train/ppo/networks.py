"""PPO networks: a tanh-squashed Gaussian policy and a value function, with their description.

`make_ppo_networks` follows Google Brax's keyword names. The returned `PPONetworks` carries a
JSON-able `description` (activation and initializers by importable name) that checkpoints store so
`brax_train.checkpoint.load_policy` can rebuild the networks without the training script.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, NamedTuple

import jax

from brax_train import networks, running_statistics
from brax_train.distribution import NormalTanhDistribution
from brax_train.types import Observation, Policy, PRNGKey

_RECIPE = networks.Recipe(
    callables=("activation", "policy_network_kernel_init_fn", "value_network_kernel_init_fn", "kernel_init"),
    sequences=("policy_hidden_layer_sizes", "value_hidden_layer_sizes"),
    mappings=("policy_network_kernel_init_kwargs", "value_network_kernel_init_kwargs"),
)


class PPOParams(NamedTuple):
    """Everything a PPO policy needs: observation statistics, policy and value parameters.

    A NamedTuple, so Brax-style indexing (`params[0]` normalizer, `params[1]` policy, `params[2]`
    value) keeps working.
    """

    normalizer: running_statistics.RunningStatisticsState
    """Observation running statistics (used only when observations are normalized)."""
    policy: Any
    """Policy network parameters (flax variables dict)."""
    value: Any
    """Value network parameters (flax variables dict)."""


@dataclasses.dataclass(frozen=True)
class PPONetworks(networks.Recorded):
    """Policy and value networks plus the action distribution (`description`: see `make_ppo_networks`)."""

    policy_network: networks.FeedForwardNetwork
    """Observations -> distribution parameters."""
    value_network: networks.FeedForwardNetwork
    """Observations -> state value (squeezed)."""
    parametric_action_distribution: NormalTanhDistribution
    """Maps policy outputs to actions, log-probabilities and entropies."""


@_RECIPE.record
def make_ppo_networks(
    observation_size: Any,
    action_size: int,
    preprocess_observations_fn: networks.PreprocessObservationFn = networks.identity_observation_preprocessor,
    policy_hidden_layer_sizes: Sequence[int] = (32,) * 4,
    value_hidden_layer_sizes: Sequence[int] = (256,) * 5,
    activation: networks.ActivationFn = jax.nn.swish,
    policy_obs_key: str = "state",
    value_obs_key: str = "state",
    distribution_type: Literal["tanh_normal"] = "tanh_normal",
    policy_network_kernel_init_fn: Callable[..., networks.Initializer] = jax.nn.initializers.lecun_uniform,
    policy_network_kernel_init_kwargs: Mapping[str, Any] | None = None,
    value_network_kernel_init_fn: Callable[..., networks.Initializer] = jax.nn.initializers.lecun_uniform,
    value_network_kernel_init_kwargs: Mapping[str, Any] | None = None,
    kernel_init: networks.Initializer | None = None,
    layer_norm: bool = False,
    min_std: float = 0.001,
) -> PPONetworks:
    """PPO policy (tanh-squashed Gaussian) and value MLPs.

    `observation_size` is an int, a shape, or a mapping of shapes for dict observations, in which
    case the policy reads `obs[policy_obs_key]` and the value function `obs[value_obs_key]`
    (asymmetric actor-critic). Kernels are initialized with
    `policy_network_kernel_init_fn(**policy_network_kernel_init_kwargs)` (likewise for the value
    network), or with the initializer `kernel_init` for both when given. `activation` may be any
    callable; named ones (`jax.nn.*`, `jax.numpy.*`, importable functions) are recorded in
    checkpoints.
    """
    if distribution_type != "tanh_normal":
        raise ValueError(f"distribution_type must be 'tanh_normal', got {distribution_type!r}")
    policy_init = kernel_init or policy_network_kernel_init_fn(**(policy_network_kernel_init_kwargs or {}))
    value_init = kernel_init or value_network_kernel_init_fn(**(value_network_kernel_init_kwargs or {}))
    dist = NormalTanhDistribution(event_size=action_size, min_std=min_std)
    # The two MLPs differ only in their sizes, initializer and observation key.
    mlp = functools.partial(
        networks.make_mlp_network, activation=activation, layer_norm=layer_norm,
        preprocess_observations_fn=preprocess_observations_fn,
    )
    policy_network = mlp(
        dist.param_size, observation_size, hidden_layer_sizes=policy_hidden_layer_sizes,
        kernel_init=policy_init, obs_key=policy_obs_key,
    )
    value_network = mlp(
        1, observation_size, hidden_layer_sizes=value_hidden_layer_sizes, kernel_init=value_init,
        obs_key=value_obs_key, squeeze_output=True,
    )
    return PPONetworks(policy_network, value_network, dist)


def networks_from_description(description: Mapping[str, Any]) -> PPONetworks:
    """Rebuild `PPONetworks` from a `PPONetworks.description` (as stored in checkpoints)."""
    return _RECIPE.rebuild(make_ppo_networks, description)


_EXPECTED = (
    "PPOParams(normalizer: running_statistics.RunningStatisticsState, policy: flax params, "
    "value: flax params), as returned by ppo.train or given to policy_params_fn"
)


def check_params(params: Any) -> PPOParams:
    """`params` if it is a `PPOParams`; otherwise a TypeError stating the expected structure."""
    if not isinstance(params, PPOParams):
        hint = ""
        if isinstance(params, tuple) and len(params) == 3:
            hint = "; for a Brax-style (normalizer, policy, value) tuple use PPOParams(*params)"
        raise TypeError(f"make_policy expects {_EXPECTED}; got {type(params).__name__}{hint}")
    if not isinstance(params.normalizer, running_statistics.RunningStatisticsState):
        raise TypeError(
            f"make_policy expects {_EXPECTED}; got normalizer of type {type(params.normalizer).__name__}"
        )
    return params


MakePolicy = Callable[..., Policy]
"""`make_policy(params: PPOParams, deterministic: bool = False) -> policy`."""


def make_inference_fn(ppo_networks: PPONetworks) -> MakePolicy:
    """`make_policy(params, deterministic=False)` building `policy(obs, key) -> (action, extras)`.

    Stochastic policies return extras `log_prob`, `raw_action` (pre-tanh) and
    `distribution_params`; deterministic ones return `tanh(loc)` and empty extras.
    """
    dist = ppo_networks.parametric_action_distribution
    policy_network = ppo_networks.policy_network

    def make_policy(params: PPOParams, deterministic: bool = False) -> Policy:
        p = check_params(params)

        def policy(obs: Observation, key: PRNGKey) -> tuple[jax.Array, dict[str, Any]]:
            logits = policy_network.apply(p.normalizer, p.policy, obs)
            if deterministic:
                return dist.mode(logits), {}
            raw = dist.sample_no_postprocessing(logits, key)
            extras = {
                "log_prob": dist.log_prob(logits, raw),
                "raw_action": raw,
                "distribution_params": logits,
            }
            return dist.postprocess(raw), extras

        return policy

    return make_policy


__all__ = [
    "MakePolicy",
    "PPONetworks",
    "PPOParams",
    "check_params",
    "make_inference_fn",
    "make_ppo_networks",
    "networks_from_description",
]
