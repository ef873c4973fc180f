"""Wrappers that turn a single environment into a batched, auto-resetting training environment.

The usual stack, built by `wrap_for_training`, from the inside out:
`NanGuardWrapper` (contain non-finite steps) -> `EpisodeWrapper` (time limit, action repeat, episode
statistics) -> `VmapWrapper`, `DomainRandomizationVmapWrapper` or
`PerEpisodeDomainRandomizationVmapWrapper` (batch) -> `AutoResetWrapper`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import brax_physics
import jax
import jax.numpy as jnp
import numpy as np

from brax_envs.base import Env, State, Wrapper, _step_finite

RandomizationFn = Callable[..., tuple[brax_physics.System, Any]]
"""`fn(sys, rng) -> (batched_sys, in_axes)`, or `fn(sys)` with the keys already bound."""

RANDOMIZED_SYS_KEY = "randomized_sys"
"""`info` key of the per-episode randomized `System` fields (`PerEpisodeDomainRandomizationVmapWrapper`)."""

# `info` entries owned by wrappers: a fresh auto-reset never overwrites them with the reset's values.
# `RANDOMIZED_SYS_KEY` is deliberately absent: a fresh reset's new draw must replace the old episode's.
_WRAPPER_INFO_KEYS = frozenset({
    "steps", "truncation", "episode_done", "episode_metrics", "final_obs", "first_obs",
    "first_pipeline_state", "first_info", "reset_rng", "nan_steps_total", "eval_metrics",
})


def _select(pred: jax.Array, on_true: Any, on_false: Any) -> Any:
    """Leafwise `on_true if pred else on_false`; `pred`'s shape is a batch prefix of every leaf."""
    pred = pred > 0 if jnp.issubdtype(pred.dtype, jnp.floating) else pred.astype(bool)

    def sel(a: jax.Array, b: jax.Array) -> jax.Array:
        p = jnp.reshape(pred, pred.shape + (1,) * (jnp.ndim(a) - pred.ndim))
        return jnp.where(p, a, b)

    return jax.tree.map(sel, on_true, on_false)


_RESET_STREAM = 0x5EED
"""`fold_in` data that derives the auto-reset key stream from a reset key."""


def _fold_keys(rng: jax.Array, data: int) -> jax.Array:
    """`jax.random.fold_in(key, data)` for every key of `rng` (raw uint32 or typed keys, any batch shape)."""
    typed = jnp.issubdtype(rng.dtype, jax.dtypes.prng_key)
    batch = rng.shape if typed else rng.shape[:-1]
    flat = jnp.reshape(rng, (-1, *rng.shape[len(batch):]))
    out = jax.vmap(lambda k: jax.random.fold_in(k, data))(flat)
    return jnp.reshape(out, rng.shape)


