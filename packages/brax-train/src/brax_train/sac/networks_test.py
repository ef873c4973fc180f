"""SAC networks: shapes, dict observations, the recorded description, `make_policy` inputs."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from brax_train import running_statistics
from brax_train.sac.networks import (
    SACParams,
    make_inference_fn,
    make_sac_networks,
    networks_from_description,
)

OBS = {"state": (3,), "privileged": (5,)}


def _obs(batch: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    return {
        "state": rng.normal(size=(batch, 3)).astype(np.float32),
        "privileged": rng.normal(size=(batch, 5)).astype(np.float32),
    }


def test_twin_q_and_policy_read_their_own_observation_keys_and_rebuild_from_json() -> None:
    net = make_sac_networks(
        OBS,
        2,
        preprocess_observations_fn=running_statistics.normalize,
        hidden_layer_sizes=(8, 8),
        activation=jax.nn.tanh,
        q_obs_key="privileged",
    )
    key_p, key_q = jax.random.split(jax.random.PRNGKey(0))
    policy, q = jax.jit(net.policy_network.init)(key_p), jax.jit(net.q_network.init)(key_q)
    normalizer = running_statistics.init_state(OBS)
    obs, action = _obs(5), np.zeros((5, 2), np.float32)

    desc = json.loads(json.dumps(net.description))
    assert desc["recordable"] and desc["normalize_observations"]
    assert desc["kwargs"]["activation"] == "jax.nn.tanh"
    again = networks_from_description(desc)

    @jax.jit  # one compilation for both networks, original and rebuilt
    def outputs() -> tuple[jax.Array, ...]:
        return tuple(
            y
            for nets in (net, again)
            for y in (
                nets.policy_network.apply(normalizer, policy, obs),
                nets.q_network.apply(normalizer, q, obs, action),
            )
        )

    logits, qs, logits_again, qs_again = outputs()
    assert logits.shape == (5, 4)  # loc and scale per action
    assert qs.shape == (5, 2)  # two critics
    assert policy["params"]["hidden_0"]["kernel"].shape == (3, 8)
    kernel = q["params"]["critics"]["hidden_0"]["kernel"]  # the critics' layers, stacked
    assert kernel.shape == (2, 5 + 2, 8) and not np.array_equal(kernel[0], kernel[1])
    np.testing.assert_array_equal(np.asarray(logits_again), np.asarray(logits))
    np.testing.assert_array_equal(np.asarray(qs_again), np.asarray(qs))


def test_unrecordable_networks_say_why_and_bad_arguments_raise() -> None:
    net = make_sac_networks(4, 1, activation=lambda x: jnp.maximum(x, 0.0))
    assert not net.description["recordable"]
    with pytest.raises(ValueError, match=r"activation=.*no importable name"):
        networks_from_description(net.description)
    with pytest.raises(ValueError, match="distribution_type must be 'tanh_normal'"):
        make_sac_networks(4, 1, distribution_type="normal")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="action_size must be a positive int"):
        make_sac_networks(4, 0)


def test_make_policy_takes_sac_params_or_a_brax_tuple() -> None:
    net = make_sac_networks(3, 2, hidden_layer_sizes=(8,))
    params = SACParams(
        running_statistics.init_state((3,)), jax.jit(net.policy_network.init)(jax.random.PRNGKey(0))
    )
    make_policy = make_inference_fn(net)
    obs = jnp.asarray(np.random.default_rng(2).normal(scale=10.0, size=(64, 3)), jnp.float32)

    @jax.jit
    def act(params: SACParams, key: jax.Array) -> tuple[jax.Array, ...]:
        a, extras = make_policy(params)(obs, key)
        assert extras == {}
        b, _ = make_policy(tuple(params))(obs, key)  # Brax's (normalizer, policy) tuple
        mode, _ = make_policy(params, deterministic=True)(obs, key)
        loc = net.policy_network.apply(params.normalizer, params.policy, obs)[:, :2]
        return a, b, mode, jnp.tanh(loc)

    a, b, mode, squashed_loc = act(params, jax.random.PRNGKey(3))
    assert a.shape == (64, 2) and bool(jnp.all(jnp.abs(a) <= 1.0))
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(np.asarray(mode), np.asarray(squashed_loc))
    with pytest.raises(TypeError, match="expects SACParams"):
        make_policy({"policy": params.policy})
    with pytest.raises(TypeError, match="normalizer of type dict"):
        make_policy(({}, params.policy))
