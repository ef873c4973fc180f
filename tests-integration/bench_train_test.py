"""tools/bench/train.py's `--set KEY=VALUE`: the overrides reach every run's settings and its child's
command line, and a malformed one is an error naming it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools/bench"))
import train


def test_overrides_reach_the_settings() -> None:
    s = train.settings_for("ppo", "ant", 3_000_000, overrides={"num_envs": 4096, "batch_size": 2048})
    assert (s["num_envs"], s["batch_size"], s["num_timesteps"]) == (4096, 2048, 3_000_000)
    assert s["unroll_length"] == train.SETTINGS[("ppo", "ant")]["unroll_length"]  # the rest unchanged
    assert train.SETTINGS[("ppo", "ant")]["num_envs"] == 256  # the table itself untouched


def test_set_goes_to_each_child(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    commands: list[list[str]] = []

    def fake_run(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        commands.append(cmd)
        return subprocess.CompletedProcess(cmd, 1, "", "no training here")

    monkeypatch.setattr(subprocess, "run", fake_run)  # the module train.py calls it through
    monkeypatch.setattr(sys, "argv", ["train.py", "--agents", "ppo", "--envs", "ant", "--impls", "ours",
                                      "--set", "num_envs=4096", "--set", "normalize_observations=false"])
    train.main()
    (cmd,) = commands
    assert cmd[cmd.index("--one") + 1:cmd.index("--one") + 4] == ["ppo", "ours", "ant"]
    sets = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--set"]
    assert sets == ["num_envs=4096", "normalize_observations=false"]
    row = json.loads(capsys.readouterr().out.splitlines()[0])
    assert row["error"] == "no training here"


@pytest.mark.parametrize(("item", "message"), [("num_envs", "expected KEY=VALUE, got 'num_envs'"),
                                               ("num_envs=four", "--set num_envs: VALUE must be JSON")])
def test_malformed_set_is_named(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                item: str, message: str) -> None:
    monkeypatch.setattr(sys, "argv", ["train.py", "--set", item])
    with pytest.raises(SystemExit):
        train.main()
    assert message in capsys.readouterr().err
