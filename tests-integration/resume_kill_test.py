"""MJCF string -> env -> PPO run -> checkpoint -> SIGKILL mid-run -> resume -> eval -> HTML and image render.

The training process is killed with SIGKILL (no cleanup code runs) right after its first checkpoint
is complete; `brax-train resume` must continue from that run directory to `num_timesteps`, leave a
complete final checkpoint that `checkpoint.load_policy` loads on its own, and the resumed run must
evaluate and render like any other.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import brax_envs
import jax
import numpy as np
import pytest
from brax_train import checkpoint

pytestmark = pytest.mark.slow

ENV_MODULE = pathlib.Path(__file__).with_name("mjcf_cartpole.py")
NUM_TIMESTEPS = 6400  # 10 evaluation intervals of 4 training steps of 8 envs x 5 steps x 4 minibatches
ARGS = [
    "--import",
    str(ENV_MODULE),
    "--env",
    "mjcf_cartpole",
    "--num-timesteps",
    str(NUM_TIMESTEPS),
    "--num-envs",
    "8",
    "--set",
    "batch_size=8",
    "--set",
    "num_minibatches=4",
    "--set",
    "unroll_length=5",
    "--set",
    "num_evals=11",
    "--set",
    "num_eval_envs=4",
    "--set",
    "episode_length=50",
    "--set",
    'network_factory={"policy_hidden_layer_sizes": [16], "value_hidden_layer_sizes": [16]}',
]


def _env() -> dict[str, str]:
    return {**os.environ, "JAX_PLATFORMS": "cpu"}


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run `python -m brax_train.cli ARGS` to completion."""
    return subprocess.run(
        [sys.executable, "-m", "brax_train.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_env(),
        check=False,
    )


def _complete_steps(ckpt: pathlib.Path) -> list[int]:
    if not ckpt.is_dir():
        return []
    return sorted(
        int(d.name) for d in ckpt.iterdir() if d.name.isdigit() and (d / checkpoint.MANIFEST).is_file()
    )


def test_kill_resume_eval_render(tmp_path: pathlib.Path) -> None:
    run = tmp_path / "run"
    ckpt = run / "checkpoints"
    log = (tmp_path / "train.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "brax_train.cli", "train", *ARGS, "--run-dir", str(run)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=_env(),
    )
    try:
        deadline = time.monotonic() + 240
        while not _complete_steps(ckpt) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _complete_steps(ckpt), (
            f"no checkpoint appeared: {(tmp_path / 'train.log').read_text()[-3000:]}"
        )
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    assert proc.returncode == -signal.SIGKILL, (
        f"training ended (status {proc.returncode}) before it could be killed; lengthen the run"
    )
    first = _complete_steps(ckpt)
    assert first[-1] < NUM_TIMESTEPS
    rows = (run / "metrics.jsonl").read_text().splitlines()
    assert not any('"event": "end"' in r for r in rows)

    p = cli("resume", str(run))
    assert p.returncode == 0, p.stderr[-4000:]
    assert f"resuming mjcf_cartpole from step {first[-1]:,}" in p.stderr
    steps = _complete_steps(ckpt)
    assert steps[-1] >= NUM_TIMESTEPS
    assert all(d.name.isdigit() and (d / checkpoint.MANIFEST).is_file() for d in ckpt.iterdir())
    final = checkpoint.resolve(ckpt)
    assert final.name == str(steps[-1])
    checkpoint.verify(final)
    assert checkpoint.read_meta(final)["step"] == steps[-1]
    events = [
        json.loads(r).get("event") for r in (run / "metrics.jsonl").read_text().splitlines() if r.strip()
    ]
    assert events.count("start") == 1 and events.count("resume") == 1 and events[-1] == "end"
    assert (run / "replay.html").is_file() and (run / "reward.png").is_file()
    assert len(list((run / "tb").glob("events.out.tfevents.*"))) == 2

    # The checkpoint alone gives a policy (the environment only supplies observations here).
    spec = importlib.util.spec_from_file_location("mjcf_cartpole_for_test", ENV_MODULE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    env = brax_envs.get_environment("mjcf_cartpole")
    policy = checkpoint.load_policy(ckpt, deterministic=True)
    action, _ = policy(env.reset(jax.random.PRNGKey(0)).obs, jax.random.PRNGKey(1))
    assert action.shape == (1,) and np.all(np.isfinite(np.asarray(action)))
    assert np.all(np.abs(np.asarray(action)) <= 1.0)

    p = cli("eval", str(run), "--episodes", "2")
    assert p.returncode == 0, p.stderr[-4000:]
    assert json.loads(p.stdout.strip().splitlines()[-1])["checkpoint_step"] == steps[-1]

    p = cli("render", str(run), "--out", str(tmp_path / "ep.html"), "--max-steps", "20")
    assert p.returncode == 0, p.stderr[-4000:]
    assert "braxViewer(" in (tmp_path / "ep.html").read_text()
    p = cli(
        "render",
        str(run),
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
    assert (tmp_path / "ep.gif").read_bytes()[:6] in (b"GIF87a", b"GIF89a")
