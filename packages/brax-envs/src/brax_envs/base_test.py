"""Tests of `State`, `Env`, `PipelineEnv` and `Wrapper`."""

from __future__ import annotations

import copy

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

import brax_envs
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


def test_observation_size_of_arrays_dicts_and_abstract_values() -> None:
    size_of = brax_envs.observation_size_of
    assert size_of is brax_envs.base.observation_size_of
    assert size_of(jnp.zeros(5)) == 5 and type(size_of(jnp.zeros(5))) is int
    assert size_of(np.zeros((4, 5, 3), np.float32)) == (4, 5, 3)
    abstract = jax.eval_shape(lambda: {"state": jnp.zeros(3), "pixels": jnp.zeros((4, 5, 3), jnp.uint8)})
    assert size_of(abstract["state"]) == 3
    assert size_of(abstract) == {"state": (3,), "pixels": (4, 5, 3)}
    # What Env.observation_size reports is this function applied to the abstract reset observation.
    env = CountingEnv(dict_obs=True)
    assert env.observation_size == size_of(env.reset(jax.random.PRNGKey(0)).obs)


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
    with pytest.raises(AttributeError, match=r"no brax_physics\.System"):
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


# ---------------------------------------------------------------- PipelineEnv step contract

class Probe(PipelineEnv):
    """A `PipelineEnv` without physics: `info['poison']` makes its pipeline state, obs or reward NaN."""

    def __init__(self) -> None:
        super().__init__(PendulumSwingup().sys)
        self.seen: list[jnp.dtype] = []

    def reset(self, rng: jax.Array) -> State:
        zero = jnp.zeros((), jnp.float32)
        return State(jnp.zeros((2,), jnp.float32), jnp.zeros((2,), jnp.float32), zero, zero,
                     {"reward_move": zero}, {"poison": jnp.zeros((3,), bool)})

    def step(self, state: State, action: jax.Array) -> State:
        """Moves by `action[0]`; rewards it."""
        self.seen.append(action.dtype)
        poison = state.info["poison"]
        nan = jnp.float32(jnp.nan)
        ps = jnp.where(poison[0], nan, state.pipeline_state + action[0])
        obs = jnp.where(poison[1], nan, 2.0 * ps)
        reward = jnp.where(poison[2], nan, action[0])
        return state.replace(pipeline_state=ps, obs=obs, reward=reward, done=jnp.zeros((), jnp.float32),
                             metrics={"reward_move": reward})


class SuperProbe(Probe):
    """Overrides `step` by calling `super().step`, so the checks run twice."""

    def step(self, state: State, action: jax.Array) -> State:
        out = super().step(state, action)
        return out.replace(reward=out.reward + 1.0)


@pytest.fixture(scope="module")
def probe() -> Probe:
    return Probe()


def _poisoned(state: State, which: int) -> State:
    return state.replace(info={**state.info, "poison": jnp.arange(3) == which})


def test_pipeline_env_wraps_step_and_reset_once(probe: Probe) -> None:
    raw = Probe.step.__wrapped__  # type: ignore[attr-defined]
    assert Probe.step.__doc__ == "Moves by `action[0]`; rewards it." and Probe.step.__name__ == "step"
    assert not hasattr(raw, "__wrapped__")  # wrapped once, not per subclass
    assert SuperProbe.reset is Probe.reset
    s0 = probe.reset(jax.random.PRNGKey(0))
    assert s0.metrics == {"reward_move": 0.0, "nan_steps": 0.0}
    s1 = probe.step(s0, jnp.array([0.5], jnp.float32))
    expected = raw(probe, s0, jnp.array([0.5], jnp.float32))
    np.testing.assert_array_equal(s1.obs, expected.obs)
    assert float(s1.reward) == float(expected.reward) == 0.5 and float(s1.done) == 0.0
    assert s1.metrics == {"reward_move": 0.5, "nan_steps": 0.0}
    check_env(probe, num_steps=2)  # reset and step share one structure: nothing retraces


@pytest.mark.parametrize("which", [0, 1, 2])
def test_non_finite_state_obs_or_reward_is_done_and_counted(probe: Probe, which: int) -> None:
    s0 = _poisoned(probe.reset(jax.random.PRNGKey(0)), which)
    s1 = probe.step(s0, jnp.array([0.5], jnp.float32))
    assert float(s1.done) == 1.0 and float(s1.reward) == 0.0 and float(s1.metrics["nan_steps"]) == 1.0
    # Nothing is rolled back or cleaned here: a NaN observation stays NaN (NanGuardWrapper's job).
    assert bool(np.all(np.isfinite(s1.obs))) == (which == 2)


