"""Antithetic populations shared by ES and ARS: perturbations, one-episode rollouts, masked moments.

A generation of `n` perturbation directions is `2 * n` rollouts laid out `[theta + s * eps_1..n,
theta - s * eps_1..n]` along the environment axis, which the runner shards over `runner.AXIS`. Every
rollout runs one episode from a fresh reset for a fixed number of steps; rewards and observations
after its first `done` are masked out, as in Google Brax's ES and ARS.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, NamedTuple, TypeVar

import brax_envs
import brax_math
import jax
import jax.numpy as jnp
import optax  # type: ignore[import-untyped]  # this optax ships no py.typed
from jax.flatten_util import ravel_pytree
from jax.sharding import Mesh, NamedSharding

from brax_train import networks, runner, running_statistics
from brax_train.config import ConfigError, RunConfig, is_int, raise_errors, run_errors
from brax_train.runner import AXIS, P, constrain
from brax_train.types import PRNGKey

C = TypeVar("C", bound="PopulationConfig")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PopulationConfig(RunConfig):
    """The settings ES and ARS share beyond `RunConfig`'s: Brax's run length, one episode a rollout."""

    num_timesteps: int = 100
    """Environment steps to train for (counting action repeats); 0 returns the initial parameters."""
    episode_length: int | None = 1000
    """Time limit of every rollout and evaluation episode, in environment steps."""

    PAIRS: ClassVar[str]
    """The name of the agent's setting that counts antithetic pairs (directions) per generation."""


COUNTS_ENV_STEPS = True
"""A generation counts the env steps of running episodes only (`runner.Agent.counts_env_steps`)."""


def steps_per_rollout(c: RunConfig) -> int:
    """Policy steps of one rollout: a whole episode of `episode_length` env steps."""
    assert c.episode_length is not None
    return c.episode_length // c.action_repeat


def env_steps_per_generation(c: RunConfig, num_rollouts: int) -> int:
    """Environment steps a generation of `num_rollouts` steps at most (action repeats included); the
    run counts only those before each rollout's first `done`, as Google Brax does
    (`runner.Agent.counts_env_steps`)."""
    return num_rollouts * steps_per_rollout(c) * c.action_repeat


def pairs(c: PopulationConfig) -> int:
    """Antithetic pairs (directions) per generation: the value of the config's `PAIRS` setting."""
    size: int = getattr(c, c.PAIRS)
    return size


def num_rollouts(c: PopulationConfig) -> int:
    """Rollouts per generation: one per sign of each antithetic pair."""
    return 2 * pairs(c)


def env_steps_per_update(c: PopulationConfig) -> int:
    """Environment steps one generation steps at most (`env_steps_per_generation`)."""
    return env_steps_per_generation(c, num_rollouts(c))


def run_config(c: C) -> C:
    """`c` with `num_envs` set to the rollouts per generation (what the runner shards)."""
    return c.replace(num_envs=num_rollouts(c))


def validate(c: PopulationConfig, device_count: int, error: type[ConfigError], agent: str) -> None:
    """Raise `error` listing every violated rule of `agent`'s settings `c` (names keys and values)."""
    errors: list[str] = []
    derived = population_errors(c, errors, device_count, c.PAIRS, pairs(c), f"{agent.lower()}.train")
    # The runner's own divisibility rule would name num_envs; population_errors names the agent's setting.
    errors += run_errors(derived, 1)
    raise_errors(errors, error, agent)


def agent_fields(name: str, c: PopulationConfig, net: Any, normalize: bool) -> dict[str, Any]:
    """The `runner.Agent` fields ES and ARS fill alike: the counted env steps and the checkpoint meta."""
    return {
        "env_steps_per_update": env_steps_per_update(c),
        "counts_env_steps": COUNTS_ENV_STEPS,
        "meta": runner.checkpoint_meta(name, networks.description_of(net), normalize),
    }

Act = Callable[[Any, Any], jax.Array]
"""`act(members, obs) -> actions`: every member's policy on its own rollout's observation (2n, ...)."""


