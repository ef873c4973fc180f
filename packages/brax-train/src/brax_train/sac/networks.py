"""SAC networks: a tanh-squashed Gaussian policy and twin Q functions, with their description.

`make_sac_networks` follows Google Brax's keyword names. The returned `SACNetworks` carries a
JSON-able `description` (activation and initializers by importable name) that checkpoints store, so
`policy_from_checkpoint` rebuilds the policy without the training script.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
from flax import linen

from brax_train import networks, running_statistics
from brax_train.distribution import NormalTanhDistribution
from brax_train.types import Policy, PRNGKey

_RECIPE = networks.Recipe(
    callables=("activation", "policy_network_kernel_init_fn", "q_network_kernel_init_fn"),
    sequences=("hidden_layer_sizes",),
    mappings=("policy_network_kernel_init_kwargs", "q_network_kernel_init_kwargs"),
    ignored=("noise_std_type", "init_noise_std", "state_dependent_std"),
)


class SACParams(NamedTuple):
    """Everything a SAC policy needs: observation statistics and policy parameters.

    A NamedTuple, so Brax-style indexing (`params[0]` normalizer, `params[1]` policy) keeps working.
    """

    normalizer: running_statistics.RunningStatisticsState
    """Observation running statistics (used only when observations are normalized)."""
    policy: Any
    """Policy network parameters (flax variables dict)."""


@dataclasses.dataclass(frozen=True)
class QNetwork:
    """Twin (or `n_critics`-fold) Q functions as a pair of pure functions."""

    init: Callable[[PRNGKey], Any]
    """`init(key) -> params`."""
    apply: Callable[..., jax.Array]
    """`apply(normalizer_params, params, obs, action) -> q` of shape (..., n_critics)."""


@dataclasses.dataclass(frozen=True)
class SACNetworks(networks.Recorded):
    """Policy and Q networks plus the action distribution (`description`: see `make_sac_networks`)."""

    policy_network: networks.FeedForwardNetwork
    """Observations -> distribution parameters (..., 2 * action_size)."""
    q_network: QNetwork
    """(observations, actions) -> Q values (..., n_critics)."""
    parametric_action_distribution: NormalTanhDistribution
    """Maps policy outputs to actions and log-probabilities."""


class _QModule(linen.Module):
    """`n_critics` independent MLPs on the concatenated observation and action, evaluated as one
    batched (vmapped) MLP: half the operations of separate networks for XLA to compile."""

    hidden_layer_sizes: Sequence[int]
    activation: networks.ActivationFn
    kernel_init: networks.Initializer
    layer_norm: bool
    n_critics: int

    @linen.compact
    def __call__(self, obs: jax.Array, action: jax.Array) -> jax.Array:
        x = jnp.concatenate([obs, action], axis=-1)
        critics = linen.vmap(
            networks.MLP,
            variable_axes={"params": 0},
            split_rngs={"params": True},
            in_axes=None,
            out_axes=-1,
            axis_size=self.n_critics,
        )
        q: jax.Array = critics(
            layer_sizes=[*self.hidden_layer_sizes, 1],
            activation=self.activation,
            kernel_init=self.kernel_init,
            layer_norm=self.layer_norm,
            name="critics",
        )(x)
        return q[..., 0, :]


def make_q_network(
    observation_size: Any,
    action_size: int,
    preprocess_observations_fn: networks.PreprocessObservationFn = networks.identity_observation_preprocessor,
    hidden_layer_sizes: Sequence[int] = (256, 256),
    activation: networks.ActivationFn = jax.nn.relu,
    n_critics: int = 2,
    layer_norm: bool = False,
    kernel_init: networks.Initializer | None = None,
    obs_key: str = "state",
) -> QNetwork:
    """`n_critics` Q MLPs reading `concat(preprocessed obs, action)`; output (..., n_critics).

    `kernel_init` defaults to `jax.nn.initializers.lecun_uniform()`.
    """
    module = _QModule(
        hidden_layer_sizes=tuple(hidden_layer_sizes),
        activation=activation,
        kernel_init=kernel_init if kernel_init is not None else jax.nn.initializers.lecun_uniform(),
        layer_norm=layer_norm,
        n_critics=n_critics,
    )
    feature_size = networks.observation_feature_size(observation_size, obs_key)

    def init(key: PRNGKey) -> Any:
        return module.init(
            key, jnp.zeros((1, feature_size), jnp.float32), jnp.zeros((1, action_size), jnp.float32)
        )

    def apply(normalizer_params: Any, params: Any, obs: Any, action: jax.Array) -> jax.Array:
        x = networks.select_observation(obs, normalizer_params, obs_key, preprocess_observations_fn)
        out = module.apply(params, x, action)
        assert isinstance(out, jax.Array)
        return out

    return QNetwork(init=init, apply=apply)


@_RECIPE.record
def make_sac_networks(
    observation_size: Any,
    action_size: int,
    preprocess_observations_fn: networks.PreprocessObservationFn = networks.identity_observation_preprocessor,
    hidden_layer_sizes: Sequence[int] = (256, 256),
    activation: networks.ActivationFn = jax.nn.relu,
    policy_network_layer_norm: bool = False,
    q_network_layer_norm: bool = False,
    distribution_type: Literal["tanh_normal"] = "tanh_normal",
    noise_std_type: Literal["scalar", "log"] = "scalar",
    init_noise_std: float = 1.0,
    state_dependent_std: bool = False,
    policy_network_kernel_init_fn: Callable[..., networks.Initializer] = jax.nn.initializers.lecun_uniform,
    policy_network_kernel_init_kwargs: Mapping[str, Any] | None = None,
    q_network_kernel_init_fn: Callable[..., networks.Initializer] = jax.nn.initializers.lecun_uniform,
    q_network_kernel_init_kwargs: Mapping[str, Any] | None = None,
    policy_obs_key: str = "state",
    q_obs_key: str = "state",
) -> SACNetworks:
    """SAC policy (tanh-squashed Gaussian, state-dependent scale) and twin Q MLPs.

    Keywords as Google Brax's `make_sac_networks`; `noise_std_type`, `init_noise_std` and
    `state_dependent_std` only concern Brax's plain `normal` distribution and are accepted for
    compatibility. `observation_size` may be a mapping of shapes (dict observations): the policy
    reads `obs[policy_obs_key]`, the Q networks `obs[q_obs_key]` (brax-train additions). Named
    activations and initializers are recorded in checkpoints.
    """
    del noise_std_type, init_noise_std, state_dependent_std
    if distribution_type != "tanh_normal":
        raise ValueError(f"distribution_type must be 'tanh_normal', got {distribution_type!r}")
    pkw = dict(policy_network_kernel_init_kwargs or {})
    qkw = dict(q_network_kernel_init_kwargs or {})
    dist = NormalTanhDistribution(event_size=action_size)
    policy_network = networks.make_mlp_network(
        dist.param_size, observation_size, hidden_layer_sizes=hidden_layer_sizes, activation=activation,
        kernel_init=policy_network_kernel_init_fn(**pkw), obs_key=policy_obs_key,
        preprocess_observations_fn=preprocess_observations_fn, layer_norm=policy_network_layer_norm,
    )
    q_network = make_q_network(
        observation_size, action_size, preprocess_observations_fn=preprocess_observations_fn,
        hidden_layer_sizes=hidden_layer_sizes, activation=activation, layer_norm=q_network_layer_norm,
        kernel_init=q_network_kernel_init_fn(**qkw), obs_key=q_obs_key,
    )
    return SACNetworks(policy_network, q_network, dist)


def networks_from_description(description: Mapping[str, Any]) -> SACNetworks:
    """Rebuild `SACNetworks` from a `SACNetworks.description` (as stored in checkpoints)."""
    return _RECIPE.rebuild(make_sac_networks, description)


def check_params(params: Any) -> SACParams:
    """`params` as `SACParams` (a Brax-style 2-tuple is accepted); otherwise a TypeError."""
    return networks.pair_params(params, SACParams, "sac")


MakePolicy = Callable[..., Policy]
"""`make_policy(params: SACParams, deterministic: bool = False) -> policy`."""


def make_inference_fn(sac_networks: SACNetworks) -> MakePolicy:
    """`make_policy(params, deterministic=False)` building `policy(obs, key) -> (action, {})`.

    Stochastic policies return `tanh(u)` with `u` drawn from the Gaussian; deterministic ones
    `tanh(loc)`. Actions lie in [-1, 1].
    """
    return networks.tanh_gaussian_policy(
        sac_networks.parametric_action_distribution, sac_networks.policy_network, check_params
    )


__all__ = [
    "MakePolicy",
    "QNetwork",
    "SACNetworks",
    "SACParams",
    "check_params",
    "make_inference_fn",
    "make_q_network",
    "make_sac_networks",
    "networks_from_description",
]
