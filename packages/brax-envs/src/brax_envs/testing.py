"""Conformance kit for environments: `check_env(env)` asserts the `Env` contract.

Every environment's test calls it. It raises `AssertionError` with a message naming what broke.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from brax_envs.base import Env, State, observation_size_of


def _np_leaves(tree: Any) -> list[tuple[str, np.ndarray]]:
    out = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        if jnp.issubdtype(jnp.result_type(leaf), jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        out.append((jax.tree_util.keystr(path), np.asarray(leaf)))
    return out


def _avals(tree: Any) -> list[tuple[str, Any]]:
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return [(jax.tree_util.keystr(p), jax.typeof(x)) for p, x in leaves]


def _check_structure(env: Env, state: Any, where: str, batch: tuple[int, ...] = ()) -> None:
    """The state's types, shapes and dtypes (concrete or abstract, as `jax.eval_shape` gives)."""
    assert isinstance(state, State), f"{where}: expected brax_envs.State, got {type(state).__name__}"
    size = env.observation_size
    obs = state.obs
    if batch:
        for leaf in jax.tree.leaves(state.obs):
            assert leaf.shape[:len(batch)] == batch, \
                f"{where}: obs leaf shape {leaf.shape} lacks batch {batch}"
        obs = jax.tree.map(lambda x: np.empty(x.shape[len(batch):], x.dtype), obs)  # one member's shapes
    got = observation_size_of(obs)
    if isinstance(size, Mapping):
        assert isinstance(got, Mapping) and dict(got) == dict(size), \
            f"{where}: observation shapes {got} != observation_size {size}"
    else:
        assert got == size, f"{where}: observation shape gives {got}, observation_size is {size}"
    for name in ("reward", "done"):
        val = getattr(state, name)
        assert isinstance(val, jax.Array | jax.ShapeDtypeStruct), \
            f"{where}: {name} is {type(val).__name__}, not a jax.Array"
        assert val.shape == batch, f"{where}: {name} shape {val.shape} != {batch}"
        assert val.dtype == jnp.float32, f"{where}: {name} dtype {val.dtype} != float32"
    assert isinstance(state.metrics, dict), f"{where}: metrics is {type(state.metrics).__name__}, not dict"
    assert isinstance(state.info, dict), f"{where}: info is {type(state.info).__name__}, not dict"
    for k, v in state.metrics.items():
        assert isinstance(k, str), f"{where}: metric key {k!r} is not a str"
        assert jnp.shape(v) == batch, f"{where}: metrics[{k!r}] shape {jnp.shape(v)} != {batch}"


def _check_state(env: Env, state: Any, where: str, batch: tuple[int, ...] = ()) -> None:
    """The state's structure, `done` in {0, 1} and finite floating-point leaves."""
    _check_structure(env, state, where, batch)
    done = np.asarray(state.done)
    assert np.all((done == 0) | (done == 1)), f"{where}: done values {done} not in {{0, 1}}"
    for part in ("pipeline_state", "obs", "reward", "done", "metrics", "info"):
        for name, leaf in _np_leaves(getattr(state, part)):
            if np.issubdtype(leaf.dtype, np.inexact):
                assert np.all(np.isfinite(leaf)), f"{where}: non-finite values in {part}{name}"


class EnvCheck(NamedTuple):
    """What `check_env` built, for reuse by further tests (saves recompiling)."""

    reset: Callable[[jax.Array], State]
    """`jax.jit(env.reset)`."""
    step: Callable[[State, jax.Array], State]
    """`jax.jit(env.step)`."""
    states: list[State]
    """The checked rollout: the reset state, then one state per step."""
    actions: list[jax.Array]
    """The actions of the rollout."""