class Moments(NamedTuple):
    """Count, mean and summed squared deviations of weighted samples (a nest like the observation)."""

    n: jax.Array
    """Total weight: () float32, or (rollouts,) per rollout."""
    mean: Any
    """Weighted mean per feature."""
    m2: Any
    """Weighted sum of squared deviations from `mean` per feature."""


class Rollouts(NamedTuple):
    """What evaluating a population for one episode per member gives."""

    returns: jax.Array
    """(2n,) undiscounted returns up to each rollout's first `done` (shifted rewards, for ARS)."""
    moments: Moments | None
    """Moments of the observations seen before each rollout's first `done` (None when not tracked)."""
    env_state: brax_envs.State
    """The environments after the last step."""
    metrics: dict[str, jax.Array]
    """`episode_count` and `episode_sum/<name>` of the first episodes, when the env reports them."""
    active_steps: jax.Array
    """() float32 steps taken before the first `done`, summed over rollouts."""


def perturb(params: Any, key: PRNGKey, num: int, std: float) -> tuple[Any, Any]:
    """Antithetic members `[params + std * eps; params - std * eps]` (2 * num, ...) and `eps` (num, ...).

    `eps` is standard normal over the flattened parameters: one draw for the whole tree keeps a
    single random-bits computation in the compiled program however many leaves the network has.
    """
    flat, unravel = ravel_pytree(params)
    eps = jax.random.normal(key, (num, flat.shape[0]), flat.dtype)
    both = jnp.concatenate([jnp.expand_dims(flat, 0) + std * eps, jnp.expand_dims(flat, 0) - std * eps])
    return jax.vmap(unravel)(both), jax.vmap(unravel)(eps)


def _trailing(a: jax.Array, ndim: int) -> jax.Array:
    """`a` with trailing unit axes up to `ndim` dimensions (explicit broadcasting of per-rollout weights)."""
    return jnp.reshape(a, a.shape + (1,) * (ndim - a.ndim))


def _add_samples(m: Moments, x: Any, w: jax.Array) -> Moments:
    """Per-rollout moments (leading axis: rollouts) after one more sample `x` of weight `w` (0 or 1) each.

    Elementwise along the rollout axis, so the per-step update needs no cross-device reduction.
    """
    count = m.n + w
    frac = w / jnp.maximum(count, 1.0)

    def one(mean: jax.Array, m2: jax.Array, xi: jax.Array) -> tuple[jax.Array, jax.Array]:
        take = _trailing(w, xi.ndim) > 0
        d = jnp.where(take, xi - mean, 0.0)  # `where`, not a product: a masked sample may be non-finite
        new_mean = mean + _trailing(frac, xi.ndim) * d
        return new_mean, m2 + d * jnp.where(take, xi - new_mean, 0.0)

    pairs = jax.tree.map(one, m.mean, m.m2, x)
    is_pair = lambda p: isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], jax.Array)  # noqa: E731
    mean = jax.tree.map(lambda p: p[0], pairs, is_leaf=is_pair)
    m2 = jax.tree.map(lambda p: p[1], pairs, is_leaf=is_pair)
    return Moments(count, mean, m2)


def reduce_moments(m: Moments) -> Moments:
    """The moments of all samples behind per-rollout moments `m` (leading axis: rollouts)."""
    total = jnp.sum(m.n)
    safe = jnp.maximum(total, 1.0)

    def mean(x: jax.Array) -> jax.Array:
        return jnp.sum(_trailing(m.n, x.ndim) * x, axis=0) / safe

    means = jax.tree.map(mean, m.mean)

    def m2(s: jax.Array, x: jax.Array, mu: jax.Array) -> jax.Array:
        d = x - jnp.expand_dims(mu, 0)
        return jnp.sum(s, axis=0) + jnp.sum(_trailing(m.n, x.ndim) * d * d, axis=0)

    return Moments(total, means, jax.tree.map(m2, m.m2, m.mean, means))


