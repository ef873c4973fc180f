"""`brax-train reproduce` end to end: a suite recipe's quick band reproduced on this machine.

Each run is the real command in a subprocess, as users run it and as the bands were measured (XLA's
default optimization and one CPU device, where the tests' conftest lowers the one and forces two),
one seed: the recipe trains and its final evaluation return must clear the band's recorded bar.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest
from brax_train import presets

pytestmark = pytest.mark.slow

QUICK = ("dm_control/cartpole-balance",)  # point_mass-easy learns nothing measurable within 2M steps


def _user_xla_flags() -> str:
    """The tests' XLA_FLAGS without their lowered optimization level and forced host devices."""
    ours = ("--xla_backend_optimization_level", "--xla_force_host_platform_device_count")
    return " ".join(f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith(ours))


@pytest.mark.parametrize("env", QUICK)
def test_quick_band_is_reproduced(env: str, tmp_path: pathlib.Path) -> None:
    band = presets.PPO_BANDS[env]["quick"]
    proc = subprocess.run(
        [sys.executable, "-m", "brax_train.cli", "reproduce", env, "--quick", "--seeds", str(band.seeds[0]),
         "--run-dir", str(tmp_path / "runs")],
        capture_output=True, text=True, timeout=900, check=False,
        env={**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": _user_xla_flags()},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    rows = [line.split() for line in proc.stdout.splitlines()]
    rows = rows[rows.index(["seed", "return", "minutes", "result"]):]
    assert rows[-1][:2] == [f"{env}:", "PASS"], proc.stdout
    seed, ret = int(rows[1][0]), float(rows[1][1])
    assert seed == band.seeds[0] and ret >= band.low, proc.stdout
    # the run directory holds the recipe at the band's steps
    assert (tmp_path / "runs" / f"seed-{seed}" / "metrics.jsonl").is_file()
