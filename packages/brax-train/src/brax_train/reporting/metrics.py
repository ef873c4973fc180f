"""metrics.jsonl and TensorBoard logging of training reports, usable as a `progress_fn` backend."""

from __future__ import annotations

import json
import math
import os
import pathlib
import time
from collections.abc import Mapping
from typing import Any, TextIO

from brax_train.reporting.tensorboard import EventWriter

EVAL_REWARD = "eval/episode_reward"
"""Metric of the evaluation episodes' mean return."""
TRAIN_REWARD = "episode/sum_reward"
"""Metric of the training episodes' mean return."""


def _json_number(v: Any) -> float | int | None:
    # Strict JSON has no NaN/Infinity: non-finite values are written as null.
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    f = float(v)
    return f if math.isfinite(f) else None


class MetricsLog:
    """Appends reports to metrics.jsonl and TensorBoard; each line is flushed as written."""

    def __init__(self, path: str | os.PathLike[str], tensorboard_dir: str | os.PathLike[str]) -> None:
        """Append to JSON-lines file `path`; write a new TensorBoard event file in `tensorboard_dir`."""
        self._t0 = time.time()
        # Open for the log's lifetime (one flushed line per report); `close()` closes it.
        self._file: TextIO = pathlib.Path(path).open("a", encoding="utf-8")  # noqa: SIM115
        self._tb = EventWriter(tensorboard_dir)

    def event(self, name: str, step: int, **fields: Any) -> None:
        """An event line (`start`, `resume`, `end`)."""
        self._line({"event": name, "step": int(step), "time": time.time(), **fields})
        if name == "resume":
            self._tb.purge_from(int(step))

    def report(self, step: int, metrics: Mapping[str, Any]) -> None:
        """One progress report (`progress_fn(step, metrics)`)."""
        now = time.time()
        values: dict[str, float | int | None] = {}
        for k, v in metrics.items():
            try:
                values[str(k)] = _json_number(v)
            except (TypeError, ValueError):
                continue  # a non-numeric metric: nothing to log
        self._line({"step": int(step), "time": now, "elapsed": now - self._t0, **values})
        self._tb.scalars(int(step), {k: float(v) for k, v in values.items() if v is not None}, now)

    def _line(self, obj: Mapping[str, Any]) -> None:
        self._file.write(json.dumps(obj, allow_nan=False) + "\n")
        self._file.flush()

    def close(self) -> None:
        """Close both files."""
        self._file.close()
        self._tb.close()


def read_metrics(path: pathlib.Path) -> list[dict[str, Any]]:
    """The reports of a metrics file in order, without those a `resume` event's step makes stale."""
    # Reports past a resume's step came from the part of the run a kill lost; a torn last line is skipped.
    if not path.is_file():
        return []
    out: list[dict[str, Any]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("step"), int):
            continue
        if obj.get("event") == "resume":
            out = [o for o in out if o["step"] <= obj["step"]]
        elif "event" not in obj:
            out.append(obj)
    return out


def reward_series(reports: list[dict[str, Any]], key: str) -> tuple[list[float], list[float]]:
    """(steps, values) of metric `key` (the last report per step wins)."""
    by_step: dict[int, float] = {}
    for r in reports:
        v = r.get(key)
        if isinstance(v, int | float) and not isinstance(v, bool):
            by_step[int(r["step"])] = float(v)
    steps = sorted(by_step)
    return [float(s) for s in steps], [by_step[s] for s in steps]


__all__ = ["EVAL_REWARD", "TRAIN_REWARD", "MetricsLog", "read_metrics", "reward_series"]