def update_statistics(
    stats: running_statistics.RunningStatisticsState, m: Moments
) -> running_statistics.RunningStatisticsState:
    """Welford running statistics after also seeing the samples behind `m` (Chan et al.'s merge)."""
    n_b = jnp.round(m.n)
    count = stats.count.add(n_b.astype(jnp.uint32))
    n_a = stats.count.to_float32()
    n = jnp.maximum(n_a + n_b, 1.0)
    frac, cross = n_b / n, n_a * n_b / n
    mean = jax.tree.map(lambda a, b: a + (b - a) * frac, stats.mean, m.mean)
    m2 = jax.tree.map(
        lambda sa, sb, a, b: sa + sb + (b - a) * (b - a) * cross,
        stats.summed_variance,
        m.m2,
        stats.mean,
        m.mean,
    )
    nf = jnp.maximum(count.to_float32(), 1.0)

    def std(v: jax.Array) -> jax.Array:
        var = jnp.maximum(v, 0.0) / nf + stats.std_eps
        return jnp.clip(jnp.sqrt(var), running_statistics.STD_MIN, running_statistics.STD_MAX)

    return running_statistics.RunningStatisticsState(
        count=count,
        mean=mean,
        summed_variance=m2,
        std=jax.tree.map(std, m2),
        std_eps=stats.std_eps,
        mode=stats.mode,
    )


def _zero_episode_sums(state: brax_envs.State, zeros: jax.Array) -> dict[str, jax.Array]:
    """Per-rollout `episode_count` and `episode_sum/<name>` at zero; empty when the env reports none."""
    if "episode_done" not in state.info or "episode_metrics" not in state.info:
        return {}
    em = state.info["episode_metrics"]
    assert isinstance(em, Mapping)
    return {"episode_count": zeros, **{f"episode_sum/{name}": zeros for name in em}}


def _add_first_episodes(
    ep: dict[str, jax.Array], nst: brax_envs.State, active: jax.Array
) -> dict[str, jax.Array]:
    """`ep` after step `nst`, counting only the ends of first episodes (`active` rollouts)."""
    first_end = nst.info["episode_done"] * active
    em = nst.info["episode_metrics"]
    return {
        k: v + (first_end if k == "episode_count" else em[k.removeprefix("episode_sum/")] * first_end)
        for k, v in ep.items()
    }


