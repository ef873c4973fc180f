"""Bad arguments: exit status 2, one line on stderr naming the flag, key or file at fault, no traceback."""

from __future__ import annotations

import json
import pathlib
import re

import jax
import pytest

from brax_train.cli import main
from brax_train.cli._parser import Eval, Train, fold, parse, parse_int, parse_value
from brax_train.cli._settings import split_item


def _error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 2, captured
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("brax-train: error: ")
    assert "Traceback" not in captured.err
    return lines[0].removeprefix("brax-train: error: ")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["train", "--num-envs", "x"], "--num-envs: expected a positive integer, got 'x'"),
        (["train", "--num-envs", "0"], "--num-envs: expected a positive integer, got '0'"),
        (["train", "--num-timesteps", "1.5"], "--num-timesteps: expected an integer >= 0, got '1.5'"),
        (["train", "--seed", "-1"], "--seed: expected an integer >= 0, got '-1'"),
        (["train", "--batch-size", "x"], "--batch-size: expected an integer, got 'x'"),
        (["train", "--learning-rate", "fast"], "--learning-rate: could not convert string to float: 'fast'"),
        (["train", "--set", "novalue"], "--set: expected KEY=VALUE, got 'novalue'"),
        (["train", "--cpu-devices", "-1"], "--cpu-devices: expected an integer >= 0 or auto, got '-1'"),
        (["resume", "d", "--cpu-devices", "x"], "--cpu-devices: expected an integer >= 0 or auto, got 'x'"),
        (["eval", "d", "--episodes", "zero"], "--episodes: expected a positive integer, got 'zero'"),
        (["eval", "d", "-n", "0"], "--episodes: expected a positive integer, got '0'"),
        (["render", "d"], "Missing from brax-train render: --out FILE"),
        (["bogus"], "Unrecognized options: bogus; Available subcommands: train, resume, eval, render, envs"),
        ([], "Missing subcommand: Expected one of "
             "{train, resume, eval, render, envs, doctor, export, reproduce}"),
        (["train", "--env"], "Missing value for argument '--env'"),
        (["envs", "--bogus"], "Unrecognized options: --bogus"),
    ],
)
def test_argument_errors(capsys: pytest.CaptureFixture[str], argv: list[str], expected: str) -> None:
    assert expected in _error(capsys, argv)


def test_unknown_env_lists_accepted_names(capsys: pytest.CaptureFixture[str]) -> None:
    msg = _error(capsys, ["train", "--env", "inverted_pendulumm"])
    assert msg.startswith(
        "--env: unknown environment 'inverted_pendulumm' (did you mean 'inverted_pendulum'?)"
    )
    assert "accepted: ant, fast," in msg
    assert msg.endswith("and dm_control/DOMAIN-TASK for the suite's tasks (brax-train envs)")


def test_set_errors_name_the_key(capsys: pytest.CaptureFixture[str]) -> None:
    msg = _error(capsys, ["train", "--env", "fast", "--set", "num_env=8"])
    assert msg.startswith("--set: unknown key 'num_env' (did you mean 'num_envs'?)")
    msg = _error(capsys, ["train", "--env", "fast", "--set", "progress_fn=x"])
    assert msg == "--set progress_fn: cannot be set from the command line (the CLI reports progress itself)"
    msg = _error(capsys, ["train", "--env", "fast", "--set", "num_evals=many"])
    assert msg == "--set num_evals: --num-evals: expected an integer, got 'many'"
    msg = _error(capsys, ["train", "--env", "fast", "--set", "network_factory=[16]"])
    assert msg.startswith("--set network_factory: --network-factory: expected a JSON object")
    assert "--progress-fn" in _error(capsys, ["train", "--env", "fast", "--progress-fn", "x"])


def test_ppo_config_error_is_one_line_naming_keys(capsys: pytest.CaptureFixture[str]) -> None:
    msg = _error(capsys, ["train", "--env", "fast", "--set", "num_envs=3", "--set", "discounting=2"])
    assert msg.startswith("invalid PPO settings: ")
    assert "discounting must be a number in [0, 1], got 2.0" in msg
    assert "must be divisible by num_envs (3)" in msg
    assert "num_evals must be an int >= 0, got -1" in _error(capsys, ["train", "--num-evals", "-1"])


def test_bad_backend(capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path) -> None:
    msg = _error(
        capsys,
        ["train", "--env", "inverted_pendulum", "--backend", "spring", "--run-dir", str(tmp_path / "r")],
    )
    assert msg.startswith("--backend: unknown backend 'spring'; accepted values: 'generalized'")
    assert not (tmp_path / "r").exists()


def test_bad_env_kwarg(capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path) -> None:
    msg = _error(
        capsys, ["train", "--env", "fast", "--set", "env.colour=3", "--run-dir", str(tmp_path / "r")]
    )
    assert msg.startswith("--set env.colour: environment 'fast' rejects these options")


def test_bad_import(capsys: pytest.CaptureFixture[str]) -> None:
    msg = _error(capsys, ["train", "--import", "no_such_module_xyz"])
    assert msg.startswith("--import: cannot import 'no_such_module_xyz': ModuleNotFoundError")


def test_config_file_errors(capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path) -> None:
    yaml = tmp_path / "c.yaml"
    yaml.write_text("a: 1")
    assert (
        _error(capsys, ["train", "--config", str(yaml)])
        == f"--config: expected a .json or .toml file, got {str(yaml)!r}"
    )
    bad = tmp_path / "c.json"
    bad.write_text("{nope")
    assert _error(capsys, ["train", "--config", str(bad)]).startswith(
        f"--config: {str(bad)!r} is not valid JSON"
    )
    unknown = tmp_path / "u.toml"
    unknown.write_text("learning_rat = 0.1\n")
    assert _error(capsys, ["train", "--env", "fast", "--config", str(unknown)]).startswith(
        f"--config {unknown}: unknown key 'learning_rat' (did you mean 'learning_rate'?)"
    )
    typed = tmp_path / "t.toml"
    typed.write_text('num_envs = "many"\n')
    assert _error(capsys, ["train", "--env", "fast", "--config", str(typed)]) == (
        f"--config {typed} num_envs: --num-envs: expected a positive integer, got 'many'"
    )


