"""Tests of `State`, `Env`, `PipelineEnv` and `Wrapper`."""

from __future__ import annotations

import copy

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

from brax_envs import Env, PipelineEnv, State, wrappers
from brax_envs.envs import Fast, PendulumSwingup
from brax_envs.testing import check_env


def test_state_is_a_pytree_with_replace() -> None:
    s = State(pipeline_state=None, obs=jnp.zeros(2), reward=jnp.zeros(()), done=jnp.zeros(()))
    assert s.metrics == {} and s.info == {}
    s2 = s.replace(metrics={"a": jnp.ones(())}, info={"k": jnp.ones(3)})
    assert len(jax.tree.leaves(s2)) == 5 and s.metrics == {}
    doubled = jax.tree.map(lambda x: 2 * x, s2)
    assert isinstance(doubled, State) and float(doubled.metrics["a"]) == 2.0


class CountingEnv(Env):
    """Counts how reset/step are called; does not override observation_size."""

    def __init__(self, dict_obs: bool = False) -> None:
        self.dict_obs = dict_obs
        self.calls: list[tuple[str, bool]] = []

    def _obs(self, x: jax.Array) -> jax.Array | dict[str, jax.Array]:
        if self.dict_obs:
            return {"state": x, "pixels": jnp.zeros((4, 5, 3), jnp.float32) + x[0]}
        return x

    def reset(self, rng: jax.Array) -> State:
        self.calls.append(("reset", isinstance(rng, jax.core.Tracer)))
        x = jax.random.normal(rng, (3,), jnp.float32)
        zero = jnp.zeros((), jnp.float32)
        return State(x, self._obs(x), zero, zero, {}, {})

    def step(self, state: State, action: jax.Array) -> State:
        self.calls.append(("step", isinstance(action, jax.core.Tracer)))
        x = state.pipeline_state + action[0]
        return state.replace(pipeline_state=x, obs=self._obs(x), reward=jnp.sum(x))

    @property
    def action_size(self) -> int:
        return 1


def test_observation_size_is_abstract_and_cached() -> None:
    env = CountingEnv()
    assert env.observation_size == 3
    assert env.observation_size == 3
    assert env.calls == [("reset", True)]  # traced once abstractly, never stepped
    wrapped = wrappers.VmapWrapper(wrappers.EpisodeWrapper(env, 10), batch_size=4)
    assert wrapped.observation_size == 3 and env.calls == [("reset", True)]


def test_dict_observations() -> None:
    env = CountingEnv(dict_obs=True)
    assert env.observation_size == {"state": (3,), "pixels": (4, 5, 3)}
    check_env(env)


def test_pipeline_env_validates_backend_and_frames() -> None:
    with pytest.raises(ValueError, match=r"unknown backend 'mjx'.*'generalized'"):
        PendulumSwingup(backend="mjx")
    with pytest.raises(ValueError, match="n_frames"):
        PendulumSwingup(n_frames=0)
    env = PendulumSwingup(n_frames=5)
    assert float(env.dt) == pytest.approx(5 * float(env.sys.opt.timestep))
    assert env.backend == "generalized" and env.action_size == env.sys.nu == 1
    assert isinstance(env, PipelineEnv)


def test_with_sys_copies_and_leaves_the_original() -> None:
    env = PendulumSwingup()
    heavy = env.sys.replace(body_mass=env.sys.body_mass * 2)
    other = env.with_sys(heavy)
    assert other is not env and other.sys is heavy and env.sys is not heavy
    chain = wrappers.EpisodeWrapper(wrappers.NanGuardWrapper(env), 5)
    chain2 = chain.with_sys(heavy)
    assert chain2.unwrapped.sys is heavy and chain.unwrapped.sys is env.sys
    assert chain2.unwrapped is not env and chain.unwrapped is env
    assert isinstance(chain2, wrappers.EpisodeWrapper) and chain2.episode_length == 5
    with pytest.raises(NotImplementedError, match="cannot swap its System"):
        Fast().with_sys(heavy)
    with pytest.raises(AttributeError, match="no brax_physics.System"):
        _ = Fast().sys


def test_wrapper_delegates_attributes_and_copies() -> None:
    env = wrappers.EpisodeWrapper(Fast(target=2.0), 5)
    assert env._target == 2.0  # unknown attributes come from the wrapped env
    assert env.action_size == 1 and env.observation_size == 2 and env.backend == "none"
    assert float(env.dt) == pytest.approx(0.02)
    clone = copy.copy(env)
    assert clone.env is env.env
    with pytest.raises(AttributeError):
        _ = env.no_such_attribute


def test_debug_mode_names_the_first_non_finite_field() -> None:
    env = PendulumSwingup(debug=True)
    state = jax.jit(env.reset)(jax.random.PRNGKey(0))
    step = jax.jit(checkify.checkify(env.step))
    err, out = step(state, jnp.ones((1,), jnp.float32))
    err.throw()  # finite: no error
    err, _ = step(state, jnp.full((1,), jnp.nan, jnp.float32))
    msg = err.get()
    assert msg is not None and "non-finite pipeline_state" in msg and "frame 0" in msg
    assert np.all(np.isfinite(out.obs))
