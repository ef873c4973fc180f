"""The run directory: layout, config.json, metrics.jsonl + TensorBoard logging, and the reward plot.

```
<run>/config.json      the resolved RunSpec (environment, options, imports, every PPO setting), and
                       "cpu_devices" when `--cpu-devices` set it (resume makes as many)
<run>/metrics.jsonl    one JSON object per report: {"step", "time", "elapsed", <metric>: value, ...}
                       and event lines {"event": "start" | "resume" | "end", "step", "time"}
                       (start and resume with "devices", how many the run trains on)
<run>/tb/              TensorBoard event files, tensorboardX (one per process that trained)
<run>/checkpoints/     orbax steps written by ppo.train (save_checkpoint_path)
<run>/reward.png       reward, loss, entropy, KL and steps/s curves (matplotlib, optional)
<run>/replay.html      replay of the final deterministic policy (physics environments)
```
"""

from __future__ import annotations

import json
import os
import pathlib
from collections.abc import Mapping
from typing import Any

from brax_train.cli._errors import UsageError
from brax_train.cli._settings import RunSpec


class RunDir:
    """Paths of a run directory (the layout above); nothing is created here."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        """The run directory at `path`."""
        self.path = pathlib.Path(path).absolute()
        self.config = self.path / "config.json"
        self.metrics = self.path / "metrics.jsonl"
        self.tensorboard = self.path / "tb"
        self.checkpoints = self.path / "checkpoints"
        self.plot = self.path / "reward.png"
        self.replay = self.path / "replay.html"

    def write_config(self, spec: RunSpec, extra: Mapping[str, Any]) -> None:
        """Write config.json atomically: `spec` plus informational entries (`extra`)."""
        self.path.mkdir(parents=True, exist_ok=True)
        from brax_io import write_atomic

        data = (json.dumps({**spec.to_json(), **extra}, indent=2, sort_keys=False) + "\n").encode()
        write_atomic(self.config, lambda f: f.write(data))

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


__all__ = ["RunDir"]
