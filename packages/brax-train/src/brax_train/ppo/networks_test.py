"""PPO networks: any `jax.nn` activation is recorded by name and rebuilt; dict observations."""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from brax_train import running_statistics
from brax_train.ppo import PPOParams, make_inference_fn, make_ppo_networks, networks_from_description


def _jax_nn_activations() -> list[str]:
    names = []
    x = jnp.linspace(-2.0, 2.0, 8, dtype=jnp.float32).reshape(2, 4)
    for name in sorted(dir(jax.nn)):
        fn = getattr(jax.nn, name)
        if (
            name.startswith("_")
            or inspect.ismodule(fn)
            or not callable(fn)
            or name
            in (
                "one_hot",
                "dot_product_attention",
                "scaled_dot_general",
                "scaled_matmul",
                "get_scaled_dot_general_config",
            )
        ):
            continue
        try:
            y = fn(x)
        except Exception:  # needs more arguments, e.g. glu on odd sizes
            continue
        if isinstance(y, jax.Array) and y.shape == x.shape:
            names.append(name)
    return names


ACTIVATIONS = _jax_nn_activations()


def test_many_activations_found() -> None:
    assert {"relu", "tanh", "swish", "gelu", "elu", "softplus", "sigmoid"} <= set(ACTIVATIONS)


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_every_jax_nn_activation_round_trips(name: str) -> None:
    fn = getattr(jax.nn, name)
    nets = make_ppo_networks(
        3,
        2,
        running_statistics.normalize,
        policy_hidden_layer_sizes=(4,),
        value_hidden_layer_sizes=(4,),
        activation=fn,
    )
    desc = nets.description
    assert desc["recordable"], desc["notes"]
    rebuilt = networks_from_description(desc)
    assert rebuilt.description == desc
    key = jax.random.PRNGKey(0)
    params = PPOParams(
        running_statistics.init_state((3,)), nets.policy_network.init(key), nets.value_network.init(key)
    )
    obs = jnp.ones((2, 3), jnp.float32)
    a, _ = make_inference_fn(nets)(params, deterministic=True)(obs, key)
    b, _ = make_inference_fn(rebuilt)(params, deterministic=True)(obs, key)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_unrecordable_activation_is_noted() -> None:
    nets = make_ppo_networks(3, 1, activation=lambda x: x * 2.0)
    assert not nets.description["recordable"]
    assert "network_factory=" in nets.description["notes"][0]
    with pytest.raises(ValueError, match="network_factory="):
        networks_from_description(nets.description)


def test_dict_observations_asymmetric_actor_critic() -> None:
    obs_size = {"state": (3,), "privileged_state": (5,)}
    nets = make_ppo_networks(
        obs_size,
        2,
        running_statistics.normalize,
        policy_hidden_layer_sizes=(4,),
        value_hidden_layer_sizes=(4,),
        value_obs_key="privileged_state",
    )
    key = jax.random.PRNGKey(0)
    pp, vp = nets.policy_network.init(key), nets.value_network.init(key)
    assert pp["params"]["hidden_0"]["kernel"].shape == (3, 4)
    assert vp["params"]["hidden_0"]["kernel"].shape == (5, 4)
    stats = running_statistics.init_state(obs_size)
    obs = {"state": jnp.ones((7, 3), jnp.float32), "privileged_state": jnp.ones((7, 5), jnp.float32)}
    assert nets.value_network.apply(stats, vp, obs).shape == (7,)
    action, extras = make_inference_fn(nets)(PPOParams(stats, pp, vp))(obs, key)
    assert action.shape == (7, 2) and extras["log_prob"].shape == (7,)
