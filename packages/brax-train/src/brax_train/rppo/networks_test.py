"""Unit tests of the recurrent networks, the memory-carrying environment and the sequence loss."""

from __future__ import annotations

from typing import Any

import brax_envs
import jax
import jax.numpy as jnp
import numpy as np
from brax_envs import wrappers

from brax_train import networks, running_statistics
from brax_train.ppo import losses
from brax_train.rppo import (
    MemoryTanhDistribution,
    MemoryWrapper,
    RPPONetworks,
    make_rppo_networks,
    replay_hidden,
    sequence_loss,
)
from brax_train.types import Transition

OBS, ACT, H = 3, 2, 4
B, T = 5, 6


def _net_and_params(normalize: bool = False) -> tuple[RPPONetworks, losses.NetworkParams, Any]:
    pre = networks.preprocessor(normalize)
    net = make_rppo_networks(
        OBS,
        ACT,
        hidden_size=H,
        policy_hidden_layer_sizes=(8,),
        value_hidden_layer_sizes=(8,),
        preprocess_observations_fn=pre,
    )
    kp, kv = jax.random.split(jax.random.PRNGKey(0))
    params = losses.NetworkParams(policy=net.policy_network.init(kp), value=net.value_network.init(kv))
    norm = running_statistics.init_state((OBS + H,))
    return net, params, norm


def test_distribution_passes_memory_through_and_scores_the_action_only() -> None:
    d = MemoryTanhDistribution(event_size=ACT, memory_size=H)
    params = jax.random.normal(jax.random.PRNGKey(1), (7, 2 * ACT + H))
    assert d.param_size == 2 * ACT + H
    raw = d.sample_no_postprocessing(params, jax.random.PRNGKey(2))
    assert raw.shape == (7, ACT + H)
    np.testing.assert_array_equal(raw[:, ACT:], params[:, 2 * ACT :])
    act = d.postprocess(raw)
    np.testing.assert_array_equal(act[:, ACT:], params[:, 2 * ACT :])
    np.testing.assert_allclose(act[:, :ACT], jnp.tanh(raw[:, :ACT]))
    np.testing.assert_allclose(d.mode(params)[:, :ACT], jnp.tanh(params[:, :ACT]))
    # Changing the memory changes neither densities nor divergences.
    other = params.at[:, 2 * ACT :].add(3.0)
    np.testing.assert_array_equal(d.log_prob(params, raw), d.log_prob(other, raw.at[:, ACT:].add(1.0)))
    np.testing.assert_array_equal(d.kl_divergence(params, other), jnp.zeros(7))
    assert d.log_prob(params, raw).shape == (7,)


def test_policy_step_reads_and_writes_the_hidden_state() -> None:
    net, params, norm = _net_and_params()
    obs = jax.random.normal(jax.random.PRNGKey(3), (B, OBS + H))
    out = net.policy_network.apply(norm, params.policy, obs)
    assert out.shape == (B, 2 * ACT + H)
    changed = net.policy_network.apply(norm, params.policy, obs.at[:, OBS:].add(0.5))
    assert not np.allclose(out[:, 2 * ACT :], changed[:, 2 * ACT :])  # the state is an input
    assert net.value_network.apply(norm, params.value, obs).shape == (B,)


def _sequence(key: jax.Array, net: Any, params: losses.NetworkParams, norm: Any) -> Transition:
    """An unroll batch as the policy would have collected it (stored hidden states arbitrary)."""
    k1, k2 = jax.random.split(key)
    obs = jax.random.normal(k1, (B, T, OBS + H))
    discount = jnp.ones((B, T)).at[1, 2].set(0.0)  # env 1's episode ends at step 2
    logits = net.policy_network.apply(norm, params.policy, obs)
    d = net.parametric_action_distribution
    raw = d.sample_no_postprocessing(logits, k2)
    return Transition(
        observation=obs,
        action=d.postprocess(raw),
        reward=jnp.ones((B, T)),
        discount=discount,
        next_observation=obs,
        extras={
            "policy_extras": {
                "raw_action": raw,
                "log_prob": d.log_prob(logits, raw),
                "distribution_params": logits,
            },
            "state_extras": {"truncation": jnp.zeros((B, T))},
        },
    )


