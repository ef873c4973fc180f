"""Bad arguments: exit status 2, one line on stderr naming the flag and the accepted values, no traceback."""

from __future__ import annotations

import json
import pathlib

import pytest

from brax_train.cli import main
from brax_train.cli._parser import nonnegative_int, parse_value, positive_int, rewrite_message, set_item


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
        (["train", "--num-timesteps", "1.5"], "--num-timesteps: expected a positive integer, got '1.5'"),
        (["train", "--seed", "-1"], "--seed: expected an integer >= 0, got '-1'"),
        (["train", "--set", "novalue"], "--set: expected KEY=VALUE, got 'novalue'"),
        (["eval", "d", "--episodes", "zero"], "--episodes: expected a positive integer, got 'zero'"),
        (["render", "d"], "--out: missing (required)"),
        (["bogus"], "unknown command 'bogus'; accepted: train, resume, eval, render, envs, doctor"),
        ([], "missing command; accepted: train, resume, eval, render, envs, doctor"),
        (["train", "--env"], "--env: expected one argument"),
    ],
)
def test_argument_errors(capsys: pytest.CaptureFixture[str], argv: list[str], expected: str) -> None:
    assert _error(capsys, argv) == expected


def test_unrecognized_argument(capsys: pytest.CaptureFixture[str]) -> None:
    assert "--bogus" in _error(capsys, ["envs", "--bogus"])


def test_unknown_env_lists_accepted_names(capsys: pytest.CaptureFixture[str]) -> None:
    msg = _error(capsys, ["train", "--env", "inverted_pendulumm"])
    assert msg.startswith(
        "--env: unknown environment 'inverted_pendulumm' (did you mean 'inverted_pendulum'?)"
    )
    assert "accepted: ant, fast," in msg


def test_unknown_set_key_names_it(capsys: pytest.CaptureFixture[str]) -> None:
    msg = _error(capsys, ["train", "--env", "fast", "--set", "num_env=8"])
    assert msg.startswith("--set: unknown key 'num_env' (did you mean 'num_envs'?)")


def test_unsettable_key(capsys: pytest.CaptureFixture[str]) -> None:
    msg = _error(capsys, ["train", "--env", "fast", "--set", "progress_fn=x"])
    assert msg.startswith("--set progress_fn: cannot be set from the command line")


def test_ppo_config_error_is_one_line_naming_keys(capsys: pytest.CaptureFixture[str]) -> None:
    msg = _error(capsys, ["train", "--env", "fast", "--set", "num_envs=3", "--set", "discounting=2"])
    assert "discounting must be in [0, 1], got 2" in msg
    assert "must be divisible by num_envs (3)" in msg


def test_bad_value_type(capsys: pytest.CaptureFixture[str]) -> None:
    msg = _error(capsys, ["train", "--env", "fast", "--set", "num_evals=many"])
    assert "num_evals must be an int >= 0, got 'many'" in msg


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


def test_help_and_version_exit_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "train" in capsys.readouterr().out
    assert main(["train", "--help"]) == 0
    assert "--num-envs" in capsys.readouterr().out
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("brax-train ")


def test_value_parsers() -> None:
    assert positive_int("1_000_000") == 1_000_000
    assert positive_int("2e6") == 2_000_000
    assert nonnegative_int("0") == 0
    assert parse_value("3") == 3
    assert parse_value("3e-4") == 3e-4
    assert parse_value("true") is True and parse_value("False") is False
    assert parse_value("null") is None and parse_value("None") is None
    assert parse_value("[32, 32]") == [32, 32]
    assert parse_value('{"a": 1}') == {"a": 1}
    assert parse_value("1_000") == 1000
    assert parse_value("jax.nn.tanh") == "jax.nn.tanh"
    assert parse_value("ADAPTIVE_KL") == "ADAPTIVE_KL"
    assert set_item("learning_rate = 1e-3") == ("learning_rate", 1e-3)
    assert set_item("env.target=a=b") == ("env.target", "a=b")


def test_rewrite_message() -> None:
    assert (
        rewrite_message("argument -n/--episodes: expected one argument")
        == "--episodes: expected one argument"
    )
    assert (
        rewrite_message("argument --backend: invalid choice: 'x' (choose from 'a', 'b')")
        == "--backend: invalid choice 'x'; accepted: a, b"
    )
