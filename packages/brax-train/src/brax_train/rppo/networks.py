"""Recurrent PPO networks: a GRU policy and a value MLP that reads the policy's hidden state.

Both read observations laid out by `MemoryWrapper`, `[obs, hidden]`. One policy step is
`hidden' = GRU(hidden, obs)`, `params = MLP([hidden', obs])`, and the policy network outputs
`[distribution params, hidden']`; `MemoryTanhDistribution` passes `hidden'` through as the action's
tail. The value MLP reads `[obs, stop_gradient(hidden)]`. So the networks are `PPONetworks` that
PPO's acting, loss and export code use unchanged; `replay` adds the recurrence over an unroll.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from flax import linen

from brax_train import networks
from brax_train.distribution import Normal, NormalTanhDistribution
from brax_train.ppo import networks as ppo_networks
from brax_train.types import PRNGKey

_RECIPE = networks.Recipe(
    callables=("activation", "policy_network_kernel_init_fn", "value_network_kernel_init_fn"),
    sequences=("policy_hidden_layer_sizes", "value_hidden_layer_sizes"),
)


@dataclasses.dataclass(frozen=True)
class MemoryTanhDistribution(NormalTanhDistribution):
    """A tanh-normal over the first `event_size` outputs; the last `memory_size` pass through as they are.

    Parameters are `[loc, raw_scale, memory]`; raw and final actions are `[action, memory]`.
    Densities, entropies and KL divergences are those of the action part alone.
    """

    memory_size: int = 0
    """Size of the deterministic tail (the policy's next hidden state)."""

    @property
    def param_size(self) -> int:
        """Gaussian parameters per action dimension plus the memory."""
        return 2 * self.event_size + self.memory_size

    def create_dist(self, parameters: jax.Array) -> Normal:
        """The pre-tanh Gaussian of the action part."""
        return super().create_dist(parameters[..., : 2 * self.event_size])

    def _memory(self, parameters: jax.Array) -> jax.Array:
        return parameters[..., 2 * self.event_size :]

    def sample_no_postprocessing(self, parameters: jax.Array, key: jax.Array) -> jax.Array:
        """`[pre-tanh action sample, memory]`."""
        raw = super().sample_no_postprocessing(parameters, key)
        return jnp.concatenate([raw, self._memory(parameters)], axis=-1)

    def postprocess(self, raw_action: jax.Array) -> jax.Array:
        """`[tanh(action), memory]`."""
        a = raw_action[..., : self.event_size]
        return jnp.concatenate([jnp.tanh(a), raw_action[..., self.event_size :]], axis=-1)

    def mode(self, parameters: jax.Array) -> jax.Array:
        """`[tanh(loc), memory]`."""
        return jnp.concatenate([super().mode(parameters), self._memory(parameters)], axis=-1)

    def log_prob(self, parameters: jax.Array, raw_action: jax.Array) -> jax.Array:
        """Log-density of the squashed action part."""
        return super().log_prob(parameters, raw_action[..., : self.event_size])


class RecurrentPolicy(linen.Module):
    """A GRU cell then an MLP head over `[hidden', obs]`; outputs `[head, hidden']`."""

    hidden_size: int
    """GRU state size."""
    layer_sizes: Sequence[int]
    """Head layer widths, the last one its output size."""
    activation: networks.ActivationFn
    """Head activation."""
    kernel_init: networks.Initializer
    """Kernel initializer of the GRU's input kernels and the head."""
    layer_norm: bool = False
    """LayerNorm after the head's hidden activations."""

    def setup(self) -> None:
        """The GRU cell and the head."""
        self.cell = linen.GRUCell(features=self.hidden_size, kernel_init=self.kernel_init)
        self.head = networks.MLP(
            layer_sizes=self.layer_sizes,
            activation=self.activation,
            kernel_init=self.kernel_init,
            layer_norm=self.layer_norm,
        )

    def memory(self, x: jax.Array, h: jax.Array) -> jax.Array:
        """The next hidden state after observing `x` (..., obs) in state `h` (..., hidden)."""
        new_h: jax.Array = self.cell(h, x)[0]
        return new_h

    def __call__(self, x: jax.Array, h: jax.Array) -> jax.Array:
        """`[head([hidden', x]), hidden']`."""
        new_h = self.memory(x, h)
        out: jax.Array = self.head(jnp.concatenate([new_h, x], axis=-1))
        return jnp.concatenate([out, new_h], axis=-1)


Replay = Callable[[Any, Any, jax.Array, jax.Array], jax.Array]
"""`replay(normalizer, policy_params, obs (B, T, obs + hidden), discount (B, T)) -> hidden (B, T, hidden)`."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class RPPONetworks(ppo_networks.PPONetworks):
    """`PPONetworks` over `MemoryWrapper` observations, plus the recurrence over an unroll."""

    hidden_size: int
    """GRU state size (the memory the environment carries)."""
    observation_size: int
    """The environment's own observation size (without the hidden state)."""
    replay: Replay
    """The hidden state each step of an unroll starts from, recomputed from the state stored at its
    first step with these parameters (differentiable: truncated backpropagation through time); zero
    after every step whose `discount` is 0 (an episode end)."""


Split = Callable[[jax.Array, Any], tuple[jax.Array, jax.Array]]
"""`split(obs, normalizer) -> (preprocessed env observation, hidden state)` of a `MemoryWrapper` obs."""


def _policy_network(policy: RecurrentPolicy, split: Split, n: int, hs: int) -> networks.FeedForwardNetwork:
    """The policy over `[obs, hidden]` observations: `[distribution params, hidden']`."""

    def policy_init(key: PRNGKey) -> Any:
        return policy.init(key, jnp.zeros((1, n), jnp.float32), jnp.zeros((1, hs), jnp.float32))

    def policy_apply(normalizer: Any, params: Any, obs: jax.Array) -> jax.Array:
        x, h = split(obs, normalizer)
        out = policy.apply(params, x, h)
        assert isinstance(out, jax.Array)
        return out

    return networks.FeedForwardNetwork(init=policy_init, apply=policy_apply)


def _value_network(value: networks.MLP, split: Split, n: int, hs: int) -> networks.FeedForwardNetwork:
    """The value MLP over `[obs, stop_gradient(hidden)]` (squeezed)."""

    def value_init(key: PRNGKey) -> Any:
        return value.init(key, jnp.zeros((1, n + hs), jnp.float32))

    def value_apply(normalizer: Any, params: Any, obs: jax.Array) -> jax.Array:
        x, h = split(obs, normalizer)
        out = value.apply(params, jnp.concatenate([x, jax.lax.stop_gradient(h)], axis=-1))
        assert isinstance(out, jax.Array)
        return jnp.squeeze(out, axis=-1)

    return networks.FeedForwardNetwork(init=value_init, apply=value_apply)


def _replay(policy: RecurrentPolicy, split: Split) -> Replay:
    """`RPPONetworks.replay` of `policy`."""

    def replay(normalizer: Any, params: Any, obs: jax.Array, discount: jax.Array) -> jax.Array:
        x, h = split(obs, normalizer)
        x_t, keep_t = jnp.swapaxes(x, 0, 1), jnp.swapaxes(discount, 0, 1)[..., None]

        def step(carry: jax.Array, xs: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
            xi, keep = xs
            nxt = policy.apply(params, xi, carry, method=RecurrentPolicy.memory)
            assert isinstance(nxt, jax.Array)
            return jnp.where(keep > 0, nxt, jnp.zeros_like(nxt)), carry

        _, hs_t = jax.lax.scan(step, h[:, 0], (x_t, keep_t))
        return jnp.swapaxes(hs_t, 0, 1)

    return replay


@_RECIPE.record
def make_rppo_networks(
    observation_size: int,
    action_size: int,
    preprocess_observations_fn: networks.PreprocessObservationFn = networks.identity_observation_preprocessor,
    hidden_size: int = 32,
    policy_hidden_layer_sizes: Sequence[int] = (32, 32),
    value_hidden_layer_sizes: Sequence[int] = (64, 64),
    activation: networks.ActivationFn = jax.nn.swish,
    policy_network_kernel_init_fn: Callable[..., networks.Initializer] = jax.nn.initializers.lecun_uniform,
    value_network_kernel_init_fn: Callable[..., networks.Initializer] = jax.nn.initializers.lecun_uniform,
    layer_norm: bool = False,
    min_std: float = 0.001,
) -> RPPONetworks:
    """GRU policy and value networks for an environment of `observation_size` and `action_size`.

    The sizes are the environment's own; the networks read `MemoryWrapper(env, hidden_size)`
    observations and the policy writes its actions. Observation statistics cover the whole wrapped
    observation; the networks normalize only its environment part.
    """
    for name, v in (("observation_size", observation_size), ("hidden_size", hidden_size)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    n, hs = observation_size, hidden_size
    dist = MemoryTanhDistribution(event_size=action_size, min_std=min_std, memory_size=hs)
    policy = RecurrentPolicy(
        hidden_size=hs,
        layer_sizes=[*policy_hidden_layer_sizes, 2 * action_size],
        activation=activation,
        kernel_init=policy_network_kernel_init_fn(),
        layer_norm=layer_norm,
    )
    value = networks.MLP(
        layer_sizes=[*value_hidden_layer_sizes, 1],
        activation=activation,
        kernel_init=value_network_kernel_init_fn(),
        layer_norm=layer_norm,
    )

    def split(obs: jax.Array, normalizer: Any) -> tuple[jax.Array, jax.Array]:
        x = preprocess_observations_fn(obs, normalizer)[..., :n]  # statistics are per dimension
        return x, obs[..., n:]

    return RPPONetworks(
        policy_network=_policy_network(policy, split, n, hs),
        value_network=_value_network(value, split, n, hs),
        parametric_action_distribution=dist,
        hidden_size=hs,
        observation_size=n,
        replay=_replay(policy, split),
    )


def networks_from_description(description: Mapping[str, Any]) -> RPPONetworks:
    """Rebuild `RPPONetworks` from their `description` (as stored in checkpoints)."""
    return _RECIPE.rebuild(make_rppo_networks, description)


__all__ = [
    "MemoryTanhDistribution",
    "RPPONetworks",
    "RecurrentPolicy",
    "Replay",
    "make_rppo_networks",
    "networks_from_description",
]