def test_run_dir_errors(capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path) -> None:
    assert _error(capsys, ["eval", str(tmp_path / "missing")]).startswith("DIR: no such directory")
    assert _error(capsys, ["resume", str(tmp_path)]).endswith("is not a run directory (no config.json)")
    (tmp_path / "config.json").write_text(json.dumps({"format": "other"}))
    assert "not a brax-train run configuration" in _error(
        capsys, ["render", str(tmp_path), "--out", "x.html"]
    )


def test_render_suffix_is_checked_first(capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path) -> None:
    msg = _error(capsys, ["render", str(tmp_path / "missing"), "--out", "x.png"])
    assert msg == "--out: expected a file ending in .html, .gif, .mp4, got 'x.png'"


def test_existing_run_dir_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path) -> None:
    (tmp_path / "keep.txt").write_text("x")
    msg = _error(capsys, ["train", "--env", "fast", "--run-dir", str(tmp_path)])
    assert msg.startswith(f"--run-dir: {str(tmp_path)!r} already exists and is not empty")


def test_cpu_devices_auto_or_a_count() -> None:
    train = parse(["train", "--cpu-devices", "auto"])
    assert isinstance(train, Train) and train.cpu_devices == "auto"
    assert parse(["resume", "d", "--cpu-devices", "2"]).cpu_devices == 2  # type: ignore[union-attr]
    assert parse(["train"]).cpu_devices == 0  # type: ignore[union-attr]


def test_cpu_devices_auto_once_jax_has_started(capsys: pytest.CaptureFixture[str],
                                               tmp_path: pathlib.Path) -> None:
    jax.devices()
    argv = ["train", "--env", "fast", "--cpu-devices", "auto", "--run-dir", str(tmp_path / "r")]
    assert main(argv) == 2
    chose, error = capsys.readouterr().err.strip().splitlines()
    assert re.fullmatch(r"brax-train: --cpu-devices auto: \d+ CPU devices? \(\d+ cores?\)", chose), chose
    assert error.startswith("brax-train: error: --cpu-devices: jax_num_cpu_devices config should be updated")
    assert not (tmp_path / "r").exists()


def test_cpu_devices_once_jax_has_started(capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path) -> None:
    jax.devices()  # the backend is up, as in any process that already computed
    msg = _error(capsys, ["train", "--env", "fast", "--cpu-devices", "3", "--run-dir", str(tmp_path / "r")])
    assert msg.startswith("--cpu-devices: jax_num_cpu_devices config should be updated before backends")
    assert not (tmp_path / "r").exists()


def test_help_and_version_exit_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "resume" in capsys.readouterr().out
    assert main(["train", "--env", "fast", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # as one line: tyro wraps help text to the terminal
    assert "--num-envs INT" in out and "(default: 60000)" in out  # the fast preset's num_timesteps
    assert "--learning-rate FLOAT" in out and "--progress-fn" not in out and "--eval-env" not in out
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("brax-train ")


def test_parse() -> None:
    e = parse(["eval", "d", "-n", "2e1", "--step", "1_000", "-vv"])
    assert e == Eval(run_dir="d", episodes=20, step=1000, seed=0, verbose=2)
    t = parse(["train", "--env", "fast", "--set", "a=1", "--set", "b=2", "--import", "m", "--num-envs", "4"])
    assert isinstance(t, Train) and (t.env, t.set, t.imports) == ("fast", ("a=1", "b=2"), ("m",))
    assert t.argv[-2:] == ("--num-envs", "4")


def test_value_parsers() -> None:
    assert parse_int("1_000_000") == 1_000_000
    assert parse_int("2e6") == 2_000_000
    assert parse_int("0", minimum=0) == 0
    with pytest.raises(ValueError, match="expected a positive integer, got '0'"):
        parse_int("0", minimum=1)
    with pytest.raises(ValueError, match=r"expected an integer >= 0, got '1\.5'"):
        parse_int("1.5", minimum=0)
    assert parse_value("3") == 3
    assert parse_value("3e-4") == 3e-4
    assert parse_value("true") is True and parse_value("False") is False
    assert parse_value("null") is None and parse_value("None") is None
    assert parse_value("[32, 32]") == [32, 32]
    assert parse_value('{"a": 1}') == {"a": 1}
    assert parse_value("jax.nn.tanh") == "jax.nn.tanh"
    assert split_item("learning_rate = 1e-3") == ("learning_rate", 1e-3)
    assert split_item("env.target=a=b") == ("env.target", "a=b")


def test_fold() -> None:
    box = (
        "╭─ Value error ─────────────────────╮\n"
        "│ Error parsing --num-evals: expected │\n"
        "│ an integer, got 'x'                 │\n"
        "│ ─────────────────────────────────── │\n"
        "│ For full helptext, see x --help     │\n"
        "╰─────────────────────────────────────╯\n"
    )
    assert fold(box) == "--num-evals: expected an integer, got 'x'"
    assert fold("╭─ Missing subcommand ─╮\n│ Expected one of {a, b}. │\n╰──╯") == (
        "Missing subcommand: Expected one of {a, b}."
    )
    ascii_box = " Missing argument \n --- \n  Missing value for argument 'x'.\n  ---\n  For full helptext\n"
    assert fold(ascii_box) == "Missing value for argument 'x'."
