"""Every MJCF shipped by dm_control (suite/) and Gymnasium (MuJoCo assets) runs like MuJoCo C.

Models nobody on this project wrote: each loads through MuJoCo's compiler, stays finite for 1 s of
simulated time under sinusoidal controls inside its control range, and tracks MuJoCo's qpos within
5e-3 over the first 0.1 s under the same controls (float32 against MuJoCo's float64). A model that
still fails at load is marked as waiting, with the feature it waits on; its load must still fail
with exactly that message, so the table has to shrink when the feature lands. No model is skipped.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import warnings
from pathlib import Path

import brax_physics as bp
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest


def _package_dir(name: str) -> Path:
    """Folder of an installed package, found without importing it (dm_control ships no types)."""
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.submodule_search_locations, f"{name} is a test dependency"
    return Path(next(iter(spec.submodule_search_locations)))


SUITE = _package_dir("dm_control") / "suite"
GYM = _package_dir("gymnasium") / "envs" / "mujoco" / "assets"
MODELS = {
    **{f"dm_control/{p.stem}": p for p in sorted(SUITE.glob("*.xml"))},
    **{f"gymnasium/{p.stem}": p for p in sorted(GYM.glob("*.xml"))},
}
FINITE_SECONDS = 1.0
TRACK_SECONDS = 0.1
QPOS_TOL = 5e-3

# Models that still fail at load, by the start of their load error today (none since the height
# fields and the noslip solver landed; a model added to the packages that fails enters here with
# its reason). The quadruped's terrain loads flat from the XML: dm_control fills it at episode start.
WAITING: dict[str, str] = {
}

pytestmark = pytest.mark.slow


def _controls(m: mujoco.MjModel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mid, amplitude, frequency) (nu,) of each actuator's sinusoidal control, inside its ctrlrange."""
    rng = np.asarray(m.actuator_ctrlrange, np.float64).reshape(m.nu, 2)
    limited = np.asarray(m.actuator_ctrllimited, bool)
    mid = np.where(limited, rng.mean(axis=1), 0.0)
    # 90% of the half range keeps the control strictly inside it; unlimited actuators swing +-1
    amp = np.where(limited, 0.45 * (rng[:, 1] - rng[:, 0]), 1.0)
    freq = 0.5 + 0.37 * np.arange(m.nu)  # distinct frequencies (Hz) excite different modes
    return mid, amp, freq


def _ctrl(mid: np.ndarray, amp: np.ndarray, freq: np.ndarray, t: float) -> np.ndarray:
    out: np.ndarray = mid + amp * np.sin(2 * np.pi * freq * t)
    return out


# The suite compiles with LLVM's cheapest optimization (conftest.py), which runs a step a few times
# slower: right for the small models, whose compile dominates, wrong for these two, whose 1 s
# rollout (thousands of contact slots, 200-500 steps) costs more than their compile at full
# optimization; they compile at XLA's default level instead.
_FULL_OPTIMIZATION = ("dm_control/dog", "dm_control/humanoid_CMU")


def _ours(sys: bp.System, m: mujoco.MjModel, steps: int, optimize: bool = False) -> np.ndarray:
    """(steps, nq) our qpos after each step under the sinusoidal controls."""
    mid, amp, freq = (jnp.asarray(x, jnp.float32) for x in _controls(m))

    @functools.partial(jax.jit, compiler_options={"xla_backend_optimization_level": 3} if optimize else None)
    def rollout(state: bp.State) -> jax.Array:
        def body(s: bp.State, _: None) -> tuple[bp.State, jax.Array]:
            s = bp.step(sys, s, mid + amp * jnp.sin(2 * jnp.pi * freq * s.time))
            return s, s.q

        return jax.lax.scan(body, state, None, length=steps)[1]

    return np.asarray(rollout(bp.init(sys)), np.float64)