def evaluate(
    env: brax_envs.Env,
    act: Act,
    members: Any,
    key: PRNGKey,
    *,
    num_rollouts: int,
    length: int,
    mesh: Mesh,
    env_shardings: Any,
    reward_shift: float = 0.0,
    track_moments: bool = False,
) -> Rollouts:
    """Run every member for `length` policy steps from fresh resets (one rollout per member).

    `members` is the (num_rollouts, ...) parameter batch `act` takes, with antithetic pairs at `i`
    and `num_rollouts / 2 + i` (see `perturb`); members and environments are sharded over the
    device axis. Returns sum `reward - reward_shift` over the steps before each rollout's first
    `done`. Everything the scan carries is per rollout, so devices communicate only after the
    episode.
    """
    shard = NamedSharding(mesh, P(AXIS))
    members = constrain(members, jax.tree.map(lambda _: shard, members))
    # Common random numbers: both members of an antithetic pair start from the same initial state, so
    # their return difference measures the perturbation rather than the reset noise (unbiased either way).
    pair_keys = jax.random.split(key, num_rollouts // 2)
    keys = constrain(jnp.concatenate([pair_keys, pair_keys]), shard)
    state = constrain(env.reset(keys), env_shardings)
    zeros = jnp.zeros_like(state.reward)
    ep = _zero_episode_sums(state, zeros)
    moments = None
    if track_moments:
        moments = Moments(
            zeros, jax.tree.map(jnp.zeros_like, state.obs), jax.tree.map(jnp.zeros_like, state.obs)
        )
    shift = jnp.float32(reward_shift)

    Carry = tuple[brax_envs.State, jax.Array, jax.Array, jax.Array, Moments | None, dict[str, jax.Array]]

    def step(carry: Carry, _: None) -> tuple[Carry, None]:
        st, ret, active, taken, mom, ep = carry
        taken = taken + active
        if mom is not None:
            mom = _add_samples(mom, st.obs, active)
        nst = constrain(env.step(st, act(members, st.obs)), env_shardings)
        ret = ret + jnp.where(active > 0, nst.reward - shift, 0.0)
        if ep:
            ep = _add_first_episodes(ep, nst, active)
        active = active * (1.0 - nst.done)
        return (nst, ret, active, taken, mom, ep), None

    init: Carry = (state, zeros, jnp.ones_like(zeros), zeros, moments, ep)
    (state, returns, _, taken, moments, ep), _ = jax.lax.scan(step, init, None, length=length)
    total = reduce_moments(moments) if moments is not None else None
    metrics = {k: jnp.sum(v) for k, v in ep.items()}
    return Rollouts(returns, total, state, metrics, jnp.sum(taken))


def counted_steps(r: Rollouts, action_repeat: int) -> jax.Array:
    """() int32 environment steps the rollouts count, as Google Brax's ES and ARS: those before each
    rollout's first `done`, action repeats included (`runner.ENV_STEPS`)."""
    steps: jax.Array = jnp.round(r.active_steps).astype(jnp.int32) * jnp.int32(action_repeat)
    return steps


def nonfinite_code(returns: jax.Array, update: Any, params: Any, normalizer: Any) -> jax.Array:
    """NaN-guard code (see `runner.NONFINITE`): 1 returns, 2 update direction, 3 parameters, 4 statistics.

    Returns play the loss's role for a gradient-free learner, so they report as code 1 ("loss").
    """
    checks = (
        brax_math.all_finite(returns),
        brax_math.all_finite(update),
        brax_math.all_finite(params),
        brax_math.all_finite(normalizer),
    )
    code = jnp.zeros((), jnp.int32)
    for i, ok in reversed(list(enumerate(checks, start=1))):
        code = jnp.where(ok, code, jnp.int32(i))
    return code


class Generation(NamedTuple):
    """One generation evaluated: its perturbations, rollouts, replicated returns and statistics."""

    noise: Any
    """The (n, ...) standard-normal directions (`perturb`)."""
    rollouts: Rollouts
    """The population's one-episode rollouts."""
    returns: jax.Array
    """(2n,) returns, replicated on every device."""
    normalizer: running_statistics.RunningStatisticsState
    """The observation statistics, updated with the rollouts' observations when tracked."""


class Population(NamedTuple):
    """An agent's population: how its members act and are perturbed, and how long they run."""

    setup: runner.Setup
    """The runner's environment and device placement (`num_envs` = 2 * num rollouts)."""
    policy: Callable[[Any, Any, Any], jax.Array]
    """`policy(normalizer, member_params, obs) -> actions` for one member."""
    num: int
    """Antithetic pairs (directions) per generation."""
    std: float
    """Standard deviation of the perturbations."""
    length: int
    """Policy steps of every rollout (one episode)."""
    track_moments: bool
    """Update the observation statistics with the rollouts' observations."""
    action_repeat: int
    """Env steps per policy step (for the counted env steps)."""
    reward_shift: float = 0.0
    """Subtracted from every reward (ARS)."""

    def run(
        self, params: Any, normalizer: running_statistics.RunningStatisticsState, key: PRNGKey
    ) -> Generation:
        """Perturb `params` into `num` antithetic pairs and run each member for one episode."""
        key_noise, key_eval = jax.random.split(key)
        members, noise = perturb(params, key_noise, self.num, self.std)

        def act(members: Any, obs: Any) -> jax.Array:
            return jax.vmap(functools.partial(self.policy, normalizer))(members, obs)

        setup = self.setup
        r = evaluate(
            setup.env,
            act,
            members,
            key_eval,
            num_rollouts=2 * self.num,
            length=self.length,
            mesh=setup.mesh,
            env_shardings=setup.env_shardings,
            reward_shift=self.reward_shift,
            track_moments=self.track_moments,
        )
        if r.moments is not None:
            normalizer = update_statistics(normalizer, r.moments)
        return Generation(noise, r, constrain(r.returns, NamedSharding(setup.mesh, P())), normalizer)

    def finish(
        self, g: Generation, params: Any, update: Any, weights: jax.Array
    ) -> tuple[Any, dict[str, jax.Array]]:
        """The new `params`, replicated, and the generation's metrics (`weights`: the mean update
        weight; `update`: the step, which the NaN guard checks with returns, parameters and statistics)."""
        repl = NamedSharding(self.setup.mesh, P())
        params = constrain(params, jax.tree.map(lambda _: repl, params))
        metrics = {
            "params_norm": optax.tree.norm(params),
            "eval_scores_mean": jnp.mean(g.returns),
            "eval_scores_std": jnp.std(g.returns),
            "weights": weights,
            "rollout_length": g.rollouts.active_steps / (2 * self.num),
            runner.ENV_STEPS: counted_steps(g.rollouts, self.action_repeat),
            **g.rollouts.metrics,
        }
        metrics[runner.NONFINITE] = nonfinite_code(g.returns, update, params, g.normalizer)
        return params, metrics


def check_observations(environment: brax_envs.Env, what: str) -> None:
    """Raise ValueError for dict observations, which ES and ARS do not support (as in Google Brax)."""
    if isinstance(environment, brax_envs.Env) and isinstance(environment.observation_size, Mapping):
        raise ValueError(f"{what} supports array observations only; this environment's are a dict")


def train(
    environment: brax_envs.Env,
    c: C,
    validate: Callable[[C, int], None],
    make_agent: Callable[[C, runner.Setup], runner.Agent[Any, Any]],
    name: str,
) -> runner.TrainResult:
    """ES's or ARS's `train` after merging settings `c`: the user's settings are validated, the
    observations checked, `run_config(c)` derives `num_envs` from the population, the runner trains."""
    def resolve(checked: C) -> C:
        check_observations(environment, f"{name}.train")
        return run_config(checked)

    return runner.train(environment, c, validate, make_agent, name, resolve=resolve)


def population_errors(
    c: RunConfig, errors: list[str], device_count: int, name: str, size: Any, what: str
) -> RunConfig:
    """Check a population setting `name` = `size` (2 * size rollouts); the run config with `num_envs` set.

    Shared by ES and ARS: `num_envs` must be unset (or already that rollout count), the rollouts must
    split evenly over the devices, and an episode must be at least one action repeat long. `what`
    names the agent's function in messages.
    """
    if not is_int(size) or size < 1:  # the field's own check names it
        return c
    rollouts = 2 * size
    if c.num_envs not in (1, rollouts):
        errors.append(
            f"num_envs ({c.num_envs!r}) is not a setting of {what}: every generation runs 2 * {name} = "
            f"{rollouts} rollouts; leave num_envs unset"
        )
    if device_count > 0 and rollouts % device_count:
        errors.append(
            f"{name} ({size}) does not divide across the {device_count} devices used: its 2 * {size} = "
            f"{rollouts} rollouts per generation must split evenly (see max_devices_per_host)"
        )
    el, ar = c.episode_length, c.action_repeat
    if el is None and not c.wrap_env:  # with wrap_env the runner's rules already ask for it
        errors.append(f"episode_length is required: every {what} rollout is one episode of that many steps")
    if is_int(el) and is_int(ar) and ar >= 1 and el is not None and 1 <= el < ar:
        errors.append(f"episode_length ({el}) must be >= action_repeat ({ar}): a rollout is one episode")
    return c.replace(num_envs=rollouts)


__all__ = [
    "COUNTS_ENV_STEPS",
    "Act",
    "Generation",
    "Moments",
    "Population",
    "PopulationConfig",
    "Rollouts",
    "agent_fields",
    "check_observations",
    "counted_steps",
    "env_steps_per_generation",
    "env_steps_per_update",
    "evaluate",
    "nonfinite_code",
    "num_rollouts",
    "pairs",
    "perturb",
    "population_errors",
    "reduce_moments",
    "run_config",
    "steps_per_rollout",
    "train",
    "update_statistics",
    "validate",
]
