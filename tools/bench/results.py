"""Benchmark results as data: `record` appends the rows a bench script prints to `results.jsonl`.

Each line is one printed row with four fields in front: `commit` (short hash of HEAD, `-dirty` when
tracked files differ from it; null outside git), `utc` (ISO-8601, seconds), `bench` (the script:
physics, envs, train, scale, ab, torch) and `machine` (an accelerator's name, else the CPU's model
and cores). A row's own `bench` field (scale.py's and torch_bridge.py's kind of measurement) is kept
as `kind`. `tools/bench/render.py` turns the file into the tables of README.md and RESULTS.md.
The file is `tools/bench/results.jsonl` unless `path` or `$BRAX_BENCH_RESULTS` names another.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_PATH = HERE / "results.jsonl"
"""Where rows go unless `path` or `$BRAX_BENCH_RESULTS` says otherwise."""
ENV_VAR = "BRAX_BENCH_RESULTS"
"""Environment variable that overrides `DEFAULT_PATH` (tests point it at a temporary file)."""
BENCHES = ("physics", "envs", "train", "scale", "ab", "torch")
"""The bench scripts, by the names their rows are recorded under."""
META = ("commit", "utc", "bench", "machine")
"""The fields `record` puts in front of every row."""
RENAMED = {"bench": "kind"}
"""A row's own fields that clash with `META`, and the names they are kept under."""
# Accelerator platforms as JAX prints them, in "platform:kind" (physics.py, envs.py) or
# str(device) ("cuda:0": train.py, torch_bridge.py) rows.
_ACCELERATORS = ("gpu", "cuda", "rocm", "tpu")


def results_path(path: str | os.PathLike[str] | None = None) -> Path:
    """The results file: `path`, else `$BRAX_BENCH_RESULTS`, else `DEFAULT_PATH`."""
    if path is not None:
        return Path(path)
    env = os.environ.get(ENV_VAR)
    return Path(env) if env else DEFAULT_PATH


def _git(*args: str) -> str | None:
    """stdout of `git args` run in this file's checkout, or None where git or the checkout is missing."""
    try:
        out = subprocess.run(["git", "-C", str(HERE), *args], capture_output=True, text=True,
                             check=False, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def commit() -> str | None:
    """Short hash of HEAD, `-dirty` when tracked files have changes; None outside git."""
    head = _git("rev-parse", "--short", "HEAD")
    if not head:
        return None
    # Untracked files (scratch output, a results file of one's own) do not change what was measured.
    status = _git("status", "--porcelain", "--untracked-files=no")
    return f"{head}-dirty" if status else head


def utc_now() -> str:
    """The current UTC time, ISO-8601 to the second (2026-12-06T15:50:00Z)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def cpu_machine(cpuinfo: str | None = None, cores: int | None = None) -> str:
    """`N-core MODEL` from /proc/cpuinfo's model name (or `cpuinfo`'s text) and `os.cpu_count()`."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:  # not Linux: the core count alone still tells machines apart
            cpuinfo = ""
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines()
                  if line.startswith("model name") and ":" in line), "") or "CPU"
    return f"{cores or os.cpu_count() or 1}-core {model}"


def _gpu_name() -> str | None:
    """The first GPU's name from nvidia-smi, or None without one."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, check=False, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    names = out.stdout.strip().splitlines() if out.returncode == 0 else []
    return names[0].strip() if names else None


def machine(row: Mapping[str, Any]) -> str:
    """The row's accelerator (from its `device` field) or, for CPU rows, `cpu_machine()`."""
    device = row.get("device")
    if isinstance(device, str) and ":" in device:
        platform, kind = device.split(":", 1)
        if platform.lower() in _ACCELERATORS:
            # "gpu:NVIDIA H200" names the device; "cuda:0" only its index.
            return kind if not kind.isdigit() else _gpu_name() or device
    return cpu_machine()


def stamp(row: Mapping[str, Any], *, bench: str, commit_: str | None, utc: str) -> dict[str, Any]:
    """`row` with the `META` fields in front (its own clashing fields renamed per `RENAMED`)."""
    if bench not in BENCHES:
        raise ValueError(f"bench {bench!r}: expected one of {', '.join(BENCHES)}")
    out: dict[str, Any] = {"commit": commit_, "utc": utc, "bench": bench, "machine": machine(row)}
    for key, value in row.items():
        name = RENAMED.get(key, key)
        if name in out:
            raise ValueError(f"row field {key!r} clashes with the recorded {name!r}")
        out[name] = value
    return out


def record(rows: Iterable[Mapping[str, Any]], *, bench: str,
           path: str | os.PathLike[str] | None = None) -> Path:
    """Append each of `rows` as one JSON line, stamped with commit, utc, bench and machine; the file."""
    target = results_path(path)
    head, now = commit(), utc_now()
    lines = [json.dumps(stamp(row, bench=bench, commit_=head, utc=now)) + "\n" for row in rows]
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("a", encoding="utf-8") as f:
        f.writelines(lines)
    return target
