"""Every agent through the commands on `fast`: train writes its run directory, resume extends it, eval
loads it."""

from __future__ import annotations

import json
import pathlib

import pytest

from brax_train import checkpoint
from brax_train.cli import main

# Tiny runs of STEPS env steps (two evaluation intervals), then as many more on resume.
STEPS = {"sac": 32, "apg": 64, "es": 320, "ars": 320, "bc": 64}
NETS = "--set network_factory.hidden_layer_sizes=[8]"
TINY: dict[str, str] = {
    "sac": f"--num-envs 4 --set batch_size=8 --set min_replay_size=8 --set max_replay_size=64 {NETS}",
    "apg": f"--num-envs 4 --set horizon_length=8 {NETS}",
    "es": f"--set population_size=4 {NETS}",
    "ars": "--set number_of_directions=4 --set top_directions=2",
    "bc": "--num-envs 4 --set demo_length=8 --set batch_size=8 --set epochs=2",
}
COMMON = "--env fast --set num_evals=2 --set num_eval_envs=2 --set episode_length=16"


@pytest.fixture(scope="module")
def teacher(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A PPO run directory (BC's teacher)."""
    path = tmp_path_factory.mktemp("teacher") / "run"
    ppo = f"{COMMON} --num-timesteps 160 --num-envs 4 --set batch_size=4 --set num_minibatches=2"
    assert main(["train", *ppo.split(), "--set", "unroll_length=5", "--run-dir", str(path)]) == 0
    # A run directory stands for its latest checkpoint.
    assert checkpoint.resolve(path) == checkpoint.resolve(path / "checkpoints")
    return path


@pytest.mark.parametrize("agent", sorted(TINY))
def test_train_resume_eval(
    agent: str, teacher: pathlib.Path, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run"
    extra = ["--set", f"teacher_checkpoint_path={teacher}"] if agent == "bc" else []
    argv = f"--agent {agent} {COMMON} {TINY[agent]} --num-timesteps {STEPS[agent]}".split()
    assert main(["train", *argv, *extra, "--run-dir", str(path)]) == 0
    config = json.loads((path / "config.json").read_text())
    assert config["agent"] == agent and agent in config and "ppo" not in config
    first = int(checkpoint.resolve(path / "checkpoints").name)
    assert first >= STEPS[agent]
    assert checkpoint.read_meta(checkpoint.resolve(path / "checkpoints"))["agent"] == agent

    target = 2 * STEPS[agent]
    assert main(["resume", str(path), "--num-timesteps", str(target)]) == 0
    assert int(checkpoint.resolve(path / "checkpoints").name) >= target > first
    events = [json.loads(line).get("event") for line in (path / "metrics.jsonl").read_text().splitlines()]
    assert events.count("resume") == 1 and events.count("end") == 2

    capsys.readouterr()
    assert main(["eval", str(path), "--episodes", "2"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["episodes"] == 2 and out["env"] == "fast" and isinstance(out["reward_mean"], float)
