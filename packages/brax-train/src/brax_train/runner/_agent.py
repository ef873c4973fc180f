"""What an agent is to the runner: `Agent`, what it is handed (`Setup`), what a run returns, its metric keys.

An agent is a pure pair in optax's shape (`Agent.init`, `Agent.update`) built by a `MakeAgent` factory
for the wrapped environment; its metrics may carry `NONFINITE` and `ENV_STEPS`. `key_at` is the
determinism rule: training step `t` draws its randomness from `fold_in(train_key, t)`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Generic, NamedTuple, TypeVar

import brax_envs
import jax
import jax.numpy as jnp
from jax.sharding import Mesh

from brax_train.types import PRNGKey, UInt64

State = TypeVar("State")
Params = TypeVar("Params")

NONFINITE = "nonfinite"
"""Metric key of an update's non-finite code: 0 fine, else a key of `NONFINITE_QUANTITIES`."""
NONFINITE_QUANTITIES = {1: "loss", 2: "gradients", 3: "parameters", 4: "normalizer statistics"}
"""What a non-zero `NONFINITE` code names in `NonFiniteError`."""
ENV_STEPS = "env_steps"
"""Metric key of the environment steps an update consumed (agents with `Agent.counts_env_steps`)."""


def episode_sums(info: Mapping[str, Any]) -> dict[str, jax.Array]:
    """`episode_count` and `episode_sum/<name>` of the episodes that ended in a batch, from its
    `info` (or state extras) `episode_done` and `episode_metrics`; empty when the env reports none."""
    if "episode_done" not in info or "episode_metrics" not in info:
        return {}
    done = info["episode_done"]
    sums = {"episode_count": jnp.sum(done)}
    for name, v in info["episode_metrics"].items():
        sums[f"episode_sum/{name}"] = jnp.sum(v * done)
    return sums


def checkpoint_meta(agent: str, network: dict[str, Any], normalize_observations: bool,
                    **extra: Any) -> dict[str, Any]:
    """An agent's `Agent.meta`: what every agent's checkpoints record and `checkpoint.load` reads (the
    agent's name, its networks' description, whether observations are normalized), then `extra`."""
    return {"agent": agent, "network": network, "normalize_observations": normalize_observations, **extra}


def key_at(key: PRNGKey, index: UInt64) -> PRNGKey:
    """The key of training step (or env step) `index`: independent of how steps are chunked."""
    return jax.random.fold_in(jax.random.fold_in(key, index.hi), index.lo)


class TrainResult(NamedTuple):
    """What `train` returns: `make_policy, params, metrics = agent.train(...)`."""

    make_policy: Callable[..., Any]
    """`make_policy(params, deterministic=False) -> policy(obs, key) -> (action, extras)`."""
    params: Any
    """Final policy parameters (what `make_policy` and checkpoints take)."""
    metrics: dict[str, float]
    """Metrics of the last evaluation (or training-metrics report)."""


class NonFiniteError(FloatingPointError):
    """Training produced a non-finite loss, gradient or parameter; the message names step and checkpoint."""

    def __init__(self, message: str, *, step: int, quantity: str, last_checkpoint: str | None) -> None:
        """Record the offending env step, the quantity and the last good checkpoint."""
        super().__init__(message)
        self.step = step
        self.quantity = quantity
        self.last_checkpoint = last_checkpoint


@dataclasses.dataclass(frozen=True)
class Agent(Generic[State, Params]):
    """A training algorithm as a pure pair in optax's shape, plus what the runner needs to host it."""

    init: Callable[[PRNGKey], State]
    """`init(key) -> state`: fresh learner state; `key` is the same on every process."""
    update: Callable[[State, brax_envs.State, PRNGKey], tuple[State, brax_envs.State, dict[str, jax.Array]]]
    """`update(state, env_state, key) -> (state, env_state, metrics)`: one training step (traceable).

    Metrics are scalars averaged over the step, except `episode_count`, `episode_sum/*` (summed)
    and `NONFINITE` (an int code)."""
    policy_params: Callable[[State], Params]
    """The parameters `make_policy` takes (and checkpoints' `params` item holds)."""
    make_policy: Callable[..., Any]
    """`make_policy(params, deterministic=False) -> policy`."""
    env_steps_per_update: int
    """Environment steps (action repeats included) one `update` consumes."""
    warm_start: Callable[[State, Params], State]
    """`warm_start(state, params) -> state` starting from given policy parameters (fresh optimizer)."""
    full_resume: bool = True
    """Resume restores the whole state from a checkpoint; False: only `warm_start` from its params."""
    counts_env_steps: bool = False
    """`update`'s metrics carry `ENV_STEPS`, the environment steps it consumed (at most
    `env_steps_per_update`; ES and ARS count only steps of episodes still running, as Google Brax
    does), and the run follows that count: one update per jitted call until `num_timesteps`
    counted steps, evaluations every `num_timesteps / (num_evals - 1)` counted steps."""
    meta: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """JSON metadata stored in every checkpoint (`checkpoint_meta`): `agent` (its name in
    `agents.AGENTS`, which `checkpoint.load` dispatches on), the network description, and what else
    rebuilding needs."""


class Setup(NamedTuple):
    """What the runner hands an agent factory: the wrapped training environment and its placement."""

    env: brax_envs.Env
    """The wrapped, batched training environment."""
    observation_size: brax_envs.ObservationSize
    """Its observation size (`brax_envs.observation_size_of`)."""
    state_shape: brax_envs.State
    """Abstract batched environment state (shapes, `info` keys)."""
    mesh: Mesh
    """The device mesh (one axis, `AXIS`)."""
    env_shardings: Any
    """Shardings of the environment state: the environment axis split over `AXIS`."""


MakeAgent = Callable[[Setup], Agent[Any, Any]]
"""`make_agent(setup) -> Agent`."""
