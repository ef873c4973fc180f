"""The host side of a run: its keys and mutable progress (`_Run`), evaluation, reports, metric windows,
checkpoint writes and the non-finite check (no tracing).

In a multi-process run process 0 alone evaluates, reports and writes checkpoints.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import pathlib
import threading
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import brax_envs
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding

from brax_train import acting, checkpoint, distributed, networks
from brax_train.config import RunConfig
from brax_train.runner._agent import NONFINITE, NONFINITE_QUANTITIES, Agent, NonFiniteError, key_at
from brax_train.runner._sharding import AXIS, P, wrap_env
from brax_train.types import Metrics, PRNGKey, UInt64

logger = logging.getLogger("brax_train.runner")


class _Keys(NamedTuple):
    agent: PRNGKey
    train: PRNGKey
    env: PRNGKey
    eval: PRNGKey
    reset: PRNGKey


def _keys(seed: int) -> _Keys:
    # The same on every process: the batch is one global array over all processes' devices, so
    # 2 processes x 2 devices draw what 1 process x 4 devices draws. (Folding in 0 keeps the key
    # stream of the first release, which folded in the process index.)
    global_key, run_key = jax.random.split(jax.random.PRNGKey(seed))
    train_key, key_env, eval_key, reset_key = jax.random.split(jax.random.fold_in(run_key, 0), 4)
    return _Keys(global_key, train_key, key_env, eval_key, reset_key)


@dataclasses.dataclass
class _Run:
    """The host side of a run: devices, environments, the agent and its mutable progress."""

    c: RunConfig
    devices: list[jax.Device]
    mesh: Mesh
    keys: _Keys
    env: brax_envs.Env
    env_shardings: Any
    reset_fn: Callable[[jax.Array], brax_envs.State]
    agent: Agent[Any, Any]
    state: Any
    env_state: brax_envs.State
    train_key: PRNGKey
    step: int = 0
    index: int = 0  # of the next training step (its randomness and resets are keyed by it)
    last_checkpoint: str | None = None
    observation_size: brax_envs.ObservationSize = 0
    chunk_fn: Any = None  # the jitted chunk of training steps (`_chunk_fn`), one per run: its cache
    ahead: threading.Thread | None = None  # compiling the first chunk (`_compile_ahead`), or None

    def reset(self, index: int) -> None:
        """Full reset of every training environment, keyed by training-step index."""
        keys = jax.random.split(key_at(self.keys.reset, UInt64.from_int(index)), self.c.num_envs)
        self.env_state = self.reset_fn(jax.device_put(keys, NamedSharding(self.mesh, P(AXIS))))

    def params(self) -> Any:
        """The agent's current policy parameters."""
        return self.agent.policy_params(self.state)


def _evaluator(run: _Run, environment: brax_envs.Env) -> acting.Evaluator | None:
    c = run.c
    if not (c.num_evals > 0 and c.run_evals and distributed.is_primary()):
        return None
    # Evaluation measures each eval env's first episode only (`EvalWrapper`), so re-drawing at
    # auto-resets would never be seen there: it keeps the once-per-run draw of `num_eval_envs` systems.
    eval_env = wrap_env(c.eval_env or environment, c, c.num_eval_envs, jax.random.fold_in(run.keys.eval, 1))
    assert c.episode_length is not None
    return acting.Evaluator(
        eval_env,
        functools.partial(run.agent.make_policy, deterministic=c.deterministic_eval),
        num_eval_envs=c.num_eval_envs,
        episode_length=c.episode_length,
        action_repeat=c.action_repeat,
        key=run.keys.eval,
    )


def _local_copy(x: Any) -> Any:
    """A replicated array of a multi-process mesh as this process's copy on one local device."""
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
        if not x.is_fully_replicated:
            raise ValueError(f"an array of shape {x.shape} sharded across processes has no local copy")
        return x.addressable_data(0)
    return x


