"""Action distributions: a diagonal Gaussian squashed by tanh, with exact log-probabilities."""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp


@dataclasses.dataclass(frozen=True)
class Normal:
    """A diagonal Gaussian over the last axis."""

    loc: jax.Array
    """Mean."""
    scale: jax.Array
    """Standard deviation (positive)."""

    def sample(self, key: jax.Array) -> jax.Array:
        """A reparameterized sample."""
        return self.loc + self.scale * jax.random.normal(key, self.loc.shape, self.loc.dtype)

    def log_prob(self, x: jax.Array) -> jax.Array:
        """Elementwise log-density."""
        z = (x - self.loc) / self.scale
        return -0.5 * jnp.square(z) - jnp.log(self.scale) - 0.5 * math.log(2.0 * math.pi)

    def entropy(self) -> jax.Array:
        """Elementwise differential entropy."""
        return 0.5 + 0.5 * math.log(2.0 * math.pi) + jnp.log(self.scale)

    def kl_from(self, old: Normal) -> jax.Array:
        """KL(old || self), summed over the last axis."""
        var_ratio = jnp.square(old.scale / self.scale)
        mean_term = jnp.square((old.loc - self.loc) / self.scale)
        return jnp.sum(0.5 * (var_ratio + mean_term - 1.0) - jnp.log(old.scale / self.scale), axis=-1)


def tanh_log_det_jacobian(x: jax.Array) -> jax.Array:
    """Elementwise log |d tanh(x) / dx| = log(1 - tanh(x)^2), computed stably."""
    return 2.0 * (math.log(2.0) - x - jax.nn.softplus(-2.0 * x))


@dataclasses.dataclass(frozen=True)
class NormalTanhDistribution:
    """Actions `tanh(u)` with `u ~ N(loc, scale)`; the network outputs `[loc, raw_scale]`.

    `scale = (softplus(raw_scale) + min_std) * var_scale`. Log-probabilities are of the pre-tanh
    sample `u` (the "raw action") corrected by the tanh Jacobian, so they are exact densities of the
    squashed action; the entropy is the Gaussian entropy plus the Jacobian term at one sample
    (a single-sample estimate of the squashed distribution's entropy).
    """

    event_size: int
    """Action dimension."""
    min_std: float = 0.001
    """Lower bound added to the softplus of the scale output."""
    var_scale: float = 1.0
    """Multiplier of the scale."""

    @property
    def param_size(self) -> int:
        """Number of network outputs: loc and scale per action dimension."""
        return 2 * self.event_size

    def create_dist(self, parameters: jax.Array) -> Normal:
        """The pre-tanh Gaussian of network outputs `parameters` (..., 2 * event_size)."""
        loc, raw_scale = jnp.split(parameters, 2, axis=-1)
        scale = (jax.nn.softplus(raw_scale) + self.min_std) * self.var_scale
        return Normal(loc=loc, scale=scale)

    def sample_no_postprocessing(self, parameters: jax.Array, key: jax.Array) -> jax.Array:
        """A pre-tanh ("raw") action."""
        return self.create_dist(parameters).sample(key)

    def postprocess(self, raw_action: jax.Array) -> jax.Array:
        """Squash a raw action into (-1, 1)."""
        return jnp.tanh(raw_action)

    def sample(self, parameters: jax.Array, key: jax.Array) -> jax.Array:
        """A squashed action."""
        return self.postprocess(self.sample_no_postprocessing(parameters, key))

    def mode(self, parameters: jax.Array) -> jax.Array:
        """The deterministic action `tanh(loc)`."""
        return jnp.tanh(self.create_dist(parameters).loc)

    def log_prob(self, parameters: jax.Array, raw_action: jax.Array) -> jax.Array:
        """Log-density of the squashed action `tanh(raw_action)`, summed over action dimensions."""
        dist = self.create_dist(parameters)
        return jnp.sum(dist.log_prob(raw_action) - tanh_log_det_jacobian(raw_action), axis=-1)

    def entropy(self, parameters: jax.Array, key: jax.Array) -> jax.Array:
        """Single-sample entropy estimate of the squashed distribution, summed over action dimensions."""
        dist = self.create_dist(parameters)
        return jnp.sum(dist.entropy() + tanh_log_det_jacobian(dist.sample(key)), axis=-1)

    def kl_divergence(self, old_parameters: jax.Array, parameters: jax.Array) -> jax.Array:
        """KL(old || new) of the pre-tanh Gaussians (tanh is a bijection, so it is also the squashed KL)."""
        return self.create_dist(parameters).kl_from(self.create_dist(old_parameters))


__all__ = ["Normal", "NormalTanhDistribution", "tanh_log_det_jacobian"]
