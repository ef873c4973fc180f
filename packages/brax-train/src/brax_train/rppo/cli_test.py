"""RPPO through the `brax-train` commands on `fast`: train, resume, eval and export its run directory."""

from __future__ import annotations

import json
import pathlib

import pytest

from brax_train import checkpoint
from brax_train.cli import main

ARGS = (
    "--agent rppo --env fast --num-timesteps 160 --num-envs 4 --set batch_size=4 --set num_minibatches=2 "
    "--set unroll_length=5 --set num_evals=2 --set num_eval_envs=2 --set episode_length=16 "
    "--set hidden_size=4 --set network_factory.policy_hidden_layer_sizes=[8] "
    "--set network_factory.value_hidden_layer_sizes=[8]"
)


def test_train_resume_eval_export(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "run"
    assert main(["train", *ARGS.split(), "--run-dir", str(path)]) == 0
    config = json.loads((path / "config.json").read_text())
    assert config["agent"] == "rppo" and config["rppo"]["hidden_size"] == 4
    meta = checkpoint.read_meta(checkpoint.resolve(path / "checkpoints"))
    assert meta["agent"] == "rppo" and meta["observation_shapes"] == [2 + 4] and meta["action_size"] == 1 + 4

    assert main(["resume", str(path), "--num-timesteps", "320"]) == 0
    assert int(checkpoint.resolve(path / "checkpoints").name) >= 320

    capsys.readouterr()
    assert main(["eval", str(path), "--episodes", "2"]) == 0  # the policy acts on the memory-carrying env
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["episodes"] == 2 and out["env"] == "fast" and isinstance(out["reward_mean"], float)

    assert main(["export", str(path), "--format", "onnx", "--out", str(tmp_path / "p.onnx")]) == 0
    contract = json.loads((tmp_path / "p.onnx.json").read_text())
    assert contract["agent"] == "rppo" and contract["input"]["shape"] == ["batch", 6]