def _split_keys(rng: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Two independent key arrays with `rng`'s batch shape (raw uint32 or typed keys)."""
    typed = jnp.issubdtype(rng.dtype, jax.dtypes.prng_key)
    batch = rng.shape if typed else rng.shape[:-1]
    flat = jnp.reshape(rng, (-1, *rng.shape[len(batch):]))
    pairs = jax.vmap(jax.random.split)(flat)
    rest = pairs.shape[2:]
    return jnp.reshape(pairs[:, 0], batch + rest), jnp.reshape(pairs[:, 1], batch + rest)


class EpisodeWrapper(Wrapper):
    """Time limit, action repeat and episode statistics.

    Each `step` applies the action `action_repeat` times (stopping early once the episode ends) and
    returns the summed reward. `info` gains:

    | key | meaning |
    |---|---|
    | `steps` | int32 environment steps in the episode (counting repeats) |
    | `truncation` | 1.0 when the episode hit `episode_length` without terminating, else the env's own flag |
    | `episode_done` | the `done` of this step |
    | `episode_metrics` | `sum_reward`, `length` and every metric summed over the episode so far |
    """

    def __init__(self, env: Env, episode_length: int, action_repeat: int = 1) -> None:
        """End episodes after `episode_length` env steps; repeat each action `action_repeat` times."""
        super().__init__(env)
        for name, val in (("episode_length", episode_length), ("action_repeat", action_repeat)):
            if isinstance(val, bool) or not isinstance(val, int) or val < 1:
                raise ValueError(f"{name} must be a positive int, got {val!r}")
        self.episode_length = episode_length
        self.action_repeat = action_repeat

    def reset(self, rng: jax.Array) -> State:
        """Reset the wrapped env and zero the episode counters."""
        state = self.env.reset(rng)
        zeros = jnp.zeros_like(state.reward)
        em = {"sum_reward": zeros, "length": zeros}
        em.update({k: jnp.zeros_like(v) for k, v in state.metrics.items()})
        info = {
            **state.info,
            "steps": jnp.zeros(state.reward.shape, jnp.int32),
            "truncation": zeros,
            "episode_done": zeros,
            "episode_metrics": em,
        }
        return state.replace(info=info)

    def step(self, state: State, action: jax.Array) -> State:
        """Step `action_repeat` times, then apply the time limit and update episode statistics."""
        info = state.info
        em0 = {k: jnp.where(info["episode_done"] > 0, jnp.zeros_like(v), v)
               for k, v in info["episode_metrics"].items()}
        # `truncation` is a per-step flag, and `info` holds this wrapper's value from the previous
        # step: clear it, so what the inner env leaves there is its own report for this step (an
        # env that carries `info` through unchanged would otherwise re-report an old time limit
        # on every later step, and trainers would drop those steps from learning).
        state = state.replace(info={**info, "truncation": jnp.zeros_like(state.reward)})

        def substep(st: State, stopped: jax.Array, em: dict[str, jax.Array]
                    ) -> tuple[State, jax.Array, dict[str, jax.Array], jax.Array]:
            nst = self.env.step(st, action)
            nst = nst.replace(info={**st.info, **nst.info})
            live = 1.0 - stopped
            em = dict(em)
            em["sum_reward"] = em["sum_reward"] + live * nst.reward
            em["length"] = em["length"] + live
            for k, v in nst.metrics.items():
                if k in em:
                    em[k] = em[k] + live * v
            reward = live * nst.reward
            if self.action_repeat > 1:  # once the episode ends, later repeats change nothing
                nst = _select(stopped, st, nst)
            return nst, jnp.maximum(stopped, nst.done), em, reward

        stopped0 = jnp.zeros_like(state.reward)
        if self.action_repeat == 1:
            nstate, _, em, reward = substep(state, stopped0, em0)
        else:
            def body(carry: tuple[State, jax.Array, dict[str, jax.Array]], _: None
                     ) -> tuple[tuple[State, jax.Array, dict[str, jax.Array]], jax.Array]:
                st, stopped, em = carry
                st, stopped, em, r = substep(st, stopped, em)
                return (st, stopped, em), r

            (nstate, _, em), rewards = jax.lax.scan(body, (state, stopped0, em0), None,
                                                    length=self.action_repeat)
            reward = jnp.sum(rewards, axis=0)

        steps = info["steps"] + self.action_repeat
        at_limit = steps >= self.episode_length
        env_done = nstate.done
        env_trunc = nstate.info.get("truncation", jnp.zeros_like(env_done))
        done = jnp.where(at_limit, jnp.ones_like(env_done), env_done)
        truncation = jnp.where(at_limit, 1.0 - env_done, env_trunc)
        new_info = {**nstate.info, "steps": steps, "truncation": truncation, "episode_done": done,
                    "episode_metrics": em}
        return nstate.replace(reward=reward, done=done, info=new_info)


class FlattenObservationWrapper(Wrapper):
    """Turns a dict observation into one vector: its arrays, each flattened, concatenated in key order."""

    def __init__(self, env: Env) -> None:
        """Wrap `env`, whose observation must be a dict of arrays."""
        super().__init__(env)
        size = env.observation_size
        if not isinstance(size, dict):
            raise ValueError(f"FlattenObservationWrapper: {type(env.unwrapped).__name__}'s observation is "
                             f"not a dict (observation_size {size!r})")
        self._shapes = {k: tuple(v) for k, v in size.items()}

    def _flat(self, obs: Any) -> jax.Array:
        parts = []
        for k, shape in self._shapes.items():
            x = obs[k]
            parts.append(jnp.reshape(x, (*x.shape[:x.ndim - len(shape)], -1)))
        return jnp.concatenate(parts, axis=-1)

    def reset(self, rng: jax.Array) -> State:
        """The wrapped reset with a flat observation."""
        state = self.env.reset(rng)
        return state.replace(obs=self._flat(state.obs))

    def step(self, state: State, action: jax.Array) -> State:
        """The wrapped step with a flat observation (the wrapped env never reads the observation back)."""
        out = self.env.step(state, action)
        return out.replace(obs=self._flat(out.obs))

    @property
    def observation_size(self) -> int:
        """The flat observation's length."""
        return sum(int(np.prod(s)) for s in self._shapes.values())


class VmapWrapper(Wrapper):
    """Batches an environment with `jax.vmap`.

    `reset` takes a batch of keys, or one key split into `batch_size` keys when `batch_size` is set.
    """

    def __init__(self, env: Env, batch_size: int | None = None) -> None:
        """Vectorize `env`; with `batch_size`, `reset` splits a single key into that many."""
        super().__init__(env)
        self.batch_size = batch_size

    def reset(self, rng: jax.Array) -> State:
        """Batched reset."""
        if self.batch_size is not None:
            rng = jax.random.split(rng, self.batch_size)
        return jax.vmap(self.env.reset)(rng)

    def step(self, state: State, action: jax.Array) -> State:
        """Batched step; `action` is (batch, action_size)."""
        return jax.vmap(self.env.step)(state, action)


class DomainRandomizationVmapWrapper(Wrapper):
    """Batches an environment where every member simulates its own `System`.

    `randomization_fn(sys, rng)` (with `rng` a batch of keys, passed as `rng=`) or `randomization_fn(sys)`
    (keys already bound, as trainers pass it) returns `(batched_sys, in_axes)`: `in_axes` is a
    `jax.vmap` axis spec for `batched_sys` (typically `sys` with 0 on randomized fields and None
    elsewhere). It is called once, eagerly, on the wrapped env's concrete `sys`, so it may read any
    `sys` field, inside `jax.vmap` or not.

    The wrapped environment is never mutated: each traced call steps a shallow copy built with
    `env.with_sys(member_sys)`, so no tracer outlives the call and the same env can also be wrapped
    again (e.g. for evaluation) or used unbatched.
    """

    def __init__(self, env: Env, randomization_fn: RandomizationFn, rng: jax.Array | None = None) -> None:
        """Randomize `env.sys` with `randomization_fn` (called with `rng` when given)."""
        super().__init__(env)
        sys = env.sys
        out = randomization_fn(sys) if rng is None else randomization_fn(sys, rng)
        sys_v, in_axes = out
        self._sys_v = sys_v
        self._in_axes = in_axes
        self.batch_size = _randomized_batch_size(sys, sys_v, in_axes)

    @property
    def batched_sys(self) -> brax_physics.System:
        """The batched systems returned by the randomization function."""
        return self._sys_v

    @property
    def in_axes(self) -> Any:
        """The `jax.vmap` axes of `batched_sys`."""
        return self._in_axes

    def reset(self, rng: jax.Array) -> State:
        """Reset member i with key `rng[i]` under system i."""
        def one(sys: brax_physics.System, key: jax.Array) -> State:
            return self.env.with_sys(sys).reset(key)

        return jax.vmap(one, in_axes=(self._in_axes, 0))(self._sys_v, rng)

    def step(self, state: State, action: jax.Array) -> State:
        """Step member i under system i."""
        def one(sys: brax_physics.System, st: State, act: jax.Array) -> State:
            return self.env.with_sys(sys).step(st, act)

        return jax.vmap(one, in_axes=(self._in_axes, 0, 0))(self._sys_v, state, action)


def _randomized_batch_size(sys: Any, sys_v: Any, in_axes: Any) -> int:
    """Checks `(sys_v, in_axes)` against the unbatched `sys`; returns the batch size."""
    sizes: set[int] = set()

    def check(path: Any, axis: Any, sub_v: Any, sub: Any) -> None:
        name = "sys" + jax.tree_util.keystr(path)
        leaves_v, leaves = jax.tree.leaves(sub_v), jax.tree.leaves(sub)
        for lv, l0 in zip(leaves_v, leaves, strict=True):
            shape_v, shape0 = tuple(jnp.shape(lv)), tuple(jnp.shape(l0))
            if axis is None:
                if shape_v != shape0:
                    raise ValueError(f"randomization_fn: {name} has in_axes None but shape {shape_v} "
                                     f"differs from the unbatched {shape0}; give it axis 0")
            elif axis != 0:
                raise ValueError(f"randomization_fn: only in_axes 0 or None are supported ({name}: {axis!r})")
            else:
                if shape_v[1:] != shape0:
                    raise ValueError(f"randomization_fn: {name} has in_axes 0 but shape {shape_v} is not a "
                                     f"batch of {shape0}")
                sizes.add(shape_v[0])

    jax.tree_util.tree_map_with_path(check, in_axes, sys_v, sys, is_leaf=lambda x: x is None)
    if len(sizes) != 1:
        raise ValueError("randomization_fn must batch at least one field, all with one batch size; "
                         f"got batch sizes {sorted(sizes)}")
    return sizes.pop()


def _path_name(path: tuple[Any, ...]) -> str:
    """A pytree path as a dotted name: `body_mass`, `opt.timestep`."""
    parts = []
    for k in path:
        if isinstance(k, jax.tree_util.GetAttrKey):
            parts.append(k.name)
        elif isinstance(k, jax.tree_util.DictKey):
            parts.append(str(k.key))
        elif isinstance(k, jax.tree_util.SequenceKey):
            parts.append(str(k.idx))
        else:
            parts.append(str(k))
    return ".".join(parts)


def _batched_names(sys: Any, in_axes: Any) -> frozenset[str]:
    """Dotted names of the `sys` leaves that `in_axes` (a prefix of `sys`) batches along axis 0."""
    names: set[str] = set()

    def visit(path: tuple[Any, ...], axis: Any, sub: Any) -> None:
        if axis == 0:
            for sub_path, _ in jax.tree_util.tree_flatten_with_path(sub)[0]:
                names.add(_path_name(path + tuple(sub_path)))

    jax.tree_util.tree_map_with_path(visit, in_axes, sys, is_leaf=lambda x: x is None)
    return frozenset(names)


_PER_EPISODE_RESET_CHUNKS = 16  # a restart slice is 1/16 of the batch (see AutoResetWrapper)
_SYS_KEY_SALT = 0x5D5  # fold_in data deriving a member's randomization key from its reset key


class PerEpisodeDomainRandomizationVmapWrapper(Wrapper):
    """Batches an environment whose members draw a new randomized `System` at every reset.

    `randomization_fn(sys, rng=keys)` has `DomainRandomizationVmapWrapper`'s contract (one key per
    member in, `(batched_sys, in_axes)` out), but is called inside every batched `reset`, traced,
    with member i's key derived from its reset key. Under `AutoResetWrapper(fresh_reset=True)` a
    member whose episode ends therefore starts the next one with new parameters drawn with a new
    key, while the others keep theirs, and nothing recompiles (the draw is part of the traced reset).

    The batched fields (`in_axes` 0) travel in the state: `state.info['randomized_sys']` maps each
    one's dotted name (`'body_mass'`, `'geom_friction'`, `'opt.timestep'`) to its (batch, ...) array,
    and `step` runs member i under the `System` its current episode drew. Every other field is
    closed over as a constant, taken from one eager call made here on the concrete `sys` (which
    also checks the function's output, as `DomainRandomizationVmapWrapper` does).
    """

    def __init__(self, env: Env, randomization_fn: RandomizationFn) -> None:
        """Draw `env.sys` anew with `randomization_fn(sys, rng=keys)` at every reset."""
        super().__init__(env)
        sys = env.sys
        probe_keys = jax.random.split(jax.random.PRNGKey(0), 2)
        sys_v, in_axes = randomization_fn(sys, rng=probe_keys)
        if _randomized_batch_size(sys, sys_v, in_axes) != 2:
            raise ValueError("randomization_fn must return one member per key in `rng` (called with 2 keys, "
                             "it returned another batch size); per-episode draws pass the keys in")
        self._randomization_fn = randomization_fn
        self._in_axes = in_axes
        self._names = _batched_names(sys, in_axes)
        path_leaves, self._treedef = jax.tree_util.tree_flatten_with_path(sys_v)
        # Unbatched fields come from the eager call, so a function may also set fields for all members.
        self._fields = tuple((_path_name(path), leaf) for path, leaf in path_leaves)

    @property
    def in_axes(self) -> Any:
        """The `jax.vmap` axes the randomization function returns (0 on the fields drawn per episode)."""
        return self._in_axes

    @property
    def randomized_fields(self) -> tuple[str, ...]:
        """Sorted dotted names of the fields drawn per episode (the keys of `info['randomized_sys']`)."""
        return tuple(sorted(self._names))

    def member_sys(self, params: dict[str, jax.Array]) -> brax_physics.System:
        """The `System` of one member whose drawn fields are `params` (one member's `randomized_sys`)."""
        leaves = [params[name] if name in self._names else leaf for name, leaf in self._fields]
        sys: brax_physics.System = jax.tree_util.tree_unflatten(self._treedef, leaves)
        return sys

    def draw(self, rng: jax.Array) -> dict[str, jax.Array]:
        """New drawn fields for a batch of members, one key each: `info['randomized_sys']`'s layout."""
        sys = self.env.sys
        sys_v, in_axes = self._randomization_fn(sys, rng=rng)
        names = _batched_names(sys, in_axes)
        if names != self._names:
            raise ValueError(f"randomization_fn batched {sorted(names)} here but {sorted(self._names)} when "
                             "first called; per-episode draws need the same fields every time")
        batch = _randomized_batch_size(sys, sys_v, in_axes)
        if batch != rng.shape[0]:
            raise ValueError(f"randomization_fn returned {batch} members for {rng.shape[0]} keys")
        return {_path_name(path): leaf for path, leaf in jax.tree_util.tree_flatten_with_path(sys_v)[0]
                if _path_name(path) in self._names}

    def reset(self, rng: jax.Array) -> State:
        """Member i draws its fields with a key folded from `rng[i]`, then resets with `rng[i]` under them."""
        params = self.draw(jax.vmap(lambda k: jax.random.fold_in(k, _SYS_KEY_SALT))(rng))

        def one(p: dict[str, jax.Array], key: jax.Array) -> State:
            return self.env.with_sys(self.member_sys(p)).reset(key)

        state = jax.vmap(one)(params, rng)
        return state.replace(info={**state.info, RANDOMIZED_SYS_KEY: params})

    def step(self, state: State, action: jax.Array) -> State:
        """Step member i under the `System` its current episode drew."""
        params = state.info[RANDOMIZED_SYS_KEY]
        inner = state.replace(info={k: v for k, v in state.info.items() if k != RANDOMIZED_SYS_KEY})

        def one(p: dict[str, jax.Array], st: State, act: jax.Array) -> State:
            return self.env.with_sys(self.member_sys(p)).step(st, act)

        nstate = jax.vmap(one)(params, inner, action)
        return nstate.replace(info={**nstate.info, RANDOMIZED_SYS_KEY: params})


class AutoResetWrapper(Wrapper):
    """Resets environments whose episode is done, inside `step`.

    By default a done environment restarts from the state cached at `reset` (`fresh_reset=False`,
    cheap); with `fresh_reset=True` it restarts from a new `reset` drawn with a key carried in
    `info['reset_rng']` (every episode starts differently; costs one batched reset on steps where
    any environment finished). With `reset_chunks` > 1 that reset is computed for slices of
    `ceil(batch / reset_chunks)` environments, finished ones first, only as many slices as needed
    (when one or two environments finish per step, as in long runs, that is one small slice instead
    of the whole batch); the wrapped env's `reset` must then accept any number of keys (not true of
    `DomainRandomizationVmapWrapper`, whose systems are fixed per batch member). Every environment
    restarts from its own key either way. The observation returned by the finishing step is kept
    in `info['final_obs']` (equal to `obs` on other steps) for value bootstrapping. Over a
    `PerEpisodeDomainRandomizationVmapWrapper` a fresh reset also brings the restarted environments
    new `info['randomized_sys']` parameters, so that wrapper requires `fresh_reset=True`.

    A restart brings back the environment's own `info` too (the keys its `reset` writes: a cached
    restart restores the cached ones), so an episode never starts with what the last one left there
    (a command, the last action, feet positions). State that must outlive an episode (a curriculum
    level, say) is declared by the environment: the innermost environment's `persistent_info`
    (`Env.persistent_info`, a tuple of `info` keys) names keys that no restart overwrites, so a
    restarted environment keeps the value its finished episode left there.
    """

    def __init__(self, env: Env, fresh_reset: bool = False, reset_chunks: int = 1) -> None:
        """Auto-reset `env` from the cached first state, or from fresh resets (in `reset_chunks` slices)."""
        super().__init__(env)
        if isinstance(reset_chunks, bool) or not isinstance(reset_chunks, int) or reset_chunks < 1:
            raise ValueError(f"reset_chunks must be a positive int, got {reset_chunks!r}")
        self.fresh_reset = fresh_reset
        self.reset_chunks = reset_chunks

    def reset(self, rng: jax.Array) -> State:
        """Reset and remember what later resets restore."""
        state = self.env.reset(rng)
        if not self.fresh_reset and RANDOMIZED_SYS_KEY in state.info:
            raise ValueError("per-episode domain randomization needs AutoResetWrapper(fresh_reset=True): "
                             "restoring the cached first state would replay the first draw forever")
        info = {**state.info, "final_obs": state.obs}
        if self.fresh_reset:
            # A stream the env's own reset never draws from: split(rng)[1] is what envs that split
            # their key use for noise, and a key both sampled and split gives correlated bits.
            info["reset_rng"] = _fold_keys(rng, _RESET_STREAM)
        else:
            info["first_pipeline_state"] = state.pipeline_state
            info["first_obs"] = state.obs
            info["first_info"] = {k: state.info[k] for k in _restarted_info(self.env, state.info)}
        return state.replace(info=info)

    def step(self, state: State, action: jax.Array) -> State:
        """Step; environments that finished come back reset (their `done` stays 1 for this step)."""
        info = dict(state.info)
        if "steps" in info:
            info["steps"] = jnp.where(state.done > 0, jnp.zeros_like(info["steps"]), info["steps"])
        state = state.replace(done=jnp.zeros_like(state.done), info=info)
        state = self.env.step(state, action)
        done = state.done
        info = {**state.info, "final_obs": state.obs}

        if self.fresh_reset:
            key_now, key_next = _split_keys(info["reset_rng"])
            info["reset_rng"] = key_next
            reset_keys = [k for k in _restarted_info(self.env, jax.eval_shape(self.env.reset, key_now).info)
                          if k in info]
            current = (state.pipeline_state, state.obs, {k: info[k] for k in reset_keys})

            def fresh(keys: jax.Array) -> Any:
                st = self.env.reset(keys)
                return st.pipeline_state, st.obs, {k: st.info[k] for k in reset_keys}

            batch = done.shape[0] if done.ndim else 1
            chunk = -(-batch // self.reset_chunks)
            if chunk >= batch:
                restart = jax.lax.cond(jnp.any(done > 0), lambda: fresh(key_now), lambda: current)
            else:
                restart = _chunked_restarts(fresh, done, key_now, current, chunk)
            pipeline_state, obs, reset_info = _select(done, restart, current)
            info.update(reset_info)
        else:
            pipeline_state = _select(done, info["first_pipeline_state"], state.pipeline_state)
            obs = _select(done, info["first_obs"], state.obs)
            first = info["first_info"]
            info.update(_select(done, first, {k: info[k] for k in first}))
        return state.replace(pipeline_state=pipeline_state, obs=obs, info=info)


def _restarted_info(env: Env, info: Mapping[str, Any]) -> list[str]:
    """The keys of a reset's `info` that a restart brings back: the environment's own, not persistent."""
    keys: object = env.unwrapped.persistent_info  # a subclass may set anything
    if not isinstance(keys, tuple) or not all(isinstance(k, str) for k in keys):
        raise TypeError(f"{type(env.unwrapped).__name__}.persistent_info must be a tuple of info keys, "
                        f"got {keys!r}")
    return [k for k in info if k not in _WRAPPER_INFO_KEYS and k not in keys]


def _chunked_restarts(fresh: Callable[[jax.Array], Any], done: jax.Array, keys: jax.Array, current: Any,
                      chunk: int) -> Any:
    """`current` with `fresh(keys)`'s values for the done members, computed `chunk` members at a time.

    Slices of a permutation that lists the done members first, as many as cover them; members of a
    slice that are not done get values too, which the caller's select discards.
    """
    batch = done.shape[0]
    order = jnp.argsort(jnp.where(done > 0, 0, 1), stable=True)
    n_done = jnp.sum(done > 0)

    def body(carry: tuple[jax.Array, Any]) -> tuple[jax.Array, Any]:
        i, acc = carry
        idx = jax.lax.dynamic_slice_in_dim(order, jnp.minimum(i * chunk, batch - chunk), chunk)
        part = fresh(keys[idx])
        return i + 1, jax.tree.map(lambda a, p: a.at[idx].set(p), acc, part)

    _, out = jax.lax.while_loop(lambda c: c[0] * chunk < n_done, body, (jnp.zeros((), jnp.int32), current))
    return out


class NanGuardWrapper(Wrapper):
    """Contains non-finite steps of an unbatched environment.

    A step whose action, physics state, observation or reward is not finite is rolled back to the
    previous state (so nothing non-finite escapes), gets reward 0 and `done = 1` (so an outer
    `AutoResetWrapper` restarts it), and is counted: `metrics['nan_steps']` is 1.0 on such a step
    (summed per episode by `EpisodeWrapper`) and `info['nan_steps_total']` counts them since reset.
    """

    def reset(self, rng: jax.Array) -> State:
        """Reset with the NaN counters at zero."""
        state = self.env.reset(rng)
        metrics = {**state.metrics, "nan_steps": jnp.zeros_like(state.reward)}
        info = {**state.info, "nan_steps_total": jnp.zeros(state.reward.shape, jnp.int32)}
        return state.replace(metrics=metrics, info=info)

    def step(self, state: State, action: jax.Array) -> State:
        """Step; roll back and mark done if anything became non-finite."""
        nstate = self.env.step(state, action)
        bad = ~_step_finite(action, nstate)
        new_metrics = {**state.metrics, **nstate.metrics}
        new_info = {**state.info, **nstate.info}
        pipeline_state = _select(bad, state.pipeline_state, nstate.pipeline_state)
        obs = _select(bad, state.obs, nstate.obs)
        metrics = {k: _select(bad, state.metrics[k], v) if k in state.metrics else v
                   for k, v in new_metrics.items()}
        metrics["nan_steps"] = bad.astype(nstate.reward.dtype)
        info = {k: _select(bad, state.info[k], v) if k in state.info else v for k, v in new_info.items()}
        info["nan_steps_total"] = state.info["nan_steps_total"] + bad.astype(jnp.int32)
        reward = jnp.where(bad, jnp.zeros_like(nstate.reward), nstate.reward)
        done = jnp.where(bad, jnp.ones_like(nstate.done), nstate.done)
        return nstate.replace(pipeline_state=pipeline_state, obs=obs, reward=reward, done=done,
                              metrics=metrics, info=info)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class EvalMetrics:
    """Per-environment evaluation accumulators kept in `info['eval_metrics']` by `EvalWrapper`."""

    episode_metrics: dict[str, jax.Array]
    """`reward` and every metric summed over the first episode."""
    active_episodes: jax.Array
    """1.0 while the first episode is running, 0.0 after it ended."""
    episode_steps: jax.Array
    """Length of the first episode in env steps (counting action repeats when `info['steps']` exists)."""


class EvalWrapper(Wrapper):
    """Tracks the return, metrics and length of the first episode of every environment.

    Wrap a batched environment; after stepping at least `episode_length` steps,
    `state.info['eval_metrics']` holds each environment's first-episode totals.
    """

    def reset(self, rng: jax.Array) -> State:
        """Reset with zeroed accumulators."""
        state = self.env.reset(rng)
        metrics = {"reward": state.reward, **state.metrics}
        em = EvalMetrics(episode_metrics={k: jnp.zeros_like(v) for k, v in metrics.items()},
                         active_episodes=jnp.ones_like(state.reward),
                         episode_steps=jnp.zeros_like(state.reward))
        return state.replace(info={**state.info, "eval_metrics": em})

    def step(self, state: State, action: jax.Array) -> State:
        """Step and accumulate while the first episode runs."""
        em = state.info["eval_metrics"]
        if not isinstance(em, EvalMetrics):
            raise TypeError(f"info['eval_metrics'] must be EvalMetrics, got {type(em).__name__}")
        inner_info = {k: v for k, v in state.info.items() if k != "eval_metrics"}
        nstate = self.env.step(state.replace(info=inner_info), action)
        active = em.active_episodes
        metrics = {"reward": nstate.reward, **nstate.metrics}
        episode_metrics = {k: v + active * metrics[k] for k, v in em.episode_metrics.items()}
        if "steps" in nstate.info:
            steps = jnp.where(active > 0, nstate.info["steps"].astype(active.dtype), em.episode_steps)
        else:
            steps = em.episode_steps + active
        new_em = EvalMetrics(episode_metrics=episode_metrics,
                             active_episodes=active * (1.0 - nstate.done), episode_steps=steps)
        return nstate.replace(info={**nstate.info, "eval_metrics": new_em})


def wrap_for_training(env: Env, episode_length: int = 1000, action_repeat: int = 1,
                      randomization_fn: RandomizationFn | None = None, *,
                      randomization_rng: jax.Array | None = None, fresh_reset: bool | None = None,
                      nan_guard: bool = True, randomize_per_episode: bool = False) -> Wrapper:
    """The standard training stack: NaN guard, episodes, batching (optionally randomized), auto-reset.

    The result's `reset` takes a batch of keys, one per environment. By default `randomization_fn`
    draws one `System` per environment for the whole run (`DomainRandomizationVmapWrapper`): it is
    called as `randomization_fn(sys, randomization_rng)` when `randomization_rng` is given, else as
    `randomization_fn(sys)`. With `randomize_per_episode=True` every reset and auto-reset draws new
    parameters with `randomization_fn(sys, rng=keys)` (`PerEpisodeDomainRandomizationVmapWrapper`);
    that mode restarts episodes with fresh resets (`fresh_reset` defaults to True there, and False
    is refused: a new `System` needs its own initial state). `fresh_reset` otherwise defaults to False.
    """
    if randomize_per_episode:
        if randomization_fn is None:
            raise ValueError("randomize_per_episode=True needs a randomization_fn")
        if randomization_rng is not None:
            raise ValueError("randomization_rng draws the once-per-run systems; with "
                             "randomize_per_episode=True the keys come from each reset")
        if fresh_reset is False:
            raise ValueError("randomize_per_episode=True restarts episodes with fresh resets (a new System "
                             "needs its own initial state); leave fresh_reset unset or True")
    inner: Env = NanGuardWrapper(env) if nan_guard else env
    inner = EpisodeWrapper(inner, episode_length, action_repeat)
    if randomization_fn is None:
        inner = VmapWrapper(inner)
    elif randomize_per_episode:
        inner = PerEpisodeDomainRandomizationVmapWrapper(inner, randomization_fn)
    else:
        inner = DomainRandomizationVmapWrapper(inner, randomization_fn, rng=randomization_rng)
    fresh = randomize_per_episode if fresh_reset is None else fresh_reset
    # Per episode, restarts (with their draws) are computed only for the slices holding finished envs.
    chunks = _PER_EPISODE_RESET_CHUNKS if randomize_per_episode else 1
    return AutoResetWrapper(inner, fresh_reset=fresh, reset_chunks=chunks)


__all__ = [
    "RANDOMIZED_SYS_KEY",
    "AutoResetWrapper",
    "DomainRandomizationVmapWrapper",
    "EpisodeWrapper",
    "EvalMetrics",
    "EvalWrapper",
    "NanGuardWrapper",
    "PerEpisodeDomainRandomizationVmapWrapper",
    "RandomizationFn",
    "VmapWrapper",
    "wrap_for_training",
]
