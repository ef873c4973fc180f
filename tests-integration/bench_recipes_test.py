"""tools/bench/recipes.py: a suite recipe trained through `brax-train train` in a child process gives a
row of its evaluations against issue 55's target, with the `--set` overrides recorded; a task without
a target and malformed seeds are errors naming them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools/bench"))
import recipes

# A few hundred env steps of cartpole-balance: the child trains and evaluates twice.
TINY = ["--set", "num_timesteps=2560", "--set", "num_envs=8", "--set", "batch_size=8",
        "--set", "num_minibatches=2", "--set", "unroll_length=5", "--set", "num_evals=2",
        "--set", "num_eval_envs=2", "--set", "episode_length=50", "--set", "action_repeat=1"]


def test_a_tiny_recipe_run_gives_its_row() -> None:
    row = recipes.run_one("cartpole-balance", 3, None, 600.0, TINY)
    assert "error" not in row, row.get("error")
    assert (row["kind"], row["env"], row["seed"]) == ("recipe", "dm_control/cartpole-balance", 3)
    assert (row["target"], row["target_steps"]) == recipes.TARGETS["cartpole-balance"]
    assert [step for step, _, _ in row["curve"]] == [0, row["steps"]] and row["steps"] >= 2560
    assert row["final_reward"] == row["curve"][-1][1] and row["best_reward"] >= row["final_reward"]
    assert 0.0 <= row["final_reward"] <= 50.0  # at most one unit of reward per step of a 50-step episode
    assert row["met"] is False  # 50 steps cannot reach 950
    assert row["wall_s"] >= row["compile_s"] > 0.0 and row["env_steps_per_s"] > 0.0
    assert row["overrides"] == TINY


@pytest.mark.parametrize(("argv", "message"), [
    (["--envs", "cartpole-balance,dog-run"], "--envs: no target for 'dog-run'"),
    (["--seeds", "0,one"], "--seeds: expected integers separated by commas, got '0,one'"),
    (["--jobs", "0"], "--jobs: must be a positive integer, got 0"),
])
def test_bad_arguments_are_named(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                 argv: list[str], message: str) -> None:
    monkeypatch.setattr(sys, "argv", ["recipes.py", *argv])
    with pytest.raises(SystemExit):
        recipes.main()
    assert message in capsys.readouterr().err
