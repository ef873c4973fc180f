"""dm_control as the oracle of our suite tasks (used by the tests; needs the dm-control extra).

For states along random-action rollouts of dm_control's own environment, our task's observation,
reward and termination must equal dm_control's `get_observation`, `get_reward` and
`get_termination`. Our state is built from dm_control's physics just before the last physics
substep of each control step and advanced by one physics step of ours, so that acceleration-stage
sensors (touch, force, accelerometer), which dm_control's legacy step leaves from the last
substep's start, are compared too; positions and velocities then differ by one float32 step.
Our initial-state distribution is compared with dm_control's by per-coordinate moments.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import brax_physics
import jax
import jax.numpy as jnp
import numpy as np

from brax_envs.dm_control._suite import SuiteEnv, suite_module


class Sample(NamedTuple):
    """One control step of dm_control: the physics before its last substep, the action, the results."""

    qpos: np.ndarray
    qvel: np.ndarray
    act: np.ndarray
    qacc_warmstart: np.ndarray
    mocap_pos: np.ndarray
    mocap_quat: np.ndarray
    action: np.ndarray
    task_info: dict[str, np.ndarray]
    obs: dict[str, np.ndarray]
    reward: float
    terminated: bool


def dm_env(domain: str, task: str, seed: int) -> Any:
    """dm_control's environment of `domain`-`task` with task seed `seed`."""
    return suite_module("").load(domain, task, task_kwargs={"random": seed})


def samples(env: SuiteEnv, domain: str, task: str, *, steps: int, seed: int = 0,
            action_scale: float = 1.0, episodes: int = 1) -> list[Sample]:
    """`steps` control steps of random actions (uniform in the action spec times `action_scale`)
    in each of `episodes` dm_control episodes."""
    dm = dm_env(domain, task, seed)
    rng = np.random.default_rng(seed)
    spec = dm.action_spec()
    n_sub = env.n_frames
    out = []
    for _ in range(episodes):
        dm.reset()
        physics, t = dm.physics, dm.task
        for _ in range(steps):
            action = rng.uniform(spec.minimum, spec.maximum) * action_scale
            t.before_step(action, physics)
            if n_sub > 1:
                physics.step(n_sub - 1)
            d = physics.data
            before = (d.qpos.copy(), d.qvel.copy(), d.act.copy(), d.qacc_warmstart.copy(), d.mocap_pos.copy(),
                      d.mocap_quat.copy())
            physics.step()
            t.after_step(physics)
            info = {k: np.asarray(v) for k, v in env.task_info_from_physics(physics).items()}
            obs = {k: np.asarray(v, np.float64) for k, v in t.get_observation(physics).items()}
            term = t.get_termination(physics)
            reward = float(t.get_reward(physics))
            out.append(Sample(*before, np.asarray(action, np.float64), info, obs, reward,
                              term is not None))
    return out


