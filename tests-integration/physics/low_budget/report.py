"""Print the low-budget corpus's error table: per scene and solver budget, our max |qpos - MuJoCo's|
over 0.1 s from the keyframe (keyframe controls, and with the sinusoidal offset), or why our loader
refused the scene, and whether MuJoCo C itself still has the robot standing (or the cube held) after
1 s at that budget. Rerun after solver changes:

    hatch run python tests-integration/physics/low_budget/report.py [scene ...]
"""

from __future__ import annotations

import importlib.util
import os
import sys
import warnings
from pathlib import Path
from types import ModuleType

# As the test session (conftest.py): XLA's cheapest optimization level, since compiles (one per scene
# and budget) dominate these 0.1 s rollouts.
if "--xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    flags = os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0"
    os.environ["XLA_FLAGS"] = flags.strip()

import jax
import mujoco
import numpy as np

# The test session's JAX settings (repository conftest.py), so the table shows what the tests see.
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")
jax.config.update("jax_default_matmul_precision", "highest")


def _corpus() -> ModuleType:
    """low_budget_test.py (the scene helpers), imported by path: tests-integration is no package."""
    path = Path(__file__).resolve().parent.parent / "low_budget_test.py"
    spec = importlib.util.spec_from_file_location("low_budget_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def mujoco_sane(m: mujoco.MjModel) -> bool:
    """MuJoCo C alone, 1 s from keyframe 0: still touching, finite, free bodies within 10 cm."""
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    q0 = d.qpos.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(round(1.0 / float(m.opt.timestep))):
            mujoco.mj_step(m, d)
    free = [int(m.jnt_qposadr[j]) for j in range(m.njnt) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]
    moved = max((float(np.abs(d.qpos[a:a + 3] - q0[a:a + 3]).max()) for a in free), default=0.0)
    return bool(d.ncon > 0 and np.all(np.isfinite(d.qpos)) and moved < 0.1)


def main(names: list[str]) -> None:
    corpus = _corpus()
    print(f"{'scene':<18} {'budget':>8} {'max err':>9} {'+offset':>9} {'spread':>9} {'tol':>6} "
          f"{'MuJoCo ok':>9}  refused")
    for name, budget in corpus.cases():
        if names and name not in names:
            continue
        m = corpus.load_model(name, budget)
        row = f"{name:<18} {budget[0]:>3},{budget[1]:<4}"
        sane = "yes" if mujoco_sane(m) else "NO"
        try:
            errs = corpus.run_case(name, budget)
        except ValueError as e:  # the loader refuses the model
            first = str(e).splitlines()[0]
            print(f"{row} {'-':>9} {'-':>9} {'-':>9} {'-':>6} {sane:>9}  {first}", flush=True)
            continue
        except Exception as e:  # a failure while tracing or running, shown like the test would fail
            msg = f"error: {type(e).__name__}: {str(e).splitlines()[0][:80]}"
            print(f"{row} {'-':>9} {'-':>9} {'-':>9} {'ERROR':>6} {sane:>9}  {msg}", flush=True)
            continue
        plain, offset = (errs[off][0] for off in (False, True))
        spread = max(errs[off][3] for off in (False, True))
        ok = all(errs[off][0] < (corpus.QPOS_TOL if errs[off][3] < corpus.CHAOTIC_SPREAD
                                 else max(corpus.QPOS_TOL, corpus.CHAOTIC_FACTOR * errs[off][3]))
                 for off in (False, True))
        print(f"{row} {plain:>9.2e} {offset:>9.2e} {spread:>9.2e} {'ok' if ok else 'FAIL':>6} {sane:>9}  no",
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
