"""Multi-process training on `jax.distributed`, on localhost with forced CPU devices, through `brax-train`.

- 2 processes x 2 devices train the run that 1 process x 4 devices trains with the same seed. The
  parameters agree within 1e-6, not bit for bit: the cross-process all-reduce (gloo) sums the
  devices' partial results in another order than the in-process one (measured: at most 6e-8 apart).
- The 2-process run's checkpoint resumes in 1 process with 2 devices, and lands where the 1 x 4 run
  resumed in 1 x 4 lands (within 1e-6).
- SAC (its replay buffer sharded over every process's devices) agrees the same way.
- One process killed (SIGKILL) mid-run: the other exits within 60 s with `EXIT_PEER_LOST` and an
  error naming the lost process and the last complete checkpoint, which stays intact.
"""

from __future__ import annotations

import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

import jax
import numpy as np
import pytest
from brax_train import checkpoint, distributed

pytestmark = pytest.mark.slow

NETS = ["--set", "network_factory.policy_hidden_layer_sizes=[8]"]
NETS += ["--set", "network_factory.value_hidden_layer_sizes=[8]"]
SMALL = "--env fast --num-envs 8 --set batch_size=8 --set num_minibatches=2 --set unroll_length=5 --no-replay"
ARGS = [*SMALL.split(), "--set", "num_eval_envs=4", "--set", "episode_length=20", *NETS]
STEPS = 480  # two evaluation intervals of 3 training steps of 80 env steps


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(args: list[str], devices: int, rank: int | None = None, port: int = 0) -> subprocess.Popen[str]:
    # the suite's compile flags (conftest.py) with this process's device count
    kept = [f for f in os.environ.get("XLA_FLAGS", "").split() if "device_count" not in f]
    flags = " ".join([*kept, f"--xla_force_host_platform_device_count={devices}"])
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": flags}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    if rank is not None:
        args = [*args, "--coordinator-address", f"127.0.0.1:{port}", "--num-processes", "2"]
        args += ["--process-id", str(rank)]
    return subprocess.Popen(
        [sys.executable, "-m", "brax_train.cli", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _finish(procs: list[subprocess.Popen[str]], timeout: float = 400) -> None:
    outs = [p.communicate(timeout=timeout)[0] for p in procs]
    for p, out in zip(procs, outs, strict=True):
        assert p.returncode == 0, out[-3000:]


def _two_processes(args: list[str]) -> None:
    port = _free_port()
    _finish([_start(args, 2, rank, port) for rank in (0, 1)])


def _params(path: pathlib.Path) -> list[np.ndarray]:
    return [np.asarray(x, np.float64) for x in jax.tree.leaves(checkpoint.load(path).params)]


def _assert_close(a: pathlib.Path, b: pathlib.Path) -> None:
    pa, pb = _params(a), _params(b)
    assert len(pa) == len(pb) > 0
    for x, y in zip(pa, pb, strict=True):
        np.testing.assert_allclose(x, y, rtol=0, atol=1e-6)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[pathlib.Path, pathlib.Path]:
    """The same seeded run in 2 processes x 2 devices and in 1 process x 4 devices."""
    root = tmp_path_factory.mktemp("multihost")
    train = ["train", *ARGS, "--num-timesteps", str(STEPS), "--set", "num_evals=3"]
    _two_processes([*train, "--run-dir", str(root / "two")])
    _finish([_start([*train, "--run-dir", str(root / "one")], 4)])
    return root / "two", root / "one"


def test_two_processes_train_what_one_process_trains(runs: tuple[pathlib.Path, pathlib.Path]) -> None:
    two, one = runs
    assert sorted(p.name for p in (two / "checkpoints").iterdir()) == ["240", "480"]
    assert (two / "config.json").is_file() and (two / "metrics.jsonl").is_file()
    assert checkpoint.read_meta(checkpoint.resolve(two))["step"] == STEPS
    _assert_close(two / "checkpoints" / "480", one / "checkpoints" / "480")
    before, after = _params(two / "checkpoints" / "240"), _params(two / "checkpoints" / "480")
    assert any(not np.allclose(x, y) for x, y in zip(before, after, strict=True))


def test_two_process_checkpoint_resumes_in_one_process(runs: tuple[pathlib.Path, pathlib.Path]) -> None:
    two, one = runs
    _finish([_start(["resume", str(two), "--num-timesteps", str(2 * STEPS), "--no-replay"], 2)])
    _finish([_start(["resume", str(one), "--num-timesteps", str(2 * STEPS), "--no-replay"], 4)])
    assert checkpoint.read_meta(checkpoint.resolve(two))["step"] == 2 * STEPS
    _assert_close(checkpoint.resolve(two), checkpoint.resolve(one))


def test_killed_process_stops_the_other(tmp_path: pathlib.Path) -> None:
    run_dir = tmp_path / "run"
    args = ["train", *ARGS, "--num-timesteps", "400000", "--set", "num_evals=1000", "--run-dir", str(run_dir)]
    port = _free_port()
    first, second = (_start(args, 2, rank, port) for rank in (0, 1))
    try:
        deadline = time.monotonic() + 300
        while not list(run_dir.glob(f"checkpoints/*/{checkpoint.MANIFEST}")):
            assert first.poll() is None and second.poll() is None, "a process ended before a checkpoint"
            assert time.monotonic() < deadline, "no checkpoint within 300 s"
            time.sleep(0.5)
        second.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        out = first.communicate(timeout=90)[0]
        waited = time.monotonic() - killed
    finally:
        for p in (first, second):
            if p.poll() is None:
                p.kill()
            p.communicate()  # closes its pipe
    assert first.returncode == distributed.EXIT_PEER_LOST, out[-3000:]
    assert waited < 60, f"{waited:.0f} s"
    assert "lost process 1 of 2" in out, out[-3000:]
    named = out.split("last complete checkpoint: ")[1].split()[0]
    checkpoint.verify(pathlib.Path(named))
    assert checkpoint.resolve(run_dir / "checkpoints") == pathlib.Path(named)


def test_sac_replay_buffer_shards_across_processes(tmp_path: pathlib.Path) -> None:
    """SAC's replay buffer lives sharded over all 4 devices: 2 x 2 trains what 1 x 4 trains."""
    sac = "--agent sac --env fast --num-timesteps 64 --num-envs 4 --set batch_size=8 --set min_replay_size=8"
    sac += " --set max_replay_size=64 --set network_factory.hidden_layer_sizes=[8] --set num_evals=2"
    sac += " --set num_eval_envs=2 --set episode_length=16 --no-replay"
    train = ["train", *sac.split()]
    _two_processes([*train, "--run-dir", str(tmp_path / "two")])
    _finish([_start([*train, "--run-dir", str(tmp_path / "one")], 4)])
    assert checkpoint.read_meta(checkpoint.resolve(tmp_path / "two"))["agent"] == "sac"
    _assert_close(checkpoint.resolve(tmp_path / "two"), checkpoint.resolve(tmp_path / "one"))
