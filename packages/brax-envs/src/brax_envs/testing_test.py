"""`check_env` must catch contract violations."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from brax_envs import State
from brax_envs.envs import Fast
from brax_envs.testing import check_env


class ExtraInfoOnStep(Fast):
    def step(self, state: State, action: jax.Array) -> State:
        s = super().step(state, action)
        return s.replace(info={**s.info, "late": jnp.zeros(())})


class NaNObs(Fast):
    def step(self, state: State, action: jax.Array) -> State:
        s = super().step(state, action)
        return s.replace(obs=s.obs * jnp.nan)


class WrongSize(Fast):
    @property
    def observation_size(self) -> int:
        return 3


class IntDone(Fast):
    def reset(self, rng: jax.Array) -> State:
        s = super().reset(rng)
        return s.replace(done=jnp.zeros((), jnp.int32))


class VectorReward(Fast):
    def step(self, state: State, action: jax.Array) -> State:
        s = super().step(state, action)
        return s.replace(reward=s.reward[None])


@jax.custom_batching.custom_vmap
def _off_by_one_percent_when_batched(x: jax.Array) -> jax.Array:
    return x


@_off_by_one_percent_when_batched.def_vmap
def _batched_rule(axis_size: int, in_batched: list[bool], x: jax.Array) -> tuple[jax.Array, bool]:
    return x * 1.01, in_batched[0]


class DiffersUnderVmap(Fast):
    def step(self, state: State, action: jax.Array) -> State:
        s = super().step(state, action)
        return s.replace(obs=_off_by_one_percent_when_batched(s.obs + 1.0))


@pytest.mark.parametrize(("env", "match"), [
    (DiffersUnderVmap(), "vmap step member 0 .obs"),
    (ExtraInfoOnStep(), "differ from reset's"),
    (NaNObs(), "non-finite values in obs"),
    (WrongSize(), "observation_size is 3"),
    (IntDone(), "done dtype int32"),
    (VectorReward(), r"reward shape \(1,\)"),
])
def test_check_env_catches(env: Fast, match: str) -> None:
    with pytest.raises(AssertionError, match=match):
        check_env(env, num_steps=2)


def test_check_env_returns_the_jitted_rollout() -> None:
    check = check_env(Fast(), num_steps=2)
    assert len(check.states) == 3 and len(check.actions) == 2
    again = check.step(check.states[0], check.actions[0])
    assert float(again.reward) == float(check.states[1].reward)


@jax.custom_batching.custom_vmap
def _doubled_when_batched(x: jax.Array) -> jax.Array:
    return x


@_doubled_when_batched.def_vmap
def _doubling_rule(axis_size: int, in_batched: list[bool], x: jax.Array) -> tuple[jax.Array, bool]:
    return jnp.concatenate([x, x], axis=-1), in_batched[0]


class WiderUnderVmap(Fast):
    def step(self, state: State, action: jax.Array) -> State:
        s = super().step(state, action)
        return s.replace(obs=_doubled_when_batched(s.obs))


def test_traced_vmap_checks_structure_without_compiling() -> None:
    check = check_env(Fast(), num_steps=2, vmap="trace")
    assert len(check.states) == 3
    # the numerical batched-versus-unbatched comparison needs the compiled batch: not made here
    check_env(DiffersUnderVmap(), num_steps=2, vmap="trace")
    with pytest.raises(AssertionError, match="vmap step: observation shape gives 4, observation_size is 2"):
        check_env(WiderUnderVmap(), num_steps=2, vmap="trace")
    with pytest.raises(ValueError, match="vmap must be 'compile' or 'trace', got 'no'"):
        check_env(Fast(), num_steps=2, vmap="no")  # type: ignore[arg-type]
