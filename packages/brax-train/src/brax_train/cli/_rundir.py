"""The run directory: layout, config.json, metrics.jsonl + TensorBoard logging, and the reward plot.

```
<run>/config.json      the resolved RunSpec (environment, options, imports, every PPO setting)
<run>/metrics.jsonl    one JSON object per report: {"step", "time", "elapsed", <metric>: value, ...}
                       and event lines {"event": "start" | "resume" | "end", "step", "time"}
<run>/tb/              TensorBoard event files (one per process that trained)
<run>/checkpoints/     orbax steps written by ppo.train (save_checkpoint_path)
<run>/reward.png       reward curve
<run>/replay.html      replay of the final deterministic policy (physics environments)
```
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import time
from collections.abc import Mapping
from typing import Any, TextIO

from brax_train.cli import _plot
from brax_train.cli._errors import UsageError
from brax_train.cli._settings import RunSpec
from brax_train.cli._tensorboard import EventWriter

EVAL_REWARD = "eval/episode_reward"
"""Metric of the evaluation episodes' mean return."""
TRAIN_REWARD = "episode/sum_reward"
"""Metric of the training episodes' mean return."""


class RunDir:
    """Paths of a run directory."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        """The run directory at `path` (not created here)."""
        self.path = pathlib.Path(path).absolute()

    @property
    def config(self) -> pathlib.Path:
        """config.json."""
        return self.path / "config.json"

    @property
    def metrics(self) -> pathlib.Path:
        """metrics.jsonl."""
        return self.path / "metrics.jsonl"

    @property
    def tensorboard(self) -> pathlib.Path:
        """tb/ (TensorBoard log directory)."""
        return self.path / "tb"

    @property
    def checkpoints(self) -> pathlib.Path:
        """checkpoints/ (orbax run directory)."""
        return self.path / "checkpoints"

    @property
    def plot(self) -> pathlib.Path:
        """reward.png."""
        return self.path / "reward.png"

    @property
    def replay(self) -> pathlib.Path:
        """replay.html."""
        return self.path / "replay.html"

    def write_config(self, spec: RunSpec, extra: Mapping[str, Any]) -> None:
        """Write config.json atomically: `spec` plus informational entries (`extra`)."""
        self.path.mkdir(parents=True, exist_ok=True)
        text = json.dumps({**spec.to_json(), **extra}, indent=2, sort_keys=False) + "\n"
        _write_text_atomic(self.config, text)

    def read_config(self, flag: str = "DIR") -> tuple[RunSpec, dict[str, Any]]:
        """The run's `RunSpec` and the whole config.json object; `UsageError` if this is no run dir."""
        if not self.path.is_dir():
            raise UsageError(f"{flag}: no such directory {str(self.path)!r}")
        if not self.config.is_file():
            raise UsageError(f"{flag}: {str(self.path)!r} is not a run directory (no config.json)")
        try:
            data = json.loads(self.config.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise UsageError(f"{flag}: cannot read {str(self.config)!r}: {e}") from None
        return RunSpec.from_json(data, str(self.config)), data


def _write_text_atomic(path: pathlib.Path, text: str) -> None:
    _plot.write_atomic(path, text.encode("utf-8"))


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

    def __init__(self, run: RunDir) -> None:
        """Open the run's metrics file (append) and a new TensorBoard event file."""
        self._t0 = time.time()
        self._file: TextIO = run.metrics.open("a", encoding="utf-8")
        self._tb = EventWriter(run.tensorboard)

    def event(self, name: str, step: int, **fields: Any) -> None:
        """An event line (`start`, `resume`, `end`)."""
        self._line({"event": name, "step": int(step), "time": time.time(), **fields})

    def report(self, step: int, metrics: Mapping[str, Any]) -> None:
        """One progress report of `ppo.train`."""
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
    """The reports of a metrics file in order; after a `resume` event, reports past its step are
    dropped (they came from the part of the run a kill lost). A torn last line is ignored."""
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


def write_plot(run: RunDir, title: str) -> bool:
    """Draw reward.png from metrics.jsonl; False when there is nothing to plot yet."""
    reports = read_metrics(run.metrics)
    series = []
    for key, label, color in (
        (EVAL_REWARD, "eval reward", _plot.BLUE),
        (TRAIN_REWARD, "training reward", _plot.ORANGE),
    ):
        xs, ys = reward_series(reports, key)
        if xs:
            series.append(_plot.Series(label, xs, ys, color))
    if not series:
        return False
    chart = _plot.line_chart(series, title=title, xlabel="environment steps", ylabel="episode reward")
    _plot.write_png(run.plot, chart)
    return True


__all__ = [
    "EVAL_REWARD",
    "TRAIN_REWARD",
    "MetricsLog",
    "RunDir",
    "read_metrics",
    "reward_series",
    "write_plot",
]
