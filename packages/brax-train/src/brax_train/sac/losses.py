"""The three SAC losses (Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and Applications").

Each is a pure function of the parameters it differentiates first, then the fixed inputs; all are
means over a batch of transitions `(B, ...)`. Actions are sampled by reparameterization from given
standard normal `noise` (B, action_size), so a training step draws all its noise at once.

Transitions carry `extras['state_extras']['truncation']` (1 where an episode hit its time limit):
there the critic bootstraps from `next_observation` (the observation before the auto-reset)
although `discount` is 0, because a time limit is not a terminal state of the task.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from brax_train.distribution import NormalTanhDistribution
from brax_train.sac.networks import SACNetworks
from brax_train.types import Transition


def bootstrap_mask(transitions: Transition) -> jax.Array:
    """(B,) 1 where the critic's target bootstraps: not terminal, or cut by the time limit."""
    truncation = transitions.extras.get("state_extras", {}).get("truncation")
    if truncation is None:
        return transitions.discount
    return jnp.where(truncation > 0, jnp.ones_like(transitions.discount), transitions.discount)


def sample_action(
    dist: NormalTanhDistribution, logits: jax.Array, noise: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """The squashed action `tanh(loc + scale * noise)` (B, A) and its log-density (B,)."""
    gaussian = dist.create_dist(logits)
    raw = gaussian.loc + gaussian.scale * noise
    return dist.postprocess(raw), dist.log_prob(logits, raw)


def critic_loss(
    q_params: Any,
    policy_params: Any,
    normalizer_params: Any,
    target_q_params: Any,
    alpha: jax.Array,
    transitions: Transition,
    noise: jax.Array,
    *,
    sac_networks: SACNetworks,
    reward_scaling: float,
    discounting: float,
) -> jax.Array:
    """Soft Bellman error `0.5 * mean over batch and critics of (Q(s, a) - y)^2`.

    `y = reward_scaling * r + discounting * m * (min_i Q_target_i(s', a') - alpha * log pi(a'|s'))`
    with `a' ~ pi(.|s')` (from `noise`) and `m` the `bootstrap_mask`; `y` carries no gradient.
    """
    q_net = sac_networks.q_network
    q = q_net.apply(normalizer_params, q_params, transitions.observation, transitions.action)
    next_logits = sac_networks.policy_network.apply(
        normalizer_params, policy_params, transitions.next_observation
    )
    next_action, next_log_prob = sample_action(
        sac_networks.parametric_action_distribution, next_logits, noise
    )
    next_q = q_net.apply(normalizer_params, target_q_params, transitions.next_observation, next_action)
    next_v = jnp.min(next_q, axis=-1) - alpha * next_log_prob
    target = transitions.reward * reward_scaling + bootstrap_mask(transitions) * discounting * next_v
    error = q - jnp.expand_dims(jax.lax.stop_gradient(target), -1)
    return 0.5 * jnp.mean(jnp.square(error))


def actor_loss(
    policy_params: Any,
    normalizer_params: Any,
    q_params: Any,
    alpha: jax.Array,
    transitions: Transition,
    noise: jax.Array,
    *,
    sac_networks: SACNetworks,
) -> tuple[jax.Array, jax.Array]:
    """Policy loss `mean(alpha * log pi(a|s) - min_i Q_i(s, a))` with reparameterized `a ~ pi(.|s)`.

    Returns `(loss, log_prob)`: the (B,) log-densities of the sampled actions feed `alpha_loss`.
    """
    logits = sac_networks.policy_network.apply(normalizer_params, policy_params, transitions.observation)
    action, log_prob = sample_action(sac_networks.parametric_action_distribution, logits, noise)
    q = sac_networks.q_network.apply(normalizer_params, q_params, transitions.observation, action)
    return jnp.mean(alpha * log_prob - jnp.min(q, axis=-1)), log_prob


def alpha_loss(log_alpha: jax.Array, log_prob: jax.Array, *, target_entropy: float) -> jax.Array:
    """Temperature loss `mean(alpha * (-log pi(a|s) - target_entropy))`; `log_prob` carries no gradient.

    Its gradient lowers the temperature while the policy's entropy exceeds `target_entropy`.
    """
    return jnp.mean(jnp.exp(log_alpha) * jax.lax.stop_gradient(-log_prob - target_entropy))


__all__ = ["actor_loss", "alpha_loss", "bootstrap_mask", "critic_loss", "sample_action"]
