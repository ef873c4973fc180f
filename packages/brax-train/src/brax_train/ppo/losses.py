"""PPO loss: clipped surrogate, value regression on GAE targets, entropy bonus."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from brax_train import running_statistics
from brax_train.ppo.networks import PPONetworks
from brax_train.types import PRNGKey, Transition


class NetworkParams(NamedTuple):
    """The optimized parameters: policy and value networks."""

    policy: Any
    """Policy network parameters."""
    value: Any
    """Value network parameters."""


def compute_gae(
    truncation: jax.Array,
    termination: jax.Array,
    rewards: jax.Array,
    values: jax.Array,
    bootstrap_value: jax.Array,
    lambda_: float,
    discount: float,
) -> tuple[jax.Array, jax.Array]:
    """Generalized advantage estimation over time-major [T, B] arrays.

    Steps that ended by truncation (time limit) carry no learning signal: their TD error and
    advantage are zero and the lambda-return recursion is cut there, so a truncated episode never
    bootstraps through the auto-reset into the next episode. Terminations cut the bootstrap.
    Returns `(value_targets, advantages)`, both without gradient.
    """
    keep = 1.0 - truncation
    not_term = 1.0 - termination
    next_values = jnp.concatenate([values[1:], bootstrap_value[None]], axis=0)
    deltas = (rewards + discount * not_term * next_values - values) * keep

    def backward(acc: jax.Array, xs: tuple[jax.Array, jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        delta, nt, k = xs
        acc = delta + discount * lambda_ * nt * k * acc
        return acc, acc

    _, vs_minus_v = jax.lax.scan(
        backward, jnp.zeros_like(bootstrap_value), (deltas, not_term, keep), reverse=True
    )
    vs = vs_minus_v + values
    next_vs = jnp.concatenate([vs[1:], bootstrap_value[None]], axis=0)
    advantages = (rewards + discount * not_term * next_vs - values) * keep
    return jax.lax.stop_gradient(vs), jax.lax.stop_gradient(advantages)


def _clipped_surrogate_loss(log_ratio: jax.Array, advantages: jax.Array, epsilon: float) -> jax.Array:
    """PPO's policy loss: minus the mean of the clipped surrogate objective."""
    ratio = jnp.exp(log_ratio)
    surrogate = jnp.minimum(ratio * advantages, jnp.clip(ratio, 1.0 - epsilon, 1.0 + epsilon) * advantages)
    return -jnp.mean(surrogate)


def _value_loss(
    vs: jax.Array,
    baseline: jax.Array,
    policy_extras: dict[str, jax.Array],
    clipping_epsilon_value: float | None,
    vf_loss_coefficient: float,
) -> jax.Array:
    """The value loss: squared error to the GAE targets, clipped around the rollout-time value when
    `clipping_epsilon_value` is given (`policy_extras['value']`)."""
    v_error = jnp.square(vs - baseline)
    if clipping_epsilon_value is not None:
        old = policy_extras["value"]
        clipped = old + jnp.clip(baseline - old, -clipping_epsilon_value, clipping_epsilon_value)
        v_error = jnp.maximum(v_error, jnp.square(vs - clipped))
    return 0.5 * vf_loss_coefficient * jnp.mean(v_error)


def compute_ppo_loss(
    params: NetworkParams,
    normalizer: running_statistics.RunningStatisticsState,
    data: Transition,
    key: PRNGKey,
    ppo_networks: PPONetworks,
    *,
    entropy_cost: float,
    discounting: float,
    reward_scaling: float,
    gae_lambda: float,
    clipping_epsilon: float,
    normalize_advantage: bool,
    vf_loss_coefficient: float,
    clipping_epsilon_value: float | None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """PPO loss and diagnostics for a minibatch `data` with leading axes [batch, time].

    Needs `extras['policy_extras']` `raw_action`, `log_prob`, `distribution_params` (and `value`
    with `clipping_epsilon_value`) and `extras['state_extras']['truncation']`.
    """
    dist = ppo_networks.parametric_action_distribution
    data = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), data)  # time major
    logits = ppo_networks.policy_network.apply(normalizer, params.policy, data.observation)
    baseline = ppo_networks.value_network.apply(normalizer, params.value, data.observation)
    last_obs = jax.tree.map(lambda x: x[-1], data.next_observation)
    bootstrap_value = ppo_networks.value_network.apply(normalizer, params.value, last_obs)

    rewards = data.reward * reward_scaling
    truncation = data.extras["state_extras"]["truncation"]
    termination = (1.0 - data.discount) * (1.0 - truncation)
    pe = data.extras["policy_extras"]
    target_log_prob = dist.log_prob(logits, pe["raw_action"])
    vs, advantages = compute_gae(
        truncation, termination, rewards, baseline, bootstrap_value, gae_lambda, discounting
    )
    if normalize_advantage:
        advantages = (advantages - jnp.mean(advantages)) / (jnp.std(advantages) + 1e-8)
    policy_loss = _clipped_surrogate_loss(target_log_prob - pe["log_prob"], advantages, clipping_epsilon)
    v_loss = _value_loss(vs, baseline, pe, clipping_epsilon_value, vf_loss_coefficient)
    entropy = jnp.mean(dist.entropy(logits, key))
    entropy_loss = -entropy_cost * entropy
    total = policy_loss + v_loss + entropy_loss

    new = dist.create_dist(logits)
    kl = jnp.mean(dist.kl_divergence(pe["distribution_params"], logits))
    metrics = {
        "total_loss": total,
        "policy_loss": policy_loss,
        "v_loss": v_loss,
        "entropy_loss": entropy_loss,
        "kl_mean": kl,
        "policy_dist_mean_std": jnp.mean(new.scale),
        "policy_dist_mean_loc": jnp.mean(new.loc),
    }
    return total, metrics


__all__ = ["NetworkParams", "compute_gae", "compute_ppo_loss"]
