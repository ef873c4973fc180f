"""Tests of the tanh-squashed Gaussian."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from brax_train.distribution import NormalTanhDistribution


def test_log_prob_is_the_density_of_the_squashed_action() -> None:
    dist = NormalTanhDistribution(event_size=1)
    params = jnp.array([0.3, -0.2], jnp.float32)
    # Integrate the density of a = tanh(u) over (-1, 1) numerically: it must be 1.
    a = jnp.linspace(-0.999, 0.999, 20001, dtype=jnp.float32)
    logp = jax.vmap(lambda x: dist.log_prob(params, jnp.arctanh(x)[None]))(a)
    total = float(jnp.sum(jnp.exp(logp)) * (a[1] - a[0]))
    assert abs(total - 1.0) < 2e-3


def test_entropy_estimate_and_mode() -> None:
    dist = NormalTanhDistribution(event_size=2)
    params = jnp.array([[0.1, -0.5, 0.0, 1.0]], jnp.float32)
    keys = jax.random.split(jax.random.PRNGKey(0), 4000)
    est = jnp.mean(jax.vmap(lambda k: dist.entropy(params, k))(keys))
    raws = jax.vmap(lambda k: dist.sample_no_postprocessing(params, k))(keys)
    mc = -jnp.mean(jax.vmap(lambda r: dist.log_prob(params, r))(raws))
    np.testing.assert_allclose(float(est), float(mc), atol=0.05)
    np.testing.assert_allclose(np.asarray(dist.mode(params)), np.tanh([[0.1, -0.5]]), rtol=1e-6)
    scale = dist.create_dist(params).scale
    np.testing.assert_allclose(np.asarray(scale), np.log1p(np.exp([[0.0, 1.0]])) + 0.001, rtol=1e-6)


def test_kl_is_zero_for_equal_and_positive_otherwise() -> None:
    dist = NormalTanhDistribution(event_size=3)
    p = jax.random.normal(jax.random.PRNGKey(1), (5, 6))
    np.testing.assert_allclose(np.asarray(dist.kl_divergence(p, p)), 0.0, atol=1e-6)
    assert bool(jnp.all(dist.kl_divergence(p, p + 0.1) > 0))
