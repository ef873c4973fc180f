"""The CLI's run directory: config.json round trip and refusal of directories that are no runs."""

from __future__ import annotations

import pathlib

import pytest

from brax_train.cli import _rundir
from brax_train.cli._errors import UsageError


def test_config_round_trip(tmp_path: pathlib.Path) -> None:
    from brax_train.cli._settings import RunSpec

    run = _rundir.RunDir(tmp_path / "run")
    spec = RunSpec("fast", {}, (), {"num_timesteps": 640})
    run.write_config(spec, {"argv": ["train"]})
    back, data = run.read_config()
    assert back == spec and data["argv"] == ["train"]
    with pytest.raises(UsageError, match="not a run directory"):
        _rundir.RunDir(tmp_path).read_config()
