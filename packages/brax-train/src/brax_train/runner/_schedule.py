"""The run's schedule: training steps per epoch, evaluation, metrics report and jitted chunk, and the
clocks that follow it (a fixed number of env steps per update, or the env steps an update counted).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from brax_train.config import RunConfig
from brax_train.runner._agent import ENV_STEPS, Agent
from brax_train.runner._host import _Run


class _Schedule(NamedTuple):
    """The run's schedule in training steps."""

    epoch: int  # between full resets
    eval: int  # between evaluations
    metrics: int  # between training-metric reports (0: none)
    chunk: int  # training steps per jitted call
    total: int  # training steps this call runs

    @staticmethod
    def of(c: RunConfig, step: int, env_steps_per_update: int) -> _Schedule:
        resets = max(c.num_resets_per_eval, 1)
        intervals = max(c.num_evals - 1, 1)
        remaining = max(c.num_timesteps - step, 0)
        epoch = math.ceil(remaining / (intervals * env_steps_per_update * resets))
        metrics = 0
        if c.log_training_metrics:
            metrics = max(
                1, math.ceil((c.training_metrics_steps or env_steps_per_update) / env_steps_per_update)
            )
        chunk = math.gcd(epoch, metrics) if metrics else epoch
        return _Schedule(epoch, epoch * resets, metrics, chunk, intervals * epoch * resets)


def final_step(
    c: RunConfig, start_step: int, env_steps_per_update: int, counts_env_steps: bool = False
) -> int:
    """The env step a run from `start_step` stops at: `num_timesteps` rounded up to whole eval intervals
    (for agents that count their env steps, `num_timesteps`: they overshoot it by less than an update)."""
    if counts_env_steps:
        return max(start_step, int(c.num_timesteps))
    return start_step + _Schedule.of(c, start_step, env_steps_per_update).total * env_steps_per_update


def _first_chunk(c: RunConfig, agent: Agent[Any, Any], step: int) -> int:
    """Training steps in the first jitted chunk of a run from env step `step` (the clocks' rule)."""
    if agent.counts_env_steps:
        return 1
    return _Schedule.of(c, step, agent.env_steps_per_update).chunk


class _FixedClock:
    """The schedule of agents whose updates consume a fixed number of env steps: chunks of updates."""

    def __init__(self, c: RunConfig, run: _Run) -> None:
        self.per_update = run.agent.env_steps_per_update
        self.sched = _Schedule.of(c, run.step, self.per_update)
        self.chunk, self.done, self.reset = self.sched.chunk, 0, c.num_resets_per_eval > 0

    def finished(self, run: _Run) -> bool:
        return self.done >= self.sched.total

    def advance(self, run: _Run, m: dict[str, Any]) -> tuple[int, bool, bool, bool]:
        """Account a finished chunk: (env steps, at a metrics report, at an evaluation, at a reset)."""
        self.done += self.chunk
        sched, done = self.sched, self.done
        at_metrics = bool(sched.metrics) and done % sched.metrics == 0
        return self.chunk * self.per_update, at_metrics, done % sched.eval == 0, done % sched.epoch == 0


class _CountedClock:
    """The schedule of agents that count their env steps (`Agent.counts_env_steps`), as Google Brax's ES."""

    def __init__(self, c: RunConfig, run: _Run) -> None:
        self.chunk, self.reset, self.target = 1, False, c.num_timesteps
        self.between = max(1, math.ceil(max(c.num_timesteps - run.step, 0) / max(c.num_evals - 1, 1)))
        self.next_eval = run.step + self.between
        self.every = 0
        if c.log_training_metrics:
            self.every = max(1, c.training_metrics_steps or run.agent.env_steps_per_update)
        self.next_metrics = run.step + self.every

    def finished(self, run: _Run) -> bool:
        return bool(run.step >= self.target)

    def advance(self, run: _Run, m: dict[str, Any]) -> tuple[int, bool, bool, bool]:
        """Account a finished update: (env steps, at a metrics report, at an evaluation, at a reset)."""
        counted = int(np.sum(m.pop(ENV_STEPS)))
        now = run.step + counted
        at_eval = now >= min(self.next_eval, self.target)
        at_metrics = bool(self.every) and now >= self.next_metrics
        while self.next_eval <= now:
            self.next_eval += self.between
        while self.every and self.next_metrics <= now:
            self.next_metrics += self.every
        return counted, at_metrics, at_eval, False
