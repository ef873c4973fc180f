"""The `brax-train` command line end to end, in subprocesses, on an environment defined by an MJCF string.

`train` on `mjcf_cartpole` (tests-integration/mjcf_cartpole.py, loaded with `--import`) must produce
the whole run directory; `eval` and `render` (HTML and GIF) then work from that directory alone; bad
arguments fail with one line and exit status 2.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import struct
import subprocess
import sys
import tomllib
from typing import Any

import pytest
from brax_train import checkpoint
from brax_train.reporting import read_records

pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parents[1]
ENV_MODULE = pathlib.Path(__file__).with_name("mjcf_cartpole.py")
TINY = [
    "--import",
    str(ENV_MODULE),
    "--env",
    "mjcf_cartpole",
    "--num-timesteps",
    "1600",
    "--num-envs",
    "8",
    "--set",
    "batch_size=8",
    "--set",
    "num_minibatches=4",
    "--set",
    "unroll_length=5",
    "--set",
    "num_evals=3",
    "--set",
    "num_eval_envs=4",
    "--set",
    "episode_length=50",
    "--set",
    'network_factory={"policy_hidden_layer_sizes": [16], "value_hidden_layer_sizes": [16]}',
]


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run `python -m brax_train.cli ARGS` (stdout and stderr captured; not a terminal)."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    return subprocess.run(
        [sys.executable, "-m", "brax_train.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("cli") / "run"
    p = cli("train", *TINY, "--run-dir", str(path), "--cpu-devices", "auto")
    assert p.returncode == 0, p.stderr[-4000:]
    return {"path": path, "proc": p}


def test_train_writes_the_whole_run_dir(run: dict[str, Any]) -> None:
    path: pathlib.Path = run["path"]
    config = json.loads((path / "config.json").read_text())
    assert config["env"] == "mjcf_cartpole"
    assert config["imports"] == [str(ENV_MODULE)]
    assert config["ppo"]["num_timesteps"] == 1600 and config["ppo"]["episode_length"] == 50
    # --cpu-devices auto: one device per core this process may use, as far as 8 envs divide
    cores = len(os.sched_getaffinity(0))
    devices = max(d for d in range(1, min(cores, 8) + 1) if 8 % d == 0)
    assert f"--cpu-devices auto: {devices} CPU device" in run["proc"].stderr, run["proc"].stderr
    assert config["cpu_devices"] == devices

    rows = [
        json.loads(line, parse_constant=lambda c: 1 / 0)
        for line in (path / "metrics.jsonl").read_text().splitlines()
    ]
    assert rows[0]["event"] == "start" and rows[-1]["event"] == "end" and rows[-1]["step"] >= 1600
    assert rows[0]["devices"] == devices
    reports = [r for r in rows if "event" not in r]
    assert all(isinstance(r["step"], int) and r["time"] > 0 for r in reports)
    assert sum("eval/episode_reward" in r for r in reports) == 3
    assert any("episode/sum_reward" in r for r in reports)

    png = (path / "reward.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
    assert struct.unpack(">II", png[16:24]) == (800, 480)

    html = (path / "replay.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and "braxViewer(" in html
    data = json.loads(
        html.split("braxViewer(document.getElementById(")[1].split(", ", 1)[1].rsplit(");", 1)[0]
    )
    assert data["bodies"][1:] == ["cart", "pole"] and data["num_frames"] >= 2
    assert data["dt"] == pytest.approx(0.04)

    (event_file,) = (path / "tb").glob("events.out.tfevents.*")
    records = read_records(event_file)
    assert len(records) == 1 + len(reports)
    assert b"brain.Event:2" in records[0] and b"eval/episode_reward" in b"".join(records)

    steps = sorted(int(d.name) for d in (path / "checkpoints").iterdir() if d.name.isdigit())
    assert len(steps) == 2 and steps[-1] >= 1600
    checkpoint.verify(path / "checkpoints" / str(steps[-1]))


def test_progress_is_plain_lines_without_a_terminal(run: dict[str, Any]) -> None:
    err = run["proc"].stderr
    lines = [line for line in err.splitlines() if line.startswith("progress: ")]
    assert lines and "\r" not in err
    assert "steps/s" in lines[-1] and "ETA" in lines[-1] and "reward" in lines[-1]
    assert lines[-1].startswith("progress: 100%")
    assert f"run dir: {run['path']}" in run["proc"].stdout


def test_eval(run: dict[str, Any]) -> None:
    p = cli("eval", str(run["path"]), "--episodes", "3")
    assert p.returncode == 0, p.stderr[-4000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["episodes"] == 3 and out["env"] == "mjcf_cartpole"
    assert 1 <= out["reward_mean"] <= 50 and out["reward_std"] >= 0
    assert out["checkpoint_step"] >= 1600


def test_render_html_and_gif(run: dict[str, Any], tmp_path: pathlib.Path) -> None:
    p = cli("render", str(run["path"]), "--out", str(tmp_path / "ep.html"), "--max-steps", "30")
    assert p.returncode == 0, p.stderr[-4000:]
    html = (tmp_path / "ep.html").read_text()
    assert "braxViewer(" in html and '"pole"' in html
    p = cli(
        "render",
        str(run["path"]),
        "--out",
        str(tmp_path / "ep.gif"),
        "--max-steps",
        "10",
        "--width",
        "64",
        "--height",
        "48",
    )
    assert p.returncode == 0, p.stderr[-4000:]
    gif = (tmp_path / "ep.gif").read_bytes()
    assert gif[:6] in (b"GIF87a", b"GIF89a")
    assert struct.unpack("<HH", gif[6:10]) == (64, 48)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["train", "--num-envs", "x"], "brax-train: error: --num-envs: expected a positive integer, got 'x'"),
        (["train", "--env", "zzz"], "brax-train: error: --env: unknown environment 'zzz'; accepted: ant, "),
        (
            ["render", "somewhere", "--out", "ep.avi"],
            "brax-train: error: --out: expected a file ending in .html, .gif, .mp4, got 'ep.avi'",
        ),
        (["train", "--env", "fast", "--set", "batch_size=3"], "brax-train: error: invalid PPO settings: "),
    ],
)
def test_bad_arguments_exit_2_with_one_line(args: list[str], expected: str) -> None:
    p = cli(*args)
    assert p.returncode == 2
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert p.stderr.startswith(expected)
    assert "Traceback" not in p.stderr and p.stdout == ""


def test_envs_lists_the_custom_environment() -> None:
    # matched by name: describing every registered environment builds and traces each of them
    p = cli("envs", "--import", str(ENV_MODULE), "--match", "mjcf_*")
    assert p.returncode == 0, p.stderr[-4000:]
    row = next(line for line in p.stdout.splitlines() if line.startswith("mjcf_cartpole "))
    assert row.split()[1:5] == ["4", "1", "0.04", "generalized"]


def test_console_script() -> None:
    with open(ROOT / "packages" / "brax-train" / "pyproject.toml", "rb") as f:
        scripts = tomllib.load(f)["project"]["scripts"]
    assert scripts == {"brax-train": "brax_train.cli:main"}
    script = pathlib.Path(sys.executable).parent / "brax-train"
    assert script.exists(), "the brax-train console script is not installed (reinstall brax-train)"
    p = subprocess.run([str(script), "doctor"], capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stderr[-4000:]
    assert "matmul precision" in p.stdout and "MUJOCO_GL" in p.stdout


def test_cpu_devices_and_compile_cache_for_train_and_resume(tmp_path: pathlib.Path) -> None:
    """`--cpu-devices 4` trains on four CPU devices (the suite's processes have two), is recorded
    in config.json, and `resume` makes as many again without the flag; the resume loads the
    programs the training compiled from `--compile-cache` and says so."""
    path, cache = tmp_path / "run", tmp_path / "xla"
    cached = ("--no-replay", "--compile-cache", str(cache))
    p = cli("train", *TINY, "--cpu-devices", "4", "--run-dir", str(path), *cached)
    assert p.returncode == 0, p.stderr[-4000:]
    assert "loaded" not in p.stderr  # an empty cache
    assert json.loads((path / "config.json").read_text())["cpu_devices"] == 4
    assert any(f.name.startswith("jit_chunk-") for f in cache.iterdir()), sorted(cache.iterdir())
    p = cli("resume", str(path), "--num-timesteps", "3200", *cached)
    assert p.returncode == 0, p.stderr[-4000:]
    loaded = rf"compile cache {re.escape(str(cache))}: \d+ programs? loaded, ~\d+ s of compiling saved"
    assert re.search(loaded, p.stderr), p.stderr
    lines = (path / "metrics.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines if '"event"' in line]
    devices = [(e["event"], e.get("devices")) for e in events if e["event"] != "end"]
    assert devices == [("start", 4), ("resume", 4)]
    assert events[-1]["event"] == "end" and events[-1]["step"] >= 3200
