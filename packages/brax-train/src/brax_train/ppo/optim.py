"""PPO's optimizer: Adam with an optional adaptive-KL or linearly decaying learning rate (optax)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax  # type: ignore[import-untyped]  # this optax ships no py.typed


class AdaptiveKLState(NamedTuple):
    """State of `scale_by_adaptive_kl`."""

    learning_rate: jax.Array
    """() float32 learning rate used by the last update."""


def scale_by_adaptive_kl(
    learning_rate: float, desired_kl: float, min_learning_rate: float, max_learning_rate: float
) -> Any:
    """Scale updates by `-lr`, adapting `lr` to the policy's KL divergence before each update.

    `update(updates, state, params, kl_mean=kl)` divides `lr` by 1.5 (down to `min_learning_rate`)
    when `kl > 2 desired_kl` and multiplies it by 1.5 (up to `max_learning_rate`) when
    `0 < kl < desired_kl / 2` (the rule of rsl_rl and Brax's `ADAPTIVE_KL` schedule), then scales.
    """

    def init(params: Any) -> AdaptiveKLState:
        del params
        return AdaptiveKLState(learning_rate=jnp.asarray(learning_rate, jnp.float32))

    def update(
        updates: Any, state: AdaptiveKLState, params: Any = None, *, kl_mean: jax.Array, **extra: Any
    ) -> tuple[Any, AdaptiveKLState]:
        del params, extra
        lr = state.learning_rate
        lr = jnp.where(kl_mean > 2.0 * desired_kl, jnp.maximum(min_learning_rate, lr / 1.5), lr)
        lr = jnp.where(
            (kl_mean < 0.5 * desired_kl) & (kl_mean > 0.0), jnp.minimum(max_learning_rate, lr * 1.5), lr
        )
        step = -1 * lr  # the sign flip optax.scale_by_learning_rate applies
        return jax.tree.map(lambda g: step * g, updates), AdaptiveKLState(learning_rate=lr)

    return optax.GradientTransformationExtraArgs(init, update)


def make_optimizer(
    learning_rate: float,
    max_grad_norm: float | None = None,
    adaptive_kl: tuple[float, float, float] | None = None,
    linear_decay: tuple[float, int] | None = None,
) -> Any:
    """Adam after optional global-norm clipping; `adaptive_kl=(desired_kl, min_lr, max_lr)` adapts its rate,
    `linear_decay=(final_lr, updates)` moves it linearly to `final_lr` over `updates` updates, then holds it.

    Call `update(grads, state, params, kl_mean=kl)`; `kl_mean` is ignored without `adaptive_kl`.
    """
    clip = [optax.clip_by_global_norm(max_grad_norm)] if max_grad_norm else []
    if adaptive_kl is not None and linear_decay is not None:
        raise ValueError("make_optimizer: adaptive_kl and linear_decay are exclusive")
    if linear_decay is not None:
        final, updates = linear_decay
        decay = optax.linear_schedule(learning_rate, final, transition_steps=max(int(updates), 1))
        # injected, so the state holds the rate of the last update (reported as `learning_rate`)
        return optax.chain(*clip, optax.inject_hyperparams(optax.adam)(learning_rate=decay))
    if adaptive_kl is None:
        return optax.chain(*clip, optax.adam(learning_rate=learning_rate))
    desired, lo, hi = adaptive_kl
    # Adam's constants as float32 state, as `optax.inject_hyperparams(optax.adam)` held them (XLA
    # neither folds nor reassociates them): adaptive-KL runs of earlier releases stay bit-identical.
    adam = optax.inject_hyperparams(optax.scale_by_adam)(b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0)
    return optax.chain(*clip, adam, scale_by_adaptive_kl(learning_rate, desired, lo, hi))


def current_learning_rate(state: Any, default: float) -> jax.Array:
    """() float32 learning rate of the last update (`default` when it is constant)."""
    found = optax.tree.get(state, "learning_rate", None, filtering=lambda _, v: isinstance(v, jax.Array))
    return jnp.asarray(default if found is None else found, jnp.float32)


__all__ = ["AdaptiveKLState", "current_learning_rate", "make_optimizer", "scale_by_adaptive_kl"]
