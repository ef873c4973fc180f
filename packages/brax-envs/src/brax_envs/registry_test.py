"""Tests of the environment registry."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

import brax_envs
from brax_envs import wrappers
from brax_envs.envs import Fast


def test_builtin_names() -> None:
    names = brax_envs.registered_environments()
    assert {"fast", "pendulum_swingup"} <= set(names) and list(names) == sorted(names)


def test_standard_suite_is_registered_by_brax_names() -> None:
    standard = {"ant", "halfcheetah", "hopper", "humanoid", "humanoidstandup", "inverted_double_pendulum",
                "inverted_pendulum", "pusher", "reacher", "swimmer", "walker2d"}
    assert standard <= set(brax_envs.registered_environments())
    env = brax_envs.get_environment("inverted_pendulum")
    assert (env.observation_size, env.action_size) == (4, 1)


def test_unknown_name_lists_registered_names() -> None:
    for exc in (KeyError, ValueError):
        with pytest.raises(exc, match=r"unknown environment 'nope'; registered: .*fast.*pendulum_swingup"):
            brax_envs.get_environment("nope")
    with pytest.raises(brax_envs.UnknownEnvironmentError):
        brax_envs.create("nope")


def test_register_and_get_with_kwargs() -> None:
    brax_envs.register_environment("fast_far_test", lambda **kw: Fast(target=5.0, **kw))
    try:
        env = brax_envs.get_environment("fast_far_test", ctrl_cost_weight=0.5)
        assert isinstance(env, Fast) and env._target == 5.0 and env._ctrl_cost_weight == 0.5
        assert "fast_far_test" in brax_envs.registered_environments()
    finally:
        brax_envs.registry._REGISTRY.pop("fast_far_test")
    with pytest.raises(ValueError, match="non-empty"):
        brax_envs.register_environment("", Fast)
    with pytest.raises(TypeError, match="callable"):
        brax_envs.register_environment("x", 3)  # type: ignore[arg-type]


def test_create_wraps_like_brax() -> None:
    env = brax_envs.create("fast", episode_length=3, batch_size=2, reset_noise_scale=0.0)
    assert isinstance(env, wrappers.AutoResetWrapper)
    assert isinstance(env.env, wrappers.VmapWrapper) and env.env.batch_size == 2
    assert isinstance(env.env.env, wrappers.EpisodeWrapper) and env.env.env.episode_length == 3
    s = env.reset(jax.random.PRNGKey(0))
    assert s.obs.shape == (2, 2)
    for _ in range(3):
        s = env.step(s, jnp.ones((2, 1), jnp.float32))
    assert s.done.tolist() == [1.0, 1.0] and s.info["truncation"].tolist() == [1.0, 1.0]
    bare = brax_envs.create("fast", episode_length=None, auto_reset=False)
    assert isinstance(bare, Fast)
