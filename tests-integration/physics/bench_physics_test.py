"""tools/bench/physics.py: a row with the memory fields, one with a kernel profile, and ours at MJX's env
settings."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import jax
import mujoco
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools/bench"))
import brax_physics as bp
import physics
from models import MJX_ENV_OPT, MODELS


def test_row_with_memory_fields(capsys: pytest.CaptureFixture[str]) -> None:
    physics.main(["--models", "reacher", "--backends", "brax_physics", "--batches", "2", "--steps", "2",
                  "--repeats", "1", "--memory"])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 1 and "error" not in rows[0], rows
    row = rows[0]
    assert row["steps_per_s"] > 0 and row["compile_s"] > 0 and row["xla_buffer_bytes"] > 0
    # The whole-state rollout takes and returns every leaf of the state: at least twice its bytes.
    state = bp.init(bp.load_mjcf(MODELS["reacher"]))
    state_bytes = sum(leaf.nbytes for leaf in jax.tree.leaves(state))
    assert row["bytes_per_env_state"] >= 2 * state_bytes
    # The positions-only rollout keeps just what a step reads: less, but at least q in and out.
    assert 2 * state.q.nbytes <= row["bytes_per_env_q"] < row["bytes_per_env_state"]
    # Split by a second compile at twice the batch: each env adds at least its q in and out, and
    # the parts add up to the positions-only program's bytes (2 envs; floor division by 2).
    assert row["marginal_bytes_per_env_q"] >= 2 * state.q.nbytes
    whole = row["fixed_bytes_q"] + 2 * row["marginal_bytes_per_env_q"]
    assert 2 * row["bytes_per_env_q"] <= whole <= 2 * row["bytes_per_env_q"] + 1


def test_ours_with_mjx_env_settings(capsys: pytest.CaptureFixture[str]) -> None:
    physics.main(["--models", "ant,reacher", "--backends", "brax_physics_mjx_env", "--batches", "1",
                  "--steps", "1", "--repeats", "1"])
    ant, reacher = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert "error" not in ant and ant["steps_per_s"] > 0, ant
    assert ant["solver"] == "NEWTON (Google brax's env: 1 iteration, 4 line search)"
    # what that row stepped: MuJoCo's budget, honoured without a warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", bp.OptionWarning)
        opt = physics.our_system(MODELS["ant"], MJX_ENV_OPT["ant"]).opt
    assert (opt.iterations, opt.ls_iterations) == (1, 4)
    assert opt.disableflags & int(mujoco.mjtDisableBit.mjDSBL_EULERDAMP)
    # only the models Google brax's envs give MJX settings for (named backends print an error row)
    assert "no MJX env settings for model 'reacher'" in reacher["error"]


def test_row_with_kernel_profile(capsys: pytest.CaptureFixture[str]) -> None:
    physics.main(["--models", "reacher", "--backends", "brax_physics", "--batches", "2", "--steps", "3",
                  "--repeats", "1", "--profile"])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 1 and "error" not in rows[0] and "profile_error" not in rows[0], rows
    prof = rows[0]["profile"]
    assert prof["profile_steps"] == 3  # the row's steps, under _PROFILE_STEPS
    # On a CPU the XLA client's threads run the step's thunks: some per step, each named
    assert prof["kernels_per_step"] >= 1 and prof["kernel_us_per_step"] > 0
    assert prof["top"] and all(isinstance(name, str) and n > 0 for name, n, _ in prof["top"])
    assert prof["wall_us_per_step"] > 0 and prof["cuda_api"] == []
    assert any(line.startswith("/host:CPU") for line in prof["lines"])
    # kernels only: not the executor's events or the loop thunks that enclose them
    assert not any(physics._encloses_kernels(name) for name, _, _ in prof["top"]), prof["top"]
    assert physics._encloses_kernels("while.12") and physics._encloses_kernels("ThunkExecutor::Execute")
    # the same kernels by the pipeline's named stages: every kernel counted once
    stages = prof["stages"]
    assert stages["fwd_position/kinematics"][0] >= 1 and stages["integrate"][0] >= 1, stages
    assert abs(sum(c for c, _ in stages.values()) - prof["kernels_per_step"]) <= 0.05 * len(stages) + 0.1


def test_stages_of_kernels() -> None:
    """`_stages`: kernels summed by their operations' named scopes, below the scopes all of them share."""
    body = "jit(rollout)/while/body/closed_call/"
    assert physics._scopes(body + "vmap(fwd_position)/kinematics/gather") == ["fwd_position", "kinematics"]
    solve = body + "vmap(fwd_constraint)/solve/while/body/vmap()/div"
    assert physics._scopes(solve) == ["fwd_constraint", "solve"]
    cho = "jit(rollout)/shard_map/while/body/vmap(integrate)/vmap(jit(_cho_solve))/triangular_solve"
    assert physics._scopes(cho) == ["integrate", "_cho_solve"]
    assert physics._scopes("jit(rollout)/while/body/add") == []
    ours = {"a.1": body + "vmap(fwd_position)/kinematics/gather", "b": body + "vmap(integrate)/add",
            "c_fusion.2": body + "vmap(fwd_position)/kinematics/mul", "d": "jit(rollout)/while/body/add"}
    count = {"a.1": 2, "b": 2, "c_fusion_2": 4, "d": 2, "copy.3": 2}
    ns = {"a.1": 4e3, "b": 2e3, "c_fusion_2": 8e3, "d": 2e3, "copy.3": 6e3}
    assert physics._stages(ours, count, ns, 2) == {"fwd_position/kinematics": [3.0, 6.0], "?": [1.0, 3.0],
                                                  "integrate": [1.0, 1.0], "other": [1.0, 1.0]}
    # MJX's kernels all sit in vmap(step): the stages start below it
    mjx = {"a": body + "vmap(step)/forward/fwd_position/x/mul", "b": body + "vmap(step)/euler/add",
           "c": body + "vmap(step)/mul"}
    assert physics._stages(mjx, {"a": 1, "b": 1, "c": 1}, {"a": 3e3, "b": 2e3, "c": 1e3}, 1) == {
        "forward/fwd_position": [1.0, 3.0], "euler": [1.0, 2.0], "step": [1.0, 1.0]}


def test_interleaved_rows(capsys: pytest.CaptureFixture[str]) -> None:
    """`--interleave`: each row's child compiles once and times one rollout per round, in turns;
    a row that cannot run is an error row, and the mode refuses the options it does not time."""
    physics.main(["--models", "reacher", "--backends", "brax_physics,mujoco_c,brax_physics_mjx_env",
                  "--batches", "2", "--steps", "2", "--repeats", "2", "--interleave"])
    ours, c, mjx_env = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    for row in (ours, c):
        assert "error" not in row and row["rounds"] == 2 and row["interleaved"] is True, row
        assert row["steps_per_s"] > 0
    assert ours["compile_s"] > 0 and ours["xla_buffer_bytes"] > 0 and ours["ours_over_this"] == 1.0
    assert c["compile_s"] is None and c["ours_over_this"] > 0
    assert "no MJX env settings for model 'reacher'" in mjx_env["error"]
    with pytest.raises(SystemExit):
        physics.main(["--models", "reacher", "--interleave", "--memory"])
    assert "--interleave times rows only" in capsys.readouterr().err
