"""Training progress: a live rich bar on a terminal, plain `progress:` lines otherwise."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TextIO

from brax_train.reporting.metrics import EVAL_REWARD, TRAIN_REWARD

if TYPE_CHECKING:
    import rich.progress


def format_number(v: float) -> str:
    """Short human form: 1500 -> 1.5k, 2000000 -> 2M, 0.25 -> 0.25."""
    a = abs(v)
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if a >= div:
            return f"{v / div:.3g}{unit}"
    return "0" if a == 0 else f"{v:.3g}"


def format_duration(seconds: float) -> str:
    """`1h02m`, `3m07s` or `42s`; `?` when unknown."""
    if not math.isfinite(seconds) or seconds < 0:
        return "?"
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


class Progress:
    """Shows steps, steps/s, reward and ETA after each report of `ppo.train`."""

    def __init__(
        self,
        total: int,
        stream: TextIO,
        start_step: int = 0,
        tty: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Report against `total` env steps on `stream` (`tty` defaults to `stream.isatty()`)."""
        self.total = total
        self.stream = stream
        self.tty = stream.isatty() if tty is None else tty
        self._clock = clock
        self._t_start = clock()
        self._first: tuple[int, float] | None = None
        self._start_step = start_step
        self.step = start_step
        self.reward: float | None = None
        self._eval_seen = False
        self._bar: rich.progress.Progress | None = None

    def update(self, step: int, metrics: Mapping[str, Any]) -> None:
        """Record a report and redraw."""
        now = self._clock()
        if self._first is None and step > self._start_step:
            # The first report after the start pays for compilation: measure from the start.
            self._first = (self._start_step, self._t_start)
        self.step = int(step)
        # Evaluation reward once there is one (training episodes are stochastic and, early in a
        # window, only the short failed ones have ended); training reward before the first evaluation.
        for key in (EVAL_REWARD, TRAIN_REWARD):
            v = metrics.get(key)
            if (
                isinstance(v, int | float)
                and math.isfinite(v)
                and (key == EVAL_REWARD or not self._eval_seen)
            ):
                self.reward = float(v)
                self._eval_seen = self._eval_seen or key == EVAL_REWARD
                break
        self._draw(self.line(now))

    def rate(self, now: float | None = None) -> float | None:
        """Env steps per second so far, or None before any step was reported."""
        # Wall clock since this object was made: evaluation and checkpointing count, so the ETA is honest.
        if self._first is None:
            return None
        s0, t0 = self._first
        now = self._clock() if now is None else now
        if now <= t0 or self.step <= s0:
            return None
        return (self.step - s0) / (now - t0)

    def line(self, now: float | None = None) -> str:
        """The status text: `45% 1.2M/3M steps | 12.3k steps/s | reward 123.4 | ETA 2m03s`."""
        rate = self.rate(now)
        pct = 100.0 * min(self.step / self.total, 1.0) if self.total else 100.0
        eta = (self.total - self.step) / rate if rate else float("nan")
        reward = "?" if self.reward is None else f"{self.reward:.4g}"
        parts = [
            f"{pct:3.0f}% {format_number(self.step)}/{format_number(self.total)} steps",
            f"{format_number(rate) if rate else '?'} steps/s",
            f"reward {reward}",
            f"ETA {format_duration(max(eta, 0.0)) if self.step < self.total else '0s'}",
        ]
        return " | ".join(parts)

    def _draw(self, text: str) -> None:
        if not self.tty:
            self.stream.write(f"progress: {text}\n")
            self.stream.flush()
            return
        if self._bar is None:
            from rich.console import Console
            from rich.progress import BarColumn, TextColumn
            from rich.progress import Progress as Bar

            # Redrawn on each report only: the text is ours, so a refresh thread would add nothing.
            console = Console(file=self.stream, force_terminal=True)
            self._bar = Bar(
                BarColumn(bar_width=None),
                TextColumn("{task.description}", markup=False),
                console=console,
                auto_refresh=False,
                get_time=self._clock,
            )
            self._bar.add_task(text, total=max(self.total, 1))
            self._bar.start()
        task = self._bar.task_ids[0]
        self._bar.update(task, completed=min(self.step, self.total), description=text, refresh=True)

    def close(self) -> None:
        """Stop the live bar, leaving its last state on screen."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


__all__ = ["Progress", "format_duration", "format_number"]
