"""Fitness shaping against hand-computed values, and the ES search gradient on a quadratic."""

from __future__ import annotations

import enum
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from brax_train import _population
from brax_train.es import fitness
from brax_train.es.fitness import FitnessShaping

RETURNS = jnp.asarray([3.0, 1.0, 2.0, 10.0], jnp.float32)  # ranks 2, 0, 1, 3


def test_original_is_the_returns() -> None:
    w = fitness.shape_fitness(RETURNS, FitnessShaping.ORIGINAL)
    np.testing.assert_array_equal(np.asarray(w), [3.0, 1.0, 2.0, 10.0])


def test_centered_rank_hand_values() -> None:
    w = fitness.shape_fitness(RETURNS, FitnessShaping.CENTERED_RANK)
    # rank / (n - 1) - 0.5 with ranks 2, 0, 1, 3 and n = 4
    np.testing.assert_allclose(np.asarray(w), [1 / 6, -1 / 2, -1 / 6, 1 / 2], rtol=1e-6)


def test_wierstra_hand_values() -> None:
    w = fitness.shape_fitness(RETURNS, FitnessShaping.WIERSTRA)
    # k (1 = best) = 2, 4, 3, 1; u = max(0, log(3) - log(k)) = log 1.5, 0, 0, log 3; u / sum(u) - 1/4
    u = np.asarray([math.log(1.5), 0.0, 0.0, math.log(3.0)])
    np.testing.assert_allclose(np.asarray(w), u / u.sum() - 0.25, rtol=1e-5)
    assert float(jnp.sum(w)) == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("shaping", list(FitnessShaping))
def test_center_fitness_standardizes(shaping: FitnessShaping) -> None:
    raw = np.asarray(fitness.shape_fitness(RETURNS, shaping))
    w = np.asarray(fitness.shape_fitness(RETURNS, shaping, center=True))
    np.testing.assert_allclose(w, (raw - raw.mean()) / (1e-6 + raw.std()), rtol=1e-5, atol=1e-6)


def test_fitness_shaping_accepts_names_and_foreign_enums() -> None:
    class BraxStyle(enum.Enum):  # Google Brax's members carry functions as values
        WIERSTRA = 1

    assert fitness.fitness_shaping_of("centered_rank") is FitnessShaping.CENTERED_RANK
    assert json.dumps({"fitness_shaping": FitnessShaping.WIERSTRA}) == '{"fitness_shaping": "WIERSTRA"}'
    assert fitness.fitness_shaping_of(BraxStyle.WIERSTRA) is FitnessShaping.WIERSTRA
    with pytest.raises(ValueError, match="ORIGINAL, CENTERED_RANK, WIERSTRA, got 'BEST'"):
        fitness.fitness_shaping_of("BEST")


def test_pair_weights() -> None:
    w = fitness.pair_weights(jnp.asarray([1.0, 2.0, 5.0, 0.5]))
    np.testing.assert_array_equal(np.asarray(w), [-4.0, 1.5])


def test_search_gradient_on_a_quadratic_matches_the_true_gradient() -> None:
    """On F(theta) = -|A theta - b|^2, antithetic differences are exactly 2 sigma eps . grad F, so the
    estimate is (1/n) sum eps eps^T grad F: the true gradient up to sampling error ~ sqrt(d / n)."""
    n, sigma = 20_000, 0.3
    theta = {"a": jnp.asarray([0.5, -1.0, 2.0]), "b": jnp.asarray([[0.3, 0.1]])}
    mat = jnp.asarray(np.random.default_rng(0).normal(size=(5, 5)), jnp.float32)
    target = jnp.arange(5, dtype=jnp.float32)

    def flat(p: dict[str, jax.Array]) -> jax.Array:
        return jnp.concatenate([p["a"], jnp.ravel(p["b"])])

    def objective(p: dict[str, jax.Array]) -> jax.Array:
        r = mat @ flat(p) - target
        return -jnp.sum(r * r)

    @jax.jit
    def search(theta: dict[str, jax.Array]) -> tuple[jax.Array, jax.Array, jax.Array]:
        members, noise = _population.perturb(theta, jax.random.PRNGKey(3), n, sigma)
        returns = jax.vmap(objective)(members)
        weights = fitness.pair_weights(fitness.shape_fitness(returns, FitnessShaping.ORIGINAL))
        ascent = fitness.ascent_direction(theta, noise, weights, l2coeff=0.0)
        return flat(ascent), flat(jax.grad(objective)(theta)), jax.vmap(flat)(noise)

    ascent, grad, noise = search(theta)
    estimate = np.asarray(ascent) / (2 * sigma)
    true = np.asarray(grad, np.float64)
    eps = np.asarray(noise, np.float64)
    # exact identity of the antithetic estimator on a quadratic (float32 rounding only)
    np.testing.assert_allclose(estimate, eps.T @ (eps @ true) / n, rtol=2e-3, atol=1e-2 * np.abs(true).max())
    # and the sampling error: about sqrt((d + 1) / n) = 1.7% of |grad|; allow 3.5 standard errors
    assert np.linalg.norm(estimate - true) < 0.06 * np.linalg.norm(true)
    cos = estimate @ true / (np.linalg.norm(estimate) * np.linalg.norm(true))
    assert cos > 0.998


def test_l2coeff_decays_the_parameters() -> None:
    theta = {"w": jnp.asarray([1.0, -2.0])}
    noise = {"w": jnp.asarray([[1.0, 0.0], [0.0, 1.0]])}
    ascent = fitness.ascent_direction(theta, noise, jnp.asarray([2.0, 4.0]), l2coeff=0.5)
    # sum_i w_i eps_i / n - l2 theta = [2, 4] / 2 - 0.5 * [1, -2]
    np.testing.assert_allclose(np.asarray(ascent["w"]), [0.5, 3.0])