class _Host:
    """Evaluation, reporting and checkpointing of one run (host side, no tracing).

    In a multi-process run only the primary process evaluates, reports, calls `policy_params_fn` and
    writes checkpoints; every process takes part in gathering the state a checkpoint holds.
    """

    def __init__(self, run: _Run, environment: brax_envs.Env) -> None:
        self.run = run
        self.primary = distributed.is_primary()
        self.evaluator = _evaluator(run, environment)
        c = run.c
        self.saver = None
        if c.save_checkpoint_path is not None and self.primary:
            self.saver = checkpoint.Saver(c.save_checkpoint_path, max_to_keep=c.checkpoint_max_to_keep)
        shapes = networks.observation_size_to_json(networks.observation_shapes(run.observation_size))
        self.meta = {
            "config": c.to_json(),
            **run.agent.meta,
            "env_steps_per_training_step": run.agent.env_steps_per_update,
            "observation_shapes": shapes,
            "action_size": run.env.action_size,
        }

    def save(self, at_step: int) -> None:
        """Write a checkpoint of the current state at env step `at_step` (a collective when multi-process)."""
        run = self.run
        if run.c.save_checkpoint_path is None:
            return
        meta = {**self.meta, "step": at_step, "training_step": run.index}
        params = run.params()
        train_state = {"agent_state": run.state, "train_key": run.train_key, "env_state": run.env_state}
        if jax.process_count() > 1:  # the environment state is sharded across processes: gather it
            params, train_state = distributed.to_host((params, train_state))
        if self.saver is not None:
            run.last_checkpoint = os.fspath(self.saver.save(at_step, params, train_state, meta))
        distributed.barrier(f"brax_train.runner.save.{at_step}")
        if self.saver is None:
            directory = pathlib.Path(run.c.save_checkpoint_path).absolute()
            run.last_checkpoint = os.fspath(directory / str(at_step))

    def evaluate(self, at_step: int, training_metrics: dict[str, float]) -> dict[str, float]:
        """Evaluation metrics at `at_step` merged with `training_metrics`."""
        if self.evaluator is None:
            return dict(training_metrics)
        key = key_at(jax.random.fold_in(self.run.keys.eval, 2), UInt64.from_int(at_step))
        local = next(d for d in self.run.devices if d.process_index == jax.process_index())
        params = jax.device_put(jax.tree.map(_local_copy, self.run.params()), local)
        return self.evaluator.run_evaluation(params, training_metrics, key)

    def report(self, at_step: int, metrics: Metrics) -> None:
        """Log and pass to `progress_fn`."""
        logger.info("step %d: %s", at_step, metrics)
        if self.run.c.progress_fn is not None and self.primary:
            self.run.c.progress_fn(at_step, metrics)

    def policy_params(self, at_step: int) -> None:
        """Call `policy_params_fn(step, make_policy, params)` if given."""
        if self.run.c.policy_params_fn is not None and self.primary:
            # A copy: the next training step donates the state's buffers, and the callback may keep
            # what it is given (a list of snapshots, an exporter running later).
            params = jax.tree.map(jnp.copy, self.run.params())
            self.run.c.policy_params_fn(at_step, self.run.agent.make_policy, params)

    def close(self) -> None:
        """Finish pending checkpoint writes."""
        if self.saver is not None:
            self.saver.close()


class _Window:
    """Sums of per-step metrics between two reports."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.steps = 0
        self.env_steps = 0
        self.seconds = 0.0

    def add(self, m: Mapping[str, Any], steps: int, env_steps: int, seconds: float) -> None:
        for k, v in m.items():
            self.sums[k] = self.sums.get(k, 0.0) + float(np.sum(np.asarray(v, np.float64)))
        self.steps += steps
        self.env_steps += env_steps
        self.seconds += seconds

    def metrics(self, walltime: float) -> dict[str, float]:
        """`training/*` means per step and `episode/*` means per finished episode."""
        out: dict[str, float] = {}
        count = self.sums.get("episode_count", 0.0)
        for k, v in self.sums.items():
            if k.startswith("episode_sum/"):
                if count > 0:
                    out["episode/" + k.removeprefix("episode_sum/")] = v / count
            elif k != "episode_count":
                out["training/" + k] = v / max(self.steps, 1)
        out["episode/count"] = count
        sps = self.env_steps / self.seconds if self.seconds > 0 else float("inf")
        out["training/sps"] = sps
        out["training/walltime"] = walltime
        return out


def _check_finite(m: dict[str, Any], run: _Run, env_steps_per_update: int) -> None:
    codes = np.asarray(m.pop(NONFINITE, 0))
    if np.any(codes):
        i = int(np.argmax(np.ravel(codes) > 0))
        quantity = NONFINITE_QUANTITIES[int(np.ravel(codes)[i])]
        at = run.step + (i + 1) * env_steps_per_update
        where = run.last_checkpoint if run.last_checkpoint is not None else "none (no checkpoint saved yet)"
        raise NonFiniteError(
            f"non-finite {quantity} in the training step ending at env step {at} (training stopped); "
            f"last good checkpoint: {where}",
            step=at,
            quantity=quantity,
            last_checkpoint=run.last_checkpoint,
        )
