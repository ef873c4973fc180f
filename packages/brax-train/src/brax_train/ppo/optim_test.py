"""PPO's optimizer: the adaptive-KL transformation against its rule, the linear decay and optax's Adam."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax  # type: ignore[import-untyped]
import pytest

from brax_train.ppo import optim

PARAMS = {"w": jnp.ones((3, 2)), "b": jnp.zeros(2)}


@pytest.fixture(autouse=True)
def _standard_promotion() -> Any:
    # optax mixes int step counts with float constants (the trainer does the same around its updates).
    with jax.numpy_dtype_promotion("standard"):
        yield


def _grads(i: int) -> Any:
    return jax.tree.map(lambda x: jax.random.normal(jax.random.PRNGKey(i), x.shape), PARAMS)


@pytest.mark.parametrize(
    ("kl", "expected"),
    [
        (0.05, 1e-3 / 1.5),  # above 2 * desired: divide
        (0.001, 1.5e-3),  # below desired / 2 (and > 0): multiply
        (0.0, 1e-3),  # zero KL: unchanged
        (0.01, 1e-3),  # in between: unchanged
        (1.0, 1e-3 / 1.5),
    ],
)
def test_adaptive_kl_rule(kl: float, expected: float) -> None:
    """One update moves the rate as the rule says, and scales the updates by minus the new rate."""
    t = optim.scale_by_adaptive_kl(1e-3, desired_kl=0.01, min_learning_rate=1e-5, max_learning_rate=1e-2)
    g = _grads(0)
    updates, state = t.update(g, t.init(PARAMS), PARAMS, kl_mean=jnp.float32(kl))
    assert float(state.learning_rate) == pytest.approx(expected, rel=1e-6)
    np.testing.assert_array_equal(updates["w"], -state.learning_rate * g["w"])


def test_adaptive_kl_bounds() -> None:
    """Repeated large (small) KL drives the rate to the minimum (maximum) and no further."""
    t = optim.scale_by_adaptive_kl(1e-3, desired_kl=0.01, min_learning_rate=2e-4, max_learning_rate=4e-3)
    for kl, bound in ((1.0, 2e-4), (1e-4, 4e-3)):
        state = t.init(PARAMS)
        for _ in range(20):
            _, state = t.update(_grads(1), state, PARAMS, kl_mean=jnp.float32(kl))
        assert float(state.learning_rate) == pytest.approx(bound, rel=1e-6)


def test_constant_rate_is_optax_adam() -> None:
    """Without adaptive KL the optimizer is clipping + `optax.adam`, bit for bit; `kl_mean` is ignored."""
    ours = optim.make_optimizer(3e-3, max_grad_norm=0.5)
    ref = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(3e-3))
    s_ours, s_ref = ours.init(PARAMS), ref.init(PARAMS)
    for i in range(3):
        u_ours, s_ours = ours.update(_grads(i), s_ours, PARAMS, kl_mean=jnp.float32(1.0))
        u_ref, s_ref = ref.update(_grads(i), s_ref, PARAMS)
        for a, b in zip(jax.tree.leaves(u_ours), jax.tree.leaves(u_ref), strict=True):
            np.testing.assert_array_equal(a, b)
    assert float(optim.current_learning_rate(s_ours, 3e-3)) == pytest.approx(3e-3)


def test_adaptive_rate_is_found_in_the_chain_state() -> None:
    """`current_learning_rate` reads the adapted rate from the chained optimizer state."""
    opt = optim.make_optimizer(1e-3, max_grad_norm=1.0, adaptive_kl=(0.01, 1e-5, 1e-2))
    _, state = opt.update(_grads(2), opt.init(PARAMS), PARAMS, kl_mean=jnp.float32(1.0))
    assert float(optim.current_learning_rate(state, 1e-3)) == pytest.approx(1e-3 / 1.5, rel=1e-6)


def test_linear_decay_is_adam_on_optax_linear_schedule() -> None:
    """`linear_decay=(final, n)`: optax's Adam on a linear schedule, its rate reported, held after n."""
    ours = optim.make_optimizer(1e-3, max_grad_norm=0.5, linear_decay=(1e-4, 4))
    ref = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(optax.linear_schedule(1e-3, 1e-4, 4)))
    s_ours, s_ref = ours.init(PARAMS), ref.init(PARAMS)
    rates = []
    for i in range(6):
        u_ours, s_ours = ours.update(_grads(i), s_ours, PARAMS, kl_mean=jnp.float32(1.0))
        u_ref, s_ref = ref.update(_grads(i), s_ref, PARAMS)
        for a, b in zip(jax.tree.leaves(u_ours), jax.tree.leaves(u_ref), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5)  # injected constants are float32 arrays
        rates.append(float(optim.current_learning_rate(s_ours, 1e-3)))
    assert rates == pytest.approx([1e-3, 7.75e-4, 5.5e-4, 3.25e-4, 1e-4, 1e-4], rel=1e-6)
    with pytest.raises(ValueError, match="adaptive_kl and linear_decay are exclusive"):
        optim.make_optimizer(1e-3, adaptive_kl=(0.01, 1e-5, 1e-2), linear_decay=(1e-4, 4))
