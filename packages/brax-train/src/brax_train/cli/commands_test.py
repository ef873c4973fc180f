"""The commands in-process on the `fast` environment: train, resume, eval, render, envs, doctor, reproduce."""

from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Any

import pytest

from brax_train import checkpoint, ppo, presets, runner
from brax_train.cli import _doctor, main
from brax_train.cli._settings import RunSpec, agent_config

TINY = [
    "--env",
    "fast",
    "--num-timesteps",
    "640",
    "--num-envs",
    "8",
    "--set",
    "batch_size=8",
    "--set",
    "num_minibatches=2",
    "--set",
    "unroll_length=5",
    "--set",
    "num_evals=3",
    "--set",
    "num_eval_envs=2",
    "--set",
    "episode_length=20",
]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("cli") / "run"
    code = main(["train", *TINY, "--run-dir", str(path)])
    return {"path": path, "code": code}


def test_train_writes_the_run_dir(run: dict[str, Any]) -> None:
    path = run["path"]
    assert run["code"] == 0
    config = json.loads((path / "config.json").read_text())
    assert (
        config["env"] == "fast" and config["ppo"]["num_envs"] == 8 and config["ppo"]["num_timesteps"] == 640
    )
    assert config["versions"]["brax-train"] and config["argv"] == ["train", *TINY, "--run-dir", str(path)]
    rows = [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]
    assert rows[0]["event"] == "start" and rows[-1]["event"] == "end"
    assert any("eval/episode_reward" in r for r in rows)
    assert (path / "reward.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert list((path / "tb").glob("events.out.tfevents.*"))
    assert not (path / "replay.html").exists()  # `fast` simulates no System
    planned = _final(agent_config(RunSpec.from_json(config, "config.json")), 0)
    assert int(checkpoint.resolve(path / "checkpoints").name) == planned == 640


def _final(c: ppo.PPOConfig, start: int) -> int:
    return runner.final_step(c, start, ppo.env_steps_per_update(c))


def test_planned_final_step() -> None:
    # num_timesteps rounds up to whole evaluation intervals: 9 intervals of 2 training steps of 163,840.
    assert _final(presets.PPO_PRESETS["inverted_pendulum"], 0) == 2_949_120
    assert _final(presets.PPO_PRESETS["fast"].replace(num_timesteps=1000), 1000) == 1000


def test_resume_extends_the_run(run: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    path = run["path"]
    capsys.readouterr()
    assert main(["resume", str(path)]) == 0  # already complete: nothing to train
    assert "is complete" in capsys.readouterr().err
    assert main(["resume", str(path), "--num-timesteps", "1280"]) == 0
    assert json.loads((path / "config.json").read_text())["ppo"]["num_timesteps"] == 1280
    assert int(checkpoint.resolve(path / "checkpoints").name) >= 1280
    events = [json.loads(line).get("event") for line in (path / "metrics.jsonl").read_text().splitlines()]
    assert events.count("resume") == 1 and events.count("end") == 2


def test_eval_prints_a_json_line(run: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["eval", str(run["path"]), "--episodes", "2"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out.strip().splitlines()[-1])
    assert out["episodes"] == 2 and out["env"] == "fast"
    assert isinstance(out["reward_mean"], float) and out["reward_std"] >= 0
    assert out["episode_length_mean"] == 20
    assert captured.err.startswith("eval: 2 episode(s) of fast")


def test_eval_unknown_step(run: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", str(run["path"]), "--step", "7"]) == 2
    assert "--step: no checkpoint step 7" in capsys.readouterr().err


def test_render_needs_a_system(
    run: dict[str, Any], capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    assert main(["render", str(run["path"]), "--out", str(tmp_path / "x.html")]) == 1
    err = capsys.readouterr().err.strip()
    assert err == "brax-train: error: environment 'fast' simulates no brax_physics.System: nothing to render"


def test_envs_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["envs", "--json"]) == 0
    rows = {r["name"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert rows["fast"]["observation_size"] == 2 and rows["fast"]["action_size"] == 1
    assert rows["inverted_pendulum"]["dt"] == pytest.approx(0.04)
    assert rows["inverted_pendulum"]["backend"] == "generalized"
    # the table from the same rows (describing every environment again would build each model twice)
    assert main(["envs", "--match", "ant"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["name", "obs", "act", "dt", "backend", "default", "steps", "presets"]
    assert any(line.split()[:3] == ["ant", "27", "8"] for line in lines)
    assert rows["inverted_pendulum"]["presets"] == ["ppo", "sac", "es", "ars"]
    assert rows["ant"]["presets"] == ["ppo"]
    # the suite's tasks are listed by name; describing them all would build 51 models
    assert "observation_size" not in rows["dm_control/walker-walk"]


def test_envs_match_describes_the_suite(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["envs", "--json", "--match", "dm_control/cartpole-balance*"]) == 0
    rows = {r["name"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert sorted(rows) == ["dm_control/cartpole-balance", "dm_control/cartpole-balance_sparse"]
    assert rows["dm_control/cartpole-balance"]["observation_size"] == 5
    assert rows["dm_control/cartpole-balance"]["dt"] == pytest.approx(0.01)
    assert main(["envs", "--match", "nothing*"]) == 2
    assert "no registered environment matches 'nothing*'" in capsys.readouterr().err


def test_doctor_reports_and_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["versions"]["jax"] and r["versions"]["brax-train"]
    assert r["jax"]["devices"]
    assert "default_matmul_precision" in r["jax"]
    assert "offscreen" in r["rendering"]
    for p in r["problems"]:
        assert p["what"] and p["fix"]
    text = _doctor.format_report(r)
    assert "matmul precision" in text and "MUJOCO_GL" in text


def test_doctor_names_fixes_for_rendering(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_doctor, "probe_rendering", lambda gl, timeout=60.0: (False, "no GL"))
    r = _doctor.report()
    assert any("offscreen rendering fails" in p["what"] and "MUJOCO_GL" in p["fix"] for p in r["problems"])


def test_auto_cpu_devices_divides_the_settings() -> None:
    """`--cpu-devices auto`: the most devices, up to one per core, for which the agent's own rules hold."""
    from brax_train.cli._commands import auto_cpu_devices, cpu_cores

    c = ppo.PPOConfig(num_envs=20, batch_size=20, num_minibatches=2, episode_length=10)
    assert auto_cpu_devices("ppo", c, processes=1, cores=8) == 5  # 8, 7, 6 do not divide 20
    assert auto_cpu_devices("ppo", c, processes=1, cores=16) == 10
    assert auto_cpu_devices("ppo", c, processes=2, cores=8) == 5  # 2 x 5 = 10 divides 20
    assert auto_cpu_devices("ppo", c, processes=1, cores=1) == 1
    assert auto_cpu_devices("ppo", c.replace(max_devices_per_host=4), processes=1, cores=8) == 4
    seven = ppo.PPOConfig(num_envs=7, batch_size=7, episode_length=10)
    assert auto_cpu_devices("ppo", seven, processes=1, cores=8) == 7
    # a setting no device count fixes: 1, and training reports the setting
    assert auto_cpu_devices("ppo", c.replace(learning_rate=-1.0), processes=1, cores=8) == 1
    assert cpu_cores() >= 1


def _table(out: str) -> list[list[str]]:
    """The rows of `reproduce`'s table (after each training run's own lines), header first."""
    rows = [line.split() for line in out.splitlines()]
    return rows[rows.index(["seed", "return", "minutes", "result"]):]


def test_reproduce_holds_each_seed_to_the_band(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tiny = presets.PPO_PRESETS["fast"].replace(num_envs=8, batch_size=8, num_minibatches=2, unroll_length=5,
                                               num_evals=2, num_eval_envs=2, episode_length=20)
    monkeypatch.setitem(presets.PPO_PRESETS, "fast", tiny)
    band = presets.Band(num_timesteps=640, low=-1e9, measured=(0.0,), seeds=(0,), where="a test")
    monkeypatch.setitem(presets.PPO_BANDS, "fast", {"quick": band})
    assert main(["reproduce", "fast", "--quick", "--run-dir", str(tmp_path / "a")]) == 0
    out = capsys.readouterr()
    assert "quick band: return >= -1e+09 after 640 steps" in out.err
    rows = _table(out.out)
    assert rows[1][0] == "0" and rows[1][-1] == "pass" and rows[-1][:2] == ["fast:", "PASS"]
    ret = json.loads((tmp_path / "a" / "seed-0" / "config.json").read_text())["ppo"]
    assert (ret["num_timesteps"], ret["seed"], ret["num_envs"]) == (640, 0, 8)
    # a bar above any return fails each seed asked for, with exit status 1
    monkeypatch.setitem(presets.PPO_BANDS, "fast", {"quick": dataclasses.replace(band, low=1e9)})
    assert main(["reproduce", "fast", "--quick", "--seeds", "1", "2", "--run-dir", str(tmp_path / "b")]) == 1
    rows = _table(capsys.readouterr().out)
    assert [r[0] for r in rows[1:3]] == ["1", "2"] and {r[-1] for r in rows[1:3]} == {"FAIL"}
    assert rows[-1][:2] == ["fast:", "FAIL"]


def test_reproduce_without_a_band(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reproduce", "fast"]) == 2
    err = capsys.readouterr().err
    assert "no full band recorded for 'fast'; recorded: " in err
    assert "dm_control/cartpole-balance (full, quick), dm_control/cartpole-swingup (full)" in err
