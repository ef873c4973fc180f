"""SAC losses against a hand-computed example, and one gradient step's target update."""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax  # type: ignore[import-untyped]
from jax.sharding import Mesh

from brax_train import networks
from brax_train.distribution import NormalTanhDistribution
from brax_train.runner import AXIS
from brax_train.sac import losses
from brax_train.sac.config import SACConfig
from brax_train.sac.networks import QNetwork, SACNetworks
from brax_train.sac.train import _SAC
from brax_train.types import Transition

# A linear toy: loc = m * obs, raw scale = s; Q_1 = a * obs + action, Q_2 = b * obs - action.
POLICY = {"m": jnp.float32(0.7), "s": jnp.float32(-0.3)}
Q = {"a": jnp.float32(1.5), "b": jnp.float32(-0.5)}
TARGET_Q = {"a": jnp.float32(1.2), "b": jnp.float32(0.4)}


def _toy() -> SACNetworks:
    def policy_apply(normalizer: Any, p: Any, obs: jax.Array) -> jax.Array:
        del normalizer
        return jnp.concatenate([p["m"] * obs, jnp.broadcast_to(p["s"], obs.shape)], axis=-1)

    def q_apply(normalizer: Any, p: Any, obs: jax.Array, action: jax.Array) -> jax.Array:
        del normalizer
        return jnp.concatenate([p["a"] * obs + action, p["b"] * obs - action], axis=-1)

    return SACNetworks(
        policy_network=networks.FeedForwardNetwork(init=lambda key: POLICY, apply=policy_apply),
        q_network=QNetwork(init=lambda key: Q, apply=q_apply),
        parametric_action_distribution=NormalTanhDistribution(event_size=1),
    )


BATCH = Transition(
    observation=jnp.asarray([[0.5], [-1.0], [2.0], [0.1]], jnp.float32),
    action=jnp.asarray([[0.3], [-0.9], [0.0], [0.5]], jnp.float32),
    reward=jnp.asarray([1.0, -0.5, 2.0, 0.25], jnp.float32),
    discount=jnp.asarray([1.0, 0.0, 0.0, 1.0], jnp.float32),  # 2nd terminal, 3rd cut by the time limit
    next_observation=jnp.asarray([[0.6], [-1.2], [1.5], [0.0]], jnp.float32),
    extras={"state_extras": {"truncation": jnp.asarray([0.0, 0.0, 1.0, 0.0], jnp.float32)}},
)
NOISE = jnp.asarray([[0.3], [-1.1], [0.8], [2.0]], jnp.float32)  # standard normal draws, one per transition
NEXT_NOISE = jnp.asarray([[-0.4], [0.2], [1.3], [-2.2]], jnp.float32)


def _policy_sample(obs: np.ndarray, noise: jax.Array) -> tuple[np.ndarray, np.ndarray]:
    """By hand: squashed action and its log-density, `log N(u) - log(1 - tanh(u)^2)`."""
    m, s = float(POLICY["m"]), float(POLICY["s"])
    loc = m * obs
    scale = math.log1p(math.exp(s)) + 0.001
    u = loc + scale * np.asarray(noise, np.float64)[:, 0]
    log_n = -0.5 * ((u - loc) / scale) ** 2 - math.log(scale) - 0.5 * math.log(2 * math.pi)
    return np.tanh(u), log_n - np.log(1.0 - np.tanh(u) ** 2)