def each(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` of one sample applied to each of a batch (leading axis) in turn, `jax.lax.map`: the oracle
    compares samples, not batching, and a mapped program skips vmap's batching of the physics
    (seconds of tracing per program, and while loops that run every sample for the slowest one)."""
    def mapped(*args: Any) -> Any:
        return jax.lax.map(lambda a: fn(*a), args)

    return mapped


@jax.jit
def _physics_step(sys: brax_physics.System, q: jax.Array, qd: jax.Array, act: jax.Array, warm: jax.Array,
                  mocap_pos: jax.Array, mocap_quat: jax.Array, action: jax.Array) -> brax_physics.State:
    """One physics step of ours from each of a batch of dm_control's states.

    The model is an argument, not a constant: the tasks of a domain share one compiled program.
    """
    def run(q: jax.Array, qd: jax.Array, act: jax.Array, warm: jax.Array, mocap_pos: jax.Array,
            mocap_quat: jax.Array, action: jax.Array) -> brax_physics.State:
        ps = brax_physics.init(sys, q, qd, activation=act)
        ps = ps.replace(qacc_warmstart=warm, mocap_pos=mocap_pos, mocap_quat=mocap_quat)
        return brax_physics.step(sys, ps, action)

    state: brax_physics.State = each(run)(q, qd, act, warm, mocap_pos, mocap_quat, action)
    return state


@functools.cache
def _readout(env: SuiteEnv) -> Callable[..., Any]:
    """The task's observation, reward and termination of each of a batch of physics states."""
    def run(ps: brax_physics.State, action: jax.Array, info: dict[str, jax.Array]) -> Any:
        return env._observe(ps, info), env.reward(ps, info, action), env.termination(ps, info)

    return jax.jit(each(run))


@functools.cache
def _placed_mocap(env: SuiteEnv) -> Callable[..., tuple[jax.Array, jax.Array]]:
    """The task's mocap poses of each of a batch: for mocap bodies of ours that are static in
    dm_control's model."""
    def run(q: jax.Array, qd: jax.Array, info: dict[str, jax.Array]) -> tuple[jax.Array, jax.Array]:
        placed = env.pipeline_state_init(q, qd, info)
        return placed.mocap_pos, placed.mocap_quat

    return jax.jit(each(run))


@functools.cache
def _draws(env: SuiteEnv) -> Callable[[jax.Array], tuple[jax.Array, jax.Array, dict[str, jax.Array]]]:
    return jax.jit(each(env.initial_state))


def initial_draws(env: SuiteEnv, keys: jax.Array) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
    """(q, qd, task info) of `env.initial_state` for each of `keys` (n, ...), compiled once per env."""
    return _draws(env)(keys)


def ours(env: SuiteEnv, batch: list[Sample]) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Our observations, rewards and terminations for dm_control's samples (two programs: the model's
    physics step, shared by its tasks, then the task's readout)."""
    def stack(xs: list[np.ndarray]) -> jax.Array:
        return jnp.asarray(np.stack(xs), jnp.float32)

    info = {k: stack([s.task_info[k] for s in batch]) for k in batch[0].task_info}
    q, qd = stack([s.qpos for s in batch]), stack([s.qvel for s in batch])
    mocap_pos, mocap_quat = stack([s.mocap_pos for s in batch]), stack([s.mocap_quat for s in batch])
    if mocap_pos.shape[1] != env.sys.nmocap:  # the task places them
        mocap_pos, mocap_quat = _placed_mocap(env)(q, qd, info)
    action = stack([s.action for s in batch])
    act, warm = stack([s.act for s in batch]), stack([s.qacc_warmstart for s in batch])
    ps = _physics_step(env.sys, q, qd, act, warm, mocap_pos, mocap_quat, action)
    obs, rew, term = _readout(env)(ps, action, info)
    return ({k: np.asarray(v, np.float64) for k, v in obs.items()}, np.asarray(rew, np.float64),
            np.asarray(term, np.float64))


def check(env: SuiteEnv, batch: list[Sample], *, atol: float = 1e-5, rtol: float = 1e-5,
          obs_tol: dict[str, tuple[float, float]] | None = None, reward_atol: float | None = None) -> None:
    """Assert that ours equals dm_control on every sample: observation keys, shapes and values,
    reward, termination (`obs_tol`: (atol, rtol) per key where one float32 step moves it more)."""
    obs, rew, term = ours(env, batch)
    want_keys = list(batch[0].obs)
    assert list(obs) == want_keys, f"observation keys {list(obs)} != dm_control's {want_keys}"
    for k in want_keys:
        want = np.stack([np.asarray(s.obs[k], np.float64).reshape(np.shape(s.obs[k])) for s in batch])
        got = obs[k]
        assert got.shape == want.shape, (
            f"observation {k!r}: shape {got.shape[1:]} != dm_control's {want.shape[1:]}")
        a, r = (obs_tol or {}).get(k, (atol, rtol))
        err = np.abs(got - want) - (a + r * np.abs(want))
        i = np.unravel_index(np.argmax(err), err.shape)
        assert err.max() <= 0, (f"observation {k!r}: ours {got[i]} vs dm_control {want[i]} at {i} "
                                f"(tolerance {a} + {r}·|x|)")
    want_r = np.asarray([s.reward for s in batch])
    ra = atol if reward_atol is None else reward_atol
    err = np.abs(rew - want_r) - (ra + rtol * np.abs(want_r))
    worst = int(np.argmax(err))
    assert err.max() <= 0, f"reward: ours {rew[worst]} vs dm_control {want_r[worst]} at sample {worst}"
    want_t = np.asarray([s.terminated for s in batch], np.float64)
    assert np.array_equal(term, want_t), f"termination: ours {term} vs dm_control {want_t}"


def initial_states(env: SuiteEnv, domain: str, task: str, n: int, seed: int = 0,
                   info_keys: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
    """(n, ...) qpos, qvel and the task-info entries `info_keys` of dm_control's first `n` episodes."""
    dm = dm_env(domain, task, seed)
    out: dict[str, list[np.ndarray]] = {"qpos": [], "qvel": [], **{k: [] for k in info_keys}}
    for _ in range(n):
        dm.reset()
        out["qpos"].append(dm.physics.data.qpos.copy())
        out["qvel"].append(dm.physics.data.qvel.copy())
        info = env.task_info_from_physics(dm.physics) if info_keys else {}
        for k in info_keys:
            out[k].append(np.asarray(info[k], np.float64))
    return {k: np.stack(v).reshape(n, -1) for k, v in out.items()}


def check_initial_distribution(env: SuiteEnv, domain: str, task: str, n: int = 256, seed: int = 0,
                               z: float = 5.0, spread: tuple[float, float] = (0.75, 1.33), *,
                               info_keys: tuple[str, ...] = ()) -> None:
    """Assert that our resets draw q, qd and the task-info entries `info_keys` (targets) from dm_control's
    distribution: per coordinate, the means agree within `z` standard errors, the standard deviations
    within the ratio `spread`, and ours stay within dm_control's observed range widened by a third of
    its width. The draws are `initial_state`'s, at which `reset` starts the physics (`suite_test`
    checks that), so no physics step compiles here (only the collision of a domain whose draw searches
    for a pose without contacts)."""
    want = initial_states(env, domain, task, n, seed, info_keys)
    keys = jax.random.split(jax.random.key(seed), n)
    q, qd, info = initial_draws(env, keys)
    got = {"qpos": q, "qvel": qd, **{k: info[k] for k in info_keys}}
    for name, w_all in want.items():
        g_all = np.asarray(got[name], np.float64).reshape(n, -1)
        assert g_all.shape == w_all.shape, f"{name}: shape {g_all.shape} != dm_control's {w_all.shape}"
        for j in range(w_all.shape[1]):
            g, w = g_all[:, j], w_all[:, j]
            sw, sg = w.std(), g.std()
            se = np.sqrt((sw ** 2 + sg ** 2) / n) + 1e-6
            assert abs(g.mean() - w.mean()) <= z * se, (
                f"{name}[{j}]: mean {g.mean():.4g} vs dm_control's {w.mean():.4g} (std err {se:.2g})")
            if sw < 1e-6:
                assert sg < 1e-5, (
                    f"{name}[{j}]: ours spreads ({sg:.3g}) where dm_control's is fixed at {w.mean():.4g}")
                continue
            ratio = sg / sw
            assert spread[0] <= ratio <= spread[1], f"{name}[{j}]: std {sg:.4g} vs dm_control's {sw:.4g}"
            width = w.max() - w.min()
            lo, hi = w.min() - width / 3, w.max() + width / 3
            assert g.min() >= lo and g.max() <= hi, (
                f"{name}[{j}]: ours spans [{g.min():.4g}, {g.max():.4g}], "
                f"dm_control's [{w.min():.4g}, {w.max():.4g}]")