def test_replay_starts_from_the_stored_state_and_resets_after_done() -> None:
    net, params, norm = _net_and_params(normalize=True)
    data = _sequence(jax.random.PRNGKey(4), net, params, norm)
    hidden = net.replay(norm, params.policy, data.observation, data.discount)
    assert hidden.shape == (B, T, H)
    np.testing.assert_array_equal(hidden[:, 0], data.observation[:, 0, OBS:])  # the stored start
    # Every later step starts from the policy's own output on the previous step (not the stored one).
    step = net.policy_network.apply(norm, params.policy, data.observation[:, 0].at[:, OBS:].set(hidden[:, 0]))
    np.testing.assert_allclose(hidden[:, 1], step[:, 2 * ACT :], rtol=1e-6, atol=1e-6)
    assert not np.allclose(hidden[:, 1], data.observation[:, 1, OBS:])
    np.testing.assert_array_equal(hidden[1, 3], jnp.zeros(H))  # after env 1's episode end
    assert np.all(np.abs(hidden[0, 3]) > 0) and np.all(np.abs(hidden[1, 4]) > 0)


def test_sequence_loss_shapes_and_gradient_through_time() -> None:
    net, params, norm = _net_and_params()
    data = _sequence(jax.random.PRNGKey(5), net, params, norm)
    replayed = replay_hidden(net, params, norm, data)
    assert replayed.observation.shape == data.observation.shape
    np.testing.assert_array_equal(replayed.observation[..., :OBS], data.observation[..., :OBS])
    loss = sequence_loss(
        lambda p, n, d, k: losses.compute_ppo_loss(
            p,
            n,
            d,
            k,
            net,
            entropy_cost=1e-2,
            discounting=0.9,
            reward_scaling=1.0,
            gae_lambda=0.95,
            clipping_epsilon=0.3,
            normalize_advantage=True,
            vf_loss_coefficient=0.5,
            clipping_epsilon_value=None,
        ),
        net,
    )
    (value, metrics), grads = jax.value_and_grad(loss, has_aux=True)(
        params, norm, data, jax.random.PRNGKey(6)
    )
    assert value.shape == () and np.isfinite(value)
    assert all(np.shape(m) == () for m in metrics.values())
    assert str(jax.tree.structure(grads)) == str(jax.tree.structure(params))
    # The recurrent kernel gets gradient only through the replay (one step would see the stored state).
    hr = grads.policy["params"]["cell"]["hr"]["kernel"]
    assert hr.shape == (H, H) and float(jnp.max(jnp.abs(hr))) > 0


def test_memory_wrapper_carries_the_state_and_auto_reset_zeroes_it() -> None:
    env = wrappers.wrap_for_training(
        MemoryWrapper(brax_envs.get_environment("fast"), H), episode_length=3, action_repeat=1
    )
    inner = brax_envs.get_environment("fast")
    inner_obs = inner.observation_size
    assert isinstance(inner_obs, int)
    assert env.observation_size == inner_obs + H and env.action_size == inner.action_size + H
    state = jax.jit(env.reset)(jax.random.split(jax.random.PRNGKey(0), 2))
    np.testing.assert_array_equal(state.obs[:, -H:], jnp.zeros((2, H)))
    step = jax.jit(env.step)
    for i in range(3):
        action = jnp.concatenate([jnp.zeros((2, inner.action_size)), jnp.full((2, H), i + 1.0)], axis=-1)
        state = step(state, action)
        if i < 2:
            np.testing.assert_array_equal(state.obs[:, -H:], jnp.full((2, H), i + 1.0))
    # The third step hit the time limit: done, and the auto-reset observation starts from zero memory.
    np.testing.assert_array_equal(state.done, jnp.ones(2))
    np.testing.assert_array_equal(state.obs[:, -H:], jnp.zeros((2, H)))
    np.testing.assert_array_equal(state.info["final_obs"][:, -H:], jnp.full((2, H), 3.0))