def test_critic_loss_by_hand_bootstraps_through_truncation_only() -> None:
    alpha, gamma, scaling = 0.2, 0.9, 3.0
    critic = functools.partial(
        losses.critic_loss, sac_networks=_toy(), reward_scaling=scaling, discounting=gamma
    )
    loss, g = jax.jit(jax.value_and_grad(critic, argnums=3))(  # gradient with respect to the target
        Q, POLICY, None, TARGET_Q, jnp.float32(alpha), BATCH, NEXT_NOISE
    )
    obs, act = np.asarray(BATCH.observation[:, 0], np.float64), np.asarray(BATCH.action[:, 0], np.float64)
    nobs = np.asarray(BATCH.next_observation[:, 0], np.float64)
    q = np.stack([1.5 * obs + act, -0.5 * obs - act], axis=-1)
    a_next, logp_next = _policy_sample(nobs, NEXT_NOISE)
    next_q = np.minimum(1.2 * nobs + a_next, 0.4 * nobs - a_next)
    mask = np.array([1.0, 0.0, 1.0, 1.0])  # terminal: no bootstrap; time limit: bootstrap
    y = np.asarray(BATCH.reward, np.float64) * scaling + gamma * mask * (next_q - alpha * logp_next)
    expected = 0.5 * np.mean((q - y[:, None]) ** 2)
    np.testing.assert_allclose(float(loss), expected, rtol=1e-5)
    np.testing.assert_array_equal(np.asarray(losses.bootstrap_mask(BATCH)), mask)
    assert all(float(v) == 0.0 for v in jax.tree.leaves(g))  # the target carries no gradient


def test_actor_and_alpha_losses_by_hand() -> None:
    alpha = 0.3
    obs = np.asarray(BATCH.observation[:, 0], np.float64)
    a, logp = _policy_sample(obs, NOISE)
    log_alpha, target_entropy = jnp.float32(math.log(alpha)), -1.0

    @jax.jit
    def actor_then_alpha(log_alpha: jax.Array) -> tuple[jax.Array, ...]:
        actor, log_prob = losses.actor_loss(
            POLICY, None, Q, jnp.exp(log_alpha), BATCH, NOISE, sac_networks=_toy()
        )
        temp, grad = jax.value_and_grad(losses.alpha_loss)(log_alpha, log_prob, target_entropy=target_entropy)
        return actor, log_prob, temp, grad

    actor, log_prob, temp, grad = actor_then_alpha(log_alpha)
    expected = np.mean(alpha * logp - np.minimum(1.5 * obs + a, -0.5 * obs - a))
    np.testing.assert_allclose(float(actor), expected, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(log_prob), logp, rtol=1e-5)

    np.testing.assert_allclose(float(temp), np.mean(alpha * (-logp - target_entropy)), rtol=1e-5)
    # d/d log_alpha of alpha * c is alpha * c: the temperature falls while the entropy exceeds the target
    np.testing.assert_allclose(float(grad), float(temp), rtol=1e-6)


def test_one_gradient_step_updates_all_parts_and_polyak_averages_the_target() -> None:
    tau, lr = 0.25, 1e-2
    c = SACConfig(tau=tau, discounting=0.9)
    mesh = Mesh(np.array(jax.devices()[:1]), (AXIS,))
    flat_adam, adam = optax.flatten(optax.adam(lr)), optax.adam(lr)  # as training builds them
    sac = _SAC(c, None, _toy(), flat_adam, flat_adam, adam, -1.0, 0, mesh, None, ())  # type: ignore[arg-type]
    s = sac.learner(POLICY, Q, TARGET_Q)  # log_alpha 0 and fresh optimizer states
    new, metrics = jax.jit(sac.sgd_step)(s, None, BATCH, jnp.stack([NEXT_NOISE, NOISE]))
    for name in ("a", "b"):
        expected = (1.0 - tau) * float(TARGET_Q[name]) + tau * float(new.q_params[name])
        np.testing.assert_allclose(float(new.target_q_params[name]), expected, rtol=1e-6)
    # Adam's first step moves every parameter by (almost exactly) the learning rate
    for before, after in ((POLICY, new.policy_params), (Q, new.q_params)):
        for name in before:
            np.testing.assert_allclose(abs(float(after[name]) - float(before[name])), lr, rtol=1e-3)
    np.testing.assert_allclose(abs(float(new.log_alpha)), lr, rtol=1e-3)
    assert float(metrics["alpha"]) == float(jnp.exp(new.log_alpha))
    assert not any(bool(metrics[k]) for k in ("bad_loss", "bad_grads", "bad_params"))
