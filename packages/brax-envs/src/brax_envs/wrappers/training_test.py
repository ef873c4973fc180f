"""Tests of the training wrappers with asserted values."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import brax_physics
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from brax_envs import State, wrappers
from brax_envs.base import Env, PipelineEnv
from brax_envs.envs import Fast, PendulumSwingup
from brax_envs.wrappers.training import _SYS_KEY_SALT, _split_keys


class CounterEnv(Env):
    """Test env: obs [t, c] with t the step count and c drawn at reset; reward 1; done at `terminate_at`.

    An action above `poison_above` makes the next physics state NaN (an env that injects a NaN).
    """

    def __init__(self, terminate_at: int = 100, poison_above: float = float("inf")) -> None:
        self.terminate_at = terminate_at
        self.poison_above = poison_above

    def reset(self, rng: jax.Array) -> State:
        c = jax.random.uniform(rng, (), jnp.float32)
        x = jnp.stack([jnp.zeros((), jnp.float32), c])
        zero = jnp.zeros((), jnp.float32)
        return State(x, x, zero, zero, {"two": zero}, {"truncation": zero})

    def step(self, state: State, action: jax.Array) -> State:
        x = state.pipeline_state.at[0].add(1.0)
        x = jnp.where(action[0] > self.poison_above, jnp.full_like(x, jnp.nan), x)
        done = (x[0] >= self.terminate_at).astype(jnp.float32)
        return state.replace(pipeline_state=x, obs=x, reward=jnp.ones((), jnp.float32), done=done,
                             metrics={"two": jnp.full((), 2.0, jnp.float32)})

    @property
    def action_size(self) -> int:
        return 1


def _run_with(step: Callable[[State, jax.Array], State], state: State, actions: list[Any]) -> list[State]:
    out = []
    for a in actions:
        state = step(state, jnp.asarray(a, jnp.float32))
        out.append(state)
    return out


def _run(env: Env, state: State, actions: list[Any]) -> list[State]:
    return _run_with(jax.jit(env.step), state, actions)


def test_episode_wrapper_counts_truncates_and_accumulates() -> None:
    env = wrappers.EpisodeWrapper(CounterEnv(), episode_length=3)
    s0 = jax.jit(env.reset)(jax.random.PRNGKey(0))
    assert int(s0.info["steps"]) == 0 and float(s0.info["truncation"]) == 0.0
    states = _run(env, s0, [[0.0]] * 4)
    assert [int(s.info["steps"]) for s in states] == [1, 2, 3, 4]
    assert [float(s.done) for s in states] == [0.0, 0.0, 1.0, 1.0]
    assert [float(s.info["truncation"]) for s in states] == [0.0, 0.0, 1.0, 1.0]
    em = states[2].info["episode_metrics"]
    assert float(em["sum_reward"]) == 3.0 and float(em["length"]) == 3.0 and float(em["two"]) == 6.0
    assert float(states[2].info["episode_done"]) == 1.0
    # Without auto-reset the next step starts a new episode's statistics from zero.
    em = states[3].info["episode_metrics"]
    assert float(em["sum_reward"]) == 1.0 and float(em["length"]) == 1.0


def test_episode_wrapper_termination_is_not_truncation() -> None:
    env = wrappers.EpisodeWrapper(CounterEnv(terminate_at=3), episode_length=3)
    states = _run(env, env.reset(jax.random.PRNGKey(0)), [[0.0]] * 3)
    assert float(states[2].done) == 1.0
    assert float(states[2].info["truncation"]) == 0.0  # terminated exactly at the limit


def test_episode_wrapper_action_repeat_sums_and_stops_at_termination() -> None:
    env = wrappers.EpisodeWrapper(CounterEnv(terminate_at=3), episode_length=10, action_repeat=2)
    states = _run(env, env.reset(jax.random.PRNGKey(0)), [[0.0]] * 2)
    assert float(states[0].reward) == 2.0 and float(states[0].obs[0]) == 2.0
    assert [int(s.info["steps"]) for s in states] == [2, 4]
    # The second call terminates on its first repeat: one reward, the state stays terminal.
    assert float(states[1].reward) == 1.0 and float(states[1].obs[0]) == 3.0 and float(states[1].done) == 1.0
    em = states[1].info["episode_metrics"]
    assert float(em["sum_reward"]) == 3.0 and float(em["length"]) == 3.0

    fast = Fast()
    rep = wrappers.EpisodeWrapper(fast, episode_length=10, action_repeat=2)
    a = jnp.array([0.5], jnp.float32)
    s = rep.step(rep.reset(jax.random.PRNGKey(1)), a)
    m1 = fast.step(fast.reset(jax.random.PRNGKey(1)), a)
    m2 = fast.step(m1, a)
    np.testing.assert_allclose(s.obs, m2.obs, rtol=1e-6)
    np.testing.assert_allclose(s.reward, m1.reward + m2.reward, rtol=1e-6)


def test_episode_wrapper_rejects_bad_lengths() -> None:
    with pytest.raises(ValueError, match="episode_length"):
        wrappers.EpisodeWrapper(Fast(), episode_length=0)
    with pytest.raises(ValueError, match="action_repeat"):
        wrappers.EpisodeWrapper(Fast(), episode_length=5, action_repeat=0)


def test_vmap_wrapper_shapes() -> None:
    env = wrappers.VmapWrapper(Fast(), batch_size=3)
    s = env.reset(jax.random.PRNGKey(0))
    assert s.obs.shape == (3, 2) and s.reward.shape == (3,) and s.done.shape == (3,)
    assert len(set(np.asarray(s.obs[:, 0]).tolist())) == 3  # members drew different keys
    s = env.step(s, jnp.ones((3, 1), jnp.float32))
    assert s.obs.shape == (3, 2) and s.metrics["reward_distance"].shape == (3,)
    assert env.observation_size == 2 and env.action_size == 1
    unbatched = wrappers.VmapWrapper(Fast())
    assert unbatched.reset(jax.random.split(jax.random.PRNGKey(0), 4)).obs.shape == (4, 2)


def _training_counter(fresh: bool, **kw: Any) -> tuple[Env, State]:
    env = wrappers.wrap_for_training(CounterEnv(**kw), episode_length=2, fresh_reset=fresh)
    return env, jax.jit(env.reset)(jax.random.split(jax.random.PRNGKey(0), 2))


def test_auto_reset_restores_first_state_and_keeps_final_obs() -> None:
    env, s0 = _training_counter(fresh=False)
    states = _run(env, s0, [[[0.0], [0.0]]] * 3)
    s2 = states[1]
    np.testing.assert_array_equal(s2.done, [1.0, 1.0])
    np.testing.assert_array_equal(s2.info["truncation"], [1.0, 1.0])
    np.testing.assert_array_equal(s2.obs, s0.obs)  # back to the cached first observation
    np.testing.assert_array_equal(s2.pipeline_state, s0.pipeline_state)
    np.testing.assert_array_equal(s2.info["final_obs"][:, 0], [2.0, 2.0])  # the terminal observation
    np.testing.assert_array_equal(s2.info["final_obs"][:, 1], s0.obs[:, 1])
    np.testing.assert_array_equal(states[0].info["final_obs"], states[0].obs)
    # The next step starts a new episode: counters restart.
    np.testing.assert_array_equal(states[2].info["steps"], [1, 1])
    np.testing.assert_array_equal(states[2].done, [0.0, 0.0])
    np.testing.assert_array_equal(states[2].info["truncation"], [0.0, 0.0])  # old limit not re-reported
    np.testing.assert_array_equal(states[2].info["episode_metrics"]["sum_reward"], [1.0, 1.0])


def test_truncation_marks_only_time_limit_steps_across_episodes() -> None:
    # CounterEnv carries `info` through its step unchanged, as most envs do: every later episode
    # must still be truncated exactly at its own limit (a stale flag would silence learning).
    env = wrappers.wrap_for_training(CounterEnv(), episode_length=3)
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    states = _run(env, jax.jit(env.reset)(keys), [[[0.0], [0.0]]] * 10)
    assert [float(s.info["truncation"][0]) for s in states] == [0, 0, 1] * 3 + [0]
    assert [float(s.done[0]) for s in states] == [0, 0, 1] * 3 + [0]
    term = wrappers.wrap_for_training(CounterEnv(terminate_at=2), episode_length=3)
    states = _run(term, jax.jit(term.reset)(keys), [[[0.0], [0.0]]] * 6)
    assert [float(s.info["truncation"][0]) for s in states] == [0] * 6  # terminations, never truncations
    assert [float(s.done[0]) for s in states] == [0, 1] * 3


def test_auto_reset_fresh_draws_new_states() -> None:
    env, s0 = _training_counter(fresh=True)
    states = _run(env, s0, [[[0.0], [0.0]]] * 4)
    s2, s4 = states[1], states[3]
    np.testing.assert_array_equal(s2.obs[:, 0], [0.0, 0.0])
    np.testing.assert_array_equal(s2.info["final_obs"][:, 0], [2.0, 2.0])
    c0, c2, c4 = (np.asarray(s.obs[:, 1]) for s in (s0, s2, s4))
    assert not np.any(c2 == c0) and not np.any(c4 == c2)  # every episode starts differently
    assert c2[0] != c2[1]
    # The restart is exactly a reset with the key carried in info.
    key_now, _ = _split_keys(states[0].info["reset_rng"])
    expected = jax.vmap(CounterEnv().reset)(key_now)
    np.testing.assert_array_equal(s2.obs, expected.obs)


def test_auto_reset_fresh_with_typed_keys() -> None:
    env = wrappers.AutoResetWrapper(wrappers.VmapWrapper(wrappers.EpisodeWrapper(CounterEnv(), 1)),
                                    fresh_reset=True)
    s0 = env.reset(jax.random.split(jax.random.key(3), 2))
    s1 = env.step(s0, jnp.zeros((2, 1), jnp.float32))
    assert s1.info["reset_rng"].shape == (2,)
    assert not np.any(np.asarray(s1.obs[:, 1]) == np.asarray(s0.obs[:, 1]))


def test_auto_reset_chunked_fresh_resets_match_whole_batch() -> None:
    def stack(chunks: int) -> Env:
        inner = wrappers.EpisodeWrapper(wrappers.NanGuardWrapper(CounterEnv(poison_above=0.5)), 100)
        return wrappers.AutoResetWrapper(wrappers.VmapWrapper(inner), fresh_reset=True, reset_chunks=chunks)

    # 5 envs; 3, then 4 (two overlapping slices of 3), then 0 finish.
    actions = [[[1.0], [0.0], [1.0], [0.0], [1.0]], [[1.0], [1.0], [1.0], [1.0], [0.0]], [[0.0]] * 5]
    keys = jax.random.split(jax.random.PRNGKey(2), 5)
    whole, sliced = (_run(env, jax.jit(env.reset)(keys), actions) for env in (stack(1), stack(2)))
    for a, b in zip(whole, sliced, strict=True):
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
            np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(sliced[1].done, [1, 1, 1, 1, 0])
    np.testing.assert_array_equal(sliced[1].obs[:4, 0], [0, 0, 0, 0])  # restarted
    assert len(set(np.asarray(sliced[1].obs[:, 1]).tolist())) == 5  # each from its own key
    with pytest.raises(ValueError, match="reset_chunks"):
        wrappers.AutoResetWrapper(Fast(), fresh_reset=True, reset_chunks=0)


def test_nan_containment_counts_and_recovers() -> None:
    env, s0 = _training_counter(fresh=False, poison_above=0.5)
    states = _run(env, s0, [[[0.0], [1.0]], [[0.0], [0.0]], [[jnp.nan], [0.0]]])
    s1, s2, s3 = states
    np.testing.assert_array_equal(s1.done, [0.0, 1.0])
    np.testing.assert_array_equal(s1.metrics["nan_steps"], [0.0, 1.0])
    np.testing.assert_array_equal(s1.info["nan_steps_total"], [0, 1])
    np.testing.assert_array_equal(s1.reward, [1.0, 0.0])
    np.testing.assert_array_equal(s1.info["truncation"], [0.0, 0.0])  # a failure, not a time limit
    np.testing.assert_array_equal(s1.info["episode_metrics"]["nan_steps"], [0.0, 1.0])
    for s in states:
        assert np.all(np.isfinite(s.obs)) and np.all(np.isfinite(s.info["final_obs"]))
        assert np.all(np.isfinite(s.reward)) and np.all(np.isfinite(np.asarray(s.pipeline_state)))
    np.testing.assert_array_equal(s1.obs[1], s0.obs[1])  # auto-reset recovered member 1
    np.testing.assert_array_equal(s1.obs[0, 0], 1.0)  # member 0 was not reset
    np.testing.assert_array_equal(s2.obs[:, 0], [0.0, 1.0])  # member 0 hit the time limit; 1 runs again
    np.testing.assert_array_equal(s2.done, [1.0, 0.0])
    # A NaN action is contained the same way; the cumulative counter survives resets.
    np.testing.assert_array_equal(s3.done, [1.0, 1.0])  # member 0: NaN action; member 1: time limit
    np.testing.assert_array_equal(s3.metrics["nan_steps"], [1.0, 0.0])
    np.testing.assert_array_equal(s3.info["nan_steps_total"], [1, 1])


def test_eval_wrapper_tracks_first_episode() -> None:
    env = wrappers.EvalWrapper(wrappers.wrap_for_training(CounterEnv(terminate_at=3), episode_length=5))
    s = _run(env, env.reset(jax.random.split(jax.random.PRNGKey(0), 2)), [[[0.0], [0.0]]] * 5)[-1]
    em = s.info["eval_metrics"]
    np.testing.assert_array_equal(em.episode_metrics["reward"], [3.0, 3.0])
    np.testing.assert_array_equal(em.episode_metrics["two"], [6.0, 6.0])
    np.testing.assert_array_equal(em.episode_steps, [3.0, 3.0])
    np.testing.assert_array_equal(em.active_episodes, [0.0, 0.0])


# ---------------------------------------------------------------- domain randomization

def _randomize_mass(sys: brax_physics.System, rng: jax.Array) -> tuple[brax_physics.System, Any]:
    """Reads `sys` fields inside jax.vmap (the pattern that leaks tracers with a mutating wrapper)."""
    @jax.vmap
    def one(key: jax.Array) -> jax.Array:
        return sys.body_mass * jax.random.uniform(key, (), jnp.float32, 0.5, 2.0)

    in_axes = jax.tree.map(lambda _: None, sys).replace(body_mass=0)
    return sys.replace(body_mass=one(rng)), in_axes


@pytest.fixture(scope="module")
def pendulum() -> PendulumSwingup:
    return PendulumSwingup(reset_angle_range=0.5, n_frames=1)


_BATCH = 2
_RAND_KEYS = jax.random.split(jax.random.PRNGKey(7), _BATCH)


class DRRun:
    """A jitted domain-randomized training env and a short rollout, shared by the DR tests."""

    def __init__(self, pendulum: PendulumSwingup) -> None:
        self.env = wrappers.wrap_for_training(
            pendulum, episode_length=50, randomization_fn=functools.partial(_randomize_mass, rng=_RAND_KEYS))
        self.reset, self.step = jax.jit(self.env.reset), jax.jit(self.env.step)
        self.s0 = self.reset(jnp.stack([jax.random.PRNGKey(1)] * _BATCH))  # same start for every member
        s = self.s0
        for _ in range(3):
            s = self.step(s, jnp.ones((_BATCH, 1), jnp.float32))
        self.s3 = s


@pytest.fixture(scope="module")
def dr_run(pendulum: PendulumSwingup) -> DRRun:
    return DRRun(pendulum)


def test_domain_randomization_steps_each_member_with_its_system(pendulum: PendulumSwingup,
                                                                dr_run: DRRun) -> None:
    env, s0, s = dr_run.env, dr_run.s0, dr_run.s3
    assert isinstance(env, wrappers.AutoResetWrapper)
    dr = env.env
    assert isinstance(dr, wrappers.DomainRandomizationVmapWrapper) and dr.batch_size == _BATCH
    masses = np.asarray(dr.batched_sys.body_mass[:, 1])
    assert masses[0] != masses[1] and np.all((masses >= 0.5) & (masses <= 2.0))
    np.testing.assert_array_equal(s0.obs[0], s0.obs[1])
    q = np.asarray(s.pipeline_state.q[:, 0])
    assert q[0] != q[1]  # same start and actions, different masses

    reset = jax.jit(lambda sys, k: pendulum.with_sys(sys).reset(k))
    step = jax.jit(lambda sys, st, a: pendulum.with_sys(sys).step(st, a))
    for i in range(_BATCH):
        sys_i = pendulum.sys.replace(body_mass=dr.batched_sys.body_mass[i])
        st = reset(sys_i, jax.random.PRNGKey(1))  # init caches mass-dependent terms
        for _ in range(3):
            st = step(sys_i, st, jnp.ones((1,), jnp.float32))
        np.testing.assert_allclose(st.pipeline_state.q, s.pipeline_state.q[i], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(st.obs, s.obs[i], rtol=1e-5, atol=1e-6)


def test_domain_randomization_leaks_no_tracer(pendulum: PendulumSwingup, dr_run: DRRun) -> None:
    assert dr_run.env.unwrapped is pendulum
    assert not isinstance(pendulum.sys.body_mass, jax.core.Tracer)
    with jax.check_tracer_leaks():
        rand = functools.partial(_randomize_mass, rng=_RAND_KEYS)
        dr = wrappers.DomainRandomizationVmapWrapper(pendulum, rand)
        jax.eval_shape(dr.step, jax.eval_shape(dr.reset, _RAND_KEYS), jnp.zeros((_BATCH, 1), jnp.float32))
    assert not isinstance(pendulum.sys.body_mass, jax.core.Tracer)
    s = jax.jit(pendulum.reset)(jax.random.PRNGKey(0))  # the wrapped env is still usable unbatched
    assert s.obs.shape == (3,)


@pytest.mark.parametrize("separate_eval_env", [False, True])
def test_domain_randomization_with_and_without_eval_env(pendulum: PendulumSwingup, dr_run: DRRun,
                                                         separate_eval_env: bool) -> None:
    # Without a separate eval env a trainer wraps the training env's own instance a second time.
    base_eval = PendulumSwingup(reset_angle_range=0.5, n_frames=1) if separate_eval_env else pendulum
    eval_env = wrappers.EvalWrapper(wrappers.wrap_for_training(
        base_eval, episode_length=4, randomization_fn=functools.partial(_randomize_mass, rng=_RAND_KEYS)))
    reset_keys = jax.random.split(jax.random.PRNGKey(0), _BATCH)
    act = jnp.full((_BATCH, 1), 0.3, jnp.float32)
    e_step = jax.jit(eval_env.step)
    ts, es = dr_run.reset(reset_keys), jax.jit(eval_env.reset)(reset_keys)
    for _ in range(2):  # interleave training and evaluation as a trainer does
        ts, es = dr_run.step(ts, act), e_step(es, act)
    np.testing.assert_allclose(ts.obs, es.obs, rtol=1e-6)  # same systems, keys and actions
    for _ in range(3):
        es = e_step(es, act)
    em = es.info["eval_metrics"]
    np.testing.assert_array_equal(em.episode_steps, [4.0, 4.0])
    np.testing.assert_array_equal(em.active_episodes, [0.0, 0.0])
    assert np.all(np.isfinite(em.episode_metrics["reward"])) and np.all(em.episode_metrics["reward"] > 0)
    assert not isinstance(pendulum.sys.body_mass, jax.core.Tracer)
    assert not isinstance(base_eval.sys.body_mass, jax.core.Tracer)


def test_domain_randomization_two_argument_form_and_checks(pendulum: PendulumSwingup) -> None:
    keys = jax.random.split(jax.random.PRNGKey(7), 3)
    env = wrappers.wrap_for_training(pendulum, episode_length=4, randomization_fn=_randomize_mass,
                                     randomization_rng=keys)
    assert isinstance(env.env, wrappers.DomainRandomizationVmapWrapper) and env.env.batch_size == 3

    def wrong_axes(sys: brax_physics.System) -> tuple[brax_physics.System, Any]:
        sys_v, _ = _randomize_mass(sys, keys)
        return sys_v, jax.tree.map(lambda _: None, sys)

    with pytest.raises(ValueError, match="body_mass"):
        wrappers.DomainRandomizationVmapWrapper(pendulum, wrong_axes)
    with pytest.raises(AttributeError, match=r"no brax_physics\.System"):
        wrappers.DomainRandomizationVmapWrapper(Fast(), functools.partial(_randomize_mass, rng=keys))


# ---------------------------------------------------------------- per-episode domain randomization

# Slot 1 gets a NaN action at step 2 (NaN guard: done, auto-reset); slot 0 hits the time limit
# (episode_length 4) at step 3. So at step 2 only slot 1 restarts, at step 3 only slot 0.
_PE_ACTIONS = [[[0.3], [0.3]]] * 2 + [[[0.3], [float("nan")]]] + [[[0.3], [0.3]]] * 3


class PERun:
    """Per-episode and once-per-run randomized runs of `_PE_ACTIONS`, with a trace counter."""

    def __init__(self, pendulum: PendulumSwingup, per_episode: bool) -> None:
        rand: Any = _randomize_mass if per_episode else functools.partial(_randomize_mass, rng=_RAND_KEYS)
        self.env = wrappers.wrap_for_training(pendulum, episode_length=4, randomization_fn=rand,
                                              randomize_per_episode=per_episode)
        self.traces = 0

        def step(state: State, action: jax.Array) -> State:
            self.traces += 1  # a Python side effect: runs once per trace, never per call
            return self.env.step(state, action)

        self.s0 = jax.jit(self.env.reset)(jax.random.split(jax.random.PRNGKey(1), _BATCH))
        self.states = _run_with(jax.jit(step), self.s0, _PE_ACTIONS)


@pytest.fixture(scope="module")
def per_episode(pendulum: PendulumSwingup) -> PERun:
    return PERun(pendulum, per_episode=True)


def _masses(s: State) -> np.ndarray:
    return np.asarray(s.info[wrappers.RANDOMIZED_SYS_KEY]["body_mass"][:, 1])


def test_per_episode_randomization_redraws_at_each_reset(per_episode: PERun) -> None:
    s0, states = per_episode.s0, per_episode.states
    dr = per_episode.env.env
    assert isinstance(dr, wrappers.PerEpisodeDomainRandomizationVmapWrapper)
    assert dr.randomized_fields == ("body_mass",)
    assert set(s0.info[wrappers.RANDOMIZED_SYS_KEY]) == {"body_mass"}
    np.testing.assert_array_equal([float(s.done[1]) for s in states], [0, 0, 1, 0, 0, 0])
    np.testing.assert_array_equal([float(s.done[0]) for s in states], [0, 0, 0, 1, 0, 0])
    m0, m = _masses(s0), [_masses(s) for s in states]
    assert m0[0] != m0[1]  # members draw with their own reset keys
    np.testing.assert_array_equal(m[0], m0)  # within an episode the parameters stay
    np.testing.assert_array_equal(m[1], m0)
    assert m[2][1] != m0[1] and m[2][0] == m0[0]  # slot 1 restarted with a new draw; slot 0 kept its own
    assert m[3][0] != m0[0] and m[3][1] == m[2][1]  # then slot 0 restarted; slot 1 kept its second draw
    np.testing.assert_array_equal(m[5], m[3])
    assert np.all((np.stack(m) >= 0.5) & (np.stack(m) <= 2.0))
    # Slot 1's restart is a draw with its fresh reset key and a reset under the drawn System.
    key_now = _split_keys(states[1].info["reset_rng"])[0][1]
    sys_key = jax.random.fold_in(key_now, _SYS_KEY_SALT)
    pendulum = per_episode.env.unwrapped
    drawn_sys, _ = _randomize_mass(pendulum.sys, sys_key[None])
    np.testing.assert_allclose(m[2][1], drawn_sys.body_mass[0, 1], rtol=1e-6)
    reset = jax.jit(lambda sys, key: pendulum.with_sys(sys).reset(key))
    expected = reset(dr.member_sys({"body_mass": drawn_sys.body_mass[0]}), key_now)
    np.testing.assert_allclose(states[2].obs[1], expected.obs, rtol=1e-6, atol=1e-7)
    # A new System also means a new trajectory: slot 1's second episode differs from its first.
    assert not np.allclose(states[3].obs[1], states[0].obs[1])


def test_per_episode_steps_each_member_with_its_current_system(per_episode: PERun) -> None:
    dr = per_episode.env.env
    assert isinstance(dr, wrappers.PerEpisodeDomainRandomizationVmapWrapper)
    pendulum = per_episode.env.unwrapped
    assert isinstance(pendulum, PipelineEnv)

    @jax.jit
    def step(sys: brax_physics.System, ps: brax_physics.State, a: jax.Array) -> brax_physics.State:
        env = pendulum.with_sys(sys)
        assert isinstance(env, PipelineEnv)
        return env.pipeline_step(ps, a)

    before, after = per_episode.states[3], per_episode.states[4]  # no member restarts at step 4
    params = before.info[wrappers.RANDOMIZED_SYS_KEY]
    for i in range(_BATCH):
        sys_i = dr.member_sys(jax.tree.map(lambda x, i=i: x[i], params))
        ps_i = jax.tree.map(lambda x, i=i: x[i], before.pipeline_state)
        ps = step(sys_i, ps_i, jnp.asarray([0.3], jnp.float32))
        np.testing.assert_allclose(ps.q, after.pipeline_state.q[i], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(ps.qd, after.pipeline_state.qd[i], rtol=1e-5, atol=1e-6)


def test_per_episode_training_step_traces_once(per_episode: PERun) -> None:
    # Six steps over three restarts (new parameters each) compiled the step once.
    assert per_episode.traces == 1


def test_once_per_run_keeps_each_members_system(pendulum: PendulumSwingup) -> None:
    run = PERun(pendulum, per_episode=False)
    s0, states = run.s0, run.states
    assert wrappers.RANDOMIZED_SYS_KEY not in s0.info
    assert isinstance(run.env.env, wrappers.DomainRandomizationVmapWrapper)
    np.testing.assert_array_equal([float(s.done[1]) for s in states], [0, 0, 1, 0, 0, 0])
    # Restarted from the cached first state under the same System with the same actions, each
    # member's second episode repeats its first exactly.
    np.testing.assert_array_equal(states[3].obs[1], states[0].obs[1])
    np.testing.assert_array_equal(states[4].obs[1], states[1].obs[1])
    np.testing.assert_array_equal(states[4].obs[0], states[0].obs[0])
    np.testing.assert_array_equal(states[5].obs[0], states[1].obs[0])
    assert run.traces == 1


def test_per_episode_randomization_checks(pendulum: PendulumSwingup) -> None:
    with pytest.raises(ValueError, match="fresh resets"):
        wrappers.wrap_for_training(pendulum, 4, randomization_fn=_randomize_mass, randomize_per_episode=True,
                                   fresh_reset=False)
    with pytest.raises(ValueError, match="randomization_rng"):
        wrappers.wrap_for_training(pendulum, 4, randomization_fn=_randomize_mass, randomize_per_episode=True,
                                   randomization_rng=_RAND_KEYS)
    with pytest.raises(ValueError, match="needs a randomization_fn"):
        wrappers.wrap_for_training(pendulum, 4, randomize_per_episode=True)
    inner = wrappers.PerEpisodeDomainRandomizationVmapWrapper(pendulum, _randomize_mass)
    with pytest.raises(ValueError, match=r"fresh_reset=True"):
        jax.eval_shape(wrappers.AutoResetWrapper(inner).reset, _RAND_KEYS)
    fixed = functools.partial(_randomize_mass, rng=jax.random.split(jax.random.PRNGKey(0), 5))

    def ignores_keys(sys: brax_physics.System, rng: jax.Array) -> tuple[brax_physics.System, Any]:
        return fixed(sys)

    with pytest.raises(ValueError, match="one member per key"):
        wrappers.PerEpisodeDomainRandomizationVmapWrapper(pendulum, ignores_keys)

    def wrong_axes(sys: brax_physics.System, rng: jax.Array) -> tuple[brax_physics.System, Any]:
        return _randomize_mass(sys, rng)[0], jax.tree.map(lambda _: None, sys)

    with pytest.raises(ValueError, match="body_mass"):
        wrappers.PerEpisodeDomainRandomizationVmapWrapper(pendulum, wrong_axes)


class _Levels(Env):
    """Episodes of two steps (the physics state counts them); `level` and `t` count every step taken."""

    persistent_info = ("level",)

    def reset(self, rng: jax.Array) -> State:
        zero = jnp.zeros((), jnp.float32)
        return State(pipeline_state=zero, obs=jnp.zeros(1), reward=zero, done=zero,
                     info={"level": zero, "t": zero})

    def step(self, state: State, action: jax.Array) -> State:
        info = {**state.info, "level": state.info["level"] + 1, "t": state.info["t"] + 1}
        done = (state.pipeline_state + 1 >= 2).astype(jnp.float32)
        return state.replace(pipeline_state=state.pipeline_state + 1, obs=state.obs + 1, done=done, info=info)

    @property
    def action_size(self) -> int:
        return 1


@pytest.mark.parametrize(("fresh", "chunks"), [(True, 1), (True, 2), (False, 1)])
def test_persistent_info_survives_auto_resets(fresh: bool, chunks: int) -> None:
    env = wrappers.AutoResetWrapper(wrappers.VmapWrapper(_Levels()), fresh_reset=fresh, reset_chunks=chunks)
    state = env.reset(jax.random.split(jax.random.PRNGKey(0), 4))
    step = jax.jit(env.step)
    for _ in range(3):
        state = step(state, jnp.zeros((4, 1)))
    np.testing.assert_array_equal(state.info["level"], 3.0)  # carried through the restart after step 2
    np.testing.assert_array_equal(state.pipeline_state, 1.0)  # one step into the second episode
    # every other key of the environment's restarts with the episode, fresh or cached
    np.testing.assert_array_equal(state.info["t"], 1.0)


def test_declared_keys_must_be_strings() -> None:
    class Bad(_Levels):
        persistent_info = "level"  # type: ignore[assignment]

    env = wrappers.AutoResetWrapper(wrappers.VmapWrapper(Bad()), fresh_reset=True)
    state = env.reset(jax.random.split(jax.random.PRNGKey(0), 2))
    with pytest.raises(TypeError, match=r"Bad.persistent_info must be a tuple of info keys"):
        env.step(state, jnp.zeros((2, 1)))