def _mujoco(m: mujoco.MjModel, steps: int) -> np.ndarray:
    """(steps, nq) MuJoCo's qpos after each step under the same controls."""
    d = mujoco.MjData(m)
    mid, amp, freq = _controls(m)
    out = np.zeros((steps, m.nq))
    for i in range(steps):
        d.ctrl[:] = _ctrl(mid, amp, freq, d.time)
        mujoco.mj_step(m, d)
        out[i] = d.qpos
    return out


def test_the_corpus_is_there() -> None:
    # the PyPI packages moved their assets before: an empty glob must not pass silently
    assert sum(k.startswith("dm_control/") for k in MODELS) >= 19, sorted(MODELS)
    assert sum(k.startswith("gymnasium/") for k in MODELS) >= 14, sorted(MODELS)


# The corpus is most of the integration suite's time; `--dist loadscope` sends each class below to a
# worker of its own, so these shares (by measured cost: the dog alone, the quadruped with CMU's
# humanoid, the middle-sized models, the rest) run side by side instead of in one worker.
_SHARES = (
    ("dm_control/dog",),
    ("dm_control/quadruped", "dm_control/humanoid_CMU"),
    ("dm_control/finger", "dm_control/stacker", "dm_control/fish", "dm_control/manipulator",
     "dm_control/humanoid"),
)
_REST = tuple(n for n in sorted(MODELS) if not any(n in share for share in _SHARES))


def test_the_shares_cover_the_corpus() -> None:
    shared = [n for share in _SHARES for n in share]
    assert set(shared) <= set(MODELS) and len(set(shared)) == len(shared), shared


class TestDog:
    """The dog: 85 dofs, 296 geoms, noslip."""

    @pytest.mark.parametrize("name", _SHARES[0])
    def test_model_runs_like_mujoco(self, name: str) -> None:
        _runs_like_mujoco(name)


class TestQuadrupedAndCMU:
    """dm_control's quadruped (height field) and CMU humanoid."""

    @pytest.mark.parametrize("name", _SHARES[1])
    def test_model_runs_like_mujoco(self, name: str) -> None:
        _runs_like_mujoco(name)


class TestMiddle:
    """Middle-sized models."""

    @pytest.mark.parametrize("name", _SHARES[2])
    def test_model_runs_like_mujoco(self, name: str) -> None:
        _runs_like_mujoco(name)


class TestRest:
    """Every other model of the corpus."""

    @pytest.mark.parametrize("name", _REST)
    def test_model_runs_like_mujoco(self, name: str) -> None:
        _runs_like_mujoco(name)


def _runs_like_mujoco(name: str) -> None:
    """`name` loads, stays finite for FINITE_SECONDS and tracks MuJoCo's qpos for TRACK_SECONDS."""
    path = MODELS[name]
    # Option warnings are the loader's documented answer to options it runs differently (Gymnasium's
    # humanoid asks for PGS, which runs as Newton with the same optimum); tracking MuJoCo is the test.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bp.OptionWarning)
        if name in WAITING:
            with pytest.raises(ValueError, match=re.escape(WAITING[name])):
                bp.load_mjcf(path)
            pytest.xfail(f"waiting: {WAITING[name]}")
        sys = bp.load_mjcf(path)
    m = mujoco.MjModel.from_xml_path(str(path))
    dt = float(m.opt.timestep)
    steps = round(FINITE_SECONDS / dt)
    q = _ours(sys, m, steps, optimize=name in _FULL_OPTIMIZATION)
    bad = np.flatnonzero(~np.all(np.isfinite(q), axis=1))
    assert bad.size == 0, f"{name}: qpos is not finite from step {bad[0] if bad.size else -1} on"
    track = max(1, round(TRACK_SECONDS / dt))
    want = _mujoco(m, track)
    err = np.abs(q[:track] - want)
    worst = np.unravel_index(np.argmax(err), err.shape) if err.size else (0, 0)
    assert err.size == 0 or err.max() < QPOS_TOL, (
        f"{name}: qpos[{worst[1]}] differs from MuJoCo by {err.max():.3g} at step {worst[0]} "
        f"(tolerance {QPOS_TOL})"
    )