def test_nan_action_is_done_and_counted_once_through_super() -> None:
    env = SuperProbe()
    s0 = env.reset(jax.random.PRNGKey(0))
    s1 = env.step(s0, jnp.array([jnp.nan], jnp.float32))
    # SuperProbe adds 1 to the inner step's reward of 0; its own check then zeroes it again.
    assert float(s1.done) == 1.0 and float(s1.reward) == 0.0 and float(s1.metrics["nan_steps"]) == 1.0
    s1 = env.step(s0, jnp.array([0.5], jnp.float32))
    assert float(s1.reward) == 1.5 and float(s1.metrics["nan_steps"]) == 0.0


def test_action_dtypes(probe: Probe) -> None:
    s0 = probe.reset(jax.random.PRNGKey(0))
    probe.seen.clear()
    s1 = probe.step(s0, jnp.array([2], jnp.int32))
    assert probe.seen == [jnp.float32] and float(s1.reward) == 2.0
    for bad in (jnp.array([True]), jnp.array([2], jnp.uint32), jnp.array([1j], jnp.complex64)):
        msg = rf"Probe.step: action has dtype {bad.dtype}, expected a floating"
        with pytest.raises(ValueError, match=msg):
            probe.step(s0, bad)


def test_nanguard_and_env_agree_on_the_metric(probe: Probe) -> None:
    guarded = wrappers.NanGuardWrapper(probe)
    s0 = guarded.reset(jax.random.PRNGKey(0))
    assert float(s0.metrics["nan_steps"]) == 0.0
    s1 = guarded.step(_poisoned(s0, 1), jnp.array([0.5], jnp.float32))
    assert float(s1.metrics["nan_steps"]) == 1.0 and float(s1.done) == 1.0
    np.testing.assert_array_equal(s1.obs, s0.obs)  # the guard rolled the step back


class RealEnv:
    """A standard env with one jitted step that returns the checked and the raw subclass step."""

    def __init__(self, name: str) -> None:
        self.env = brax_envs.get_environment(name)
        raw = type(self.env).step.__wrapped__  # type: ignore[attr-defined]
        self.step = jax.jit(lambda s, a: (self.env.step(s, a), raw(self.env, s, a)))
        self.s0 = jax.jit(self.env.reset)(jax.random.PRNGKey(0))


@pytest.fixture(scope="module", params=["ant", "hopper"])
def real(request: pytest.FixtureRequest) -> RealEnv:
    return RealEnv(request.param)


def test_real_env_nan_action_is_done_and_counted(real: RealEnv) -> None:
    n = real.env.action_size
    assert float(real.s0.metrics["nan_steps"]) == 0.0
    s1, raw = real.step(real.s0, jnp.full((n,), 0.3, jnp.float32))
    assert float(s1.metrics["nan_steps"]) == 0.0
    assert float(s1.reward) == float(raw.reward) and float(s1.done) == float(raw.done) == 0.0
    np.testing.assert_array_equal(s1.obs, raw.obs)
    assert s1.metrics == {**raw.metrics, "nan_steps": 0.0}
    action = jnp.zeros((n,), jnp.float32).at[1].set(jnp.nan)
    s1, raw = real.step(real.s0, action)
    # What envs returned before: NaN obs and reward; ant's health rule even kept the episode going.
    assert not np.all(np.isfinite(raw.obs)) and not np.isfinite(float(raw.reward))
    assert float(raw.done) == {"Ant": 0.0, "Hopper": 1.0}[type(real.env).__name__]
    assert float(s1.done) == 1.0 and float(s1.reward) == 0.0 and float(s1.metrics["nan_steps"]) == 1.0
    assert not np.all(np.isfinite(s1.obs))  # physics never hides a NaN


def test_action_shape_is_checked_at_trace_time() -> None:
    env = brax_envs.get_environment("ant")
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    s0 = jax.eval_shape(env.reset, keys[0])
    msg = r"Ant.step: action has shape \(7,\), expected \(8,\) \(env.action_size\)"
    with pytest.raises(ValueError, match=msg):
        env.step(s0, jnp.zeros((7,), jnp.float32))
    with pytest.raises(ValueError, match=msg):
        jax.jit(env.step).lower(s0, jnp.zeros((7,), jnp.float32))
    with pytest.raises(ValueError, match=r"shape \(2, 8\), expected \(8,\) .*jax.vmap"):
        env.step(s0, jnp.zeros((2, 8), jnp.float32))
    # Under vmap the batch axis is vmap's; each member must be (action_size,).
    batch = jax.eval_shape(jax.vmap(env.reset), keys)
    with pytest.raises(ValueError, match=msg):
        jax.eval_shape(jax.vmap(env.step), batch, jnp.zeros((2, 7), jnp.float32))
    with pytest.raises(ValueError, match=msg):
        jax.eval_shape(wrappers.VmapWrapper(env).step, batch, jnp.zeros((2, 7), jnp.float32))
    ok = jax.eval_shape(jax.jit(jax.vmap(env.step)), batch, jnp.zeros((2, 8), jnp.int32))
    assert ok.obs.shape == (2, 27) and ok.obs.dtype == jnp.float32 and ok.metrics["nan_steps"].shape == (2,)