def check_env(env: Env, *, num_steps: int = 3, batch_size: int = 2, seed: int = 0,
              action_fn: Callable[[jax.Array, int], jax.Array] | None = None,
              rtol: float = 1e-4, atol: float = 1e-5,
              vmap: Literal["compile", "trace"] = "compile") -> EnvCheck:
    """Assert that `env` (unbatched, unwrapped or not) honours the `Env` contract.

    Checks: `reset`/`step` trace once under `jax.jit` across resets with other keys and
    `num_steps` steps (a retrace means reset and step states differ in structure or dtypes);
    states are `State`s with finite leaves, observations match `observation_size`, `reward` and
    `done` are float32 scalars with done in {0, 1}, metrics are scalars; results are identical
    for the same key and actions; `jax.vmap` over `batch_size` members works and member 0 matches
    the unbatched run within `rtol` and `atol` times the leaf's largest magnitude (at least 1).
    Actions come from `action_fn(key, action_size)` (default uniform in [-1, 1]). Returns the
    jitted functions and the rollout (`EnvCheck`).
    """
    size = env.action_size
    assert isinstance(size, int) and size > 0, f"action_size must be a positive int, got {size!r}"
    obs_size = env.observation_size
    assert obs_size is not None, "observation_size is None"

    def sample(key: jax.Array) -> jax.Array:
        if action_fn is not None:
            return action_fn(key, size)
        return jax.random.uniform(key, (size,), jnp.float32, -1.0, 1.0)

    traces = {"reset": 0, "step": 0}

    def reset_fn(rng: jax.Array) -> State:
        traces["reset"] += 1
        return env.reset(rng)

    def step_fn(state: State, action: jax.Array) -> State:
        traces["step"] += 1
        return env.step(state, action)

    reset_j, step_j = jax.jit(reset_fn), jax.jit(step_fn)
    key = jax.random.PRNGKey(seed)
    key_reset, key_act, key_other = jax.random.split(key, 3)
    actions = [sample(k) for k in jax.random.split(key_act, num_steps)]
    for a in actions:
        assert a.shape == (size,), f"action_fn returned shape {a.shape}, expected ({size},)"

    def rollout() -> list[State]:
        states = [reset_j(key_reset)]
        for a in actions:
            states.append(step_j(states[-1], a))
        return states

    states = rollout()
    reset_avals = _avals(states[0])
    for i, s in enumerate(states):
        where = "reset" if i == 0 else f"step {i}"
        _check_state(env, s, where)
        if i:
            assert _avals(s) == reset_avals, (
                f"{where}: state structure/dtypes differ from reset's (step would retrace):\n"
                f"reset: {reset_avals}\n{where}: {_avals(s)}")
    reset_j(key_other)
    assert traces == {"reset": 1, "step": 1}, f"retraced under jit: trace counts {traces}"

    again = rollout()
    for i, (s1, s2) in enumerate(zip(states, again, strict=True)):
        for (name, a1), (_, a2) in zip(_np_leaves(s1), _np_leaves(s2), strict=True):
            assert np.array_equal(a1, a2, equal_nan=True), f"not deterministic at state {i}: leaf {name}"

    if vmap not in ("compile", "trace"):
        raise ValueError(f"check_env: vmap must be 'compile' or 'trace', got {vmap!r}")
    keys = jax.random.split(key_reset, batch_size)
    acts = jnp.stack([actions[0]] * batch_size)
    # Batched through the jitted functions: vmap batches their traced programs instead of tracing
    # the env's Python again (the same batched program, at about half the trace time).
    vmap_reset, vmap_step = jax.vmap(reset_j), jax.vmap(step_j)
    if vmap == "trace":
        abstract = [jax.eval_shape(vmap_reset, keys)]
        abstract.append(jax.eval_shape(vmap_step, abstract[0], acts))
        batched = [(name, (batch_size, *aval.shape), aval.dtype) for name, aval in reset_avals]
        for i, vs in enumerate(abstract):
            where = f"vmap {'reset' if i == 0 else 'step'}"
            _check_structure(env, vs, where, batch=(batch_size,))
            got = [(name, aval.shape, aval.dtype) for name, aval in _avals(vs)]
            assert got == batched, f"{where}: batched structure differs from the unbatched one"
        return EnvCheck(reset=reset_j, step=step_j, states=states, actions=actions)
    vreset, vstep = jax.jit(vmap_reset), jax.jit(vmap_step)
    vstates = [vreset(keys)]
    vstates.append(vstep(vstates[0], acts))
    single = [reset_j(keys[0])]
    single.append(step_j(single[0], actions[0]))
    for i, (vs, s) in enumerate(zip(vstates, single, strict=True)):
        where = f"vmap {'reset' if i == 0 else 'step'}"
        _check_state(env, vs, where, batch=(batch_size,))
        member0 = jax.tree.map(lambda x: x[0], vs)
        for (name, a1), (_, a2) in zip(_np_leaves(member0), _np_leaves(s), strict=True):
            if np.issubdtype(a1.dtype, np.inexact):
                # vmap reorders float32 reductions, so entries that mix others (a mass-matrix solve)
                # differ by round-off of the array's largest entry, not of their own.
                scale = float(np.max(np.abs(a2), initial=0.0, where=np.isfinite(a2)))
                np.testing.assert_allclose(a1, a2, rtol=rtol, atol=atol * max(1.0, scale),
                                           err_msg=f"{where} member 0 {name}")
            else:
                assert np.array_equal(a1, a2), f"{where} member 0 differs from unbatched at {name}"
    assert traces == {"reset": 1, "step": 1}, f"retraced under jit: trace counts {traces}"
    return EnvCheck(reset=reset_j, step=step_j, states=states, actions=actions)


__all__ = ["EnvCheck", "check_env"]
