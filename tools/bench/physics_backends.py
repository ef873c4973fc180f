"""The backends `physics.py` compares: brax-physics, Google brax's pipelines (generalized,
positional, spring, MJX) and MuJoCo C, each run in this process from the same inputs (`BACKENDS`),
with the solver settings they run (`_solver`, `_env_opt`).
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from models import MJX_ENV_OPT
from physics_measure import _memory_per_env, _rollout, _serve, _sharded, _time_jax
from physics_profile import _kernel_profile


def _controls(nu: int, batch: int, xml: str | None = None) -> np.ndarray:
    """Fixed per-env controls: every backend sees the same inputs. In [-1, 1], or for a model with a
    keyframe its first key's ctrl plus up to ±0.1 (position-controlled robots hold their pose)."""
    u = np.random.default_rng(0).uniform(-1.0, 1.0, size=(batch, nu)).astype(np.float32)
    key = _keyframe(xml) if xml is not None else None
    return u if key is None else (key[1][None, :] + 0.1 * u).astype(np.float32)


def _keyframe(xml: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(qpos, ctrl) of the model's first keyframe, or None: models with one start there."""
    model = mujoco.MjModel.from_xml_string(xml)
    if model.nkey == 0:
        return None
    return model.key_qpos[0].copy(), model.key_ctrl[0].copy()


def _timed_rollout(step: Callable[[Any, jax.Array], Any], state: Any, ctrl: jax.Array, steps: int,
                   repeats: int, sharded: bool) -> tuple[float, float, int]:
    """`_time_jax` of `_rollout(step, steps)` from (state, ctrl), over every CPU device when `sharded`;
    with `BENCH_MEMORY=1` in the environment, prints `_memory_per_env` as a JSON object instead, and
    with `BENCH_PROFILE=1` `_kernel_profile` (under a "profile" key)."""
    if os.environ.get("BENCH_MEMORY") == "1":
        print(json.dumps(_memory_per_env(step, state, ctrl, steps, sharded)), flush=True)
        return float("nan"), float("nan"), 0
    if os.environ.get("BENCH_PROFILE") == "1":
        print(json.dumps({"profile": _kernel_profile(step, state, ctrl, steps, sharded)}), flush=True)
        return float("nan"), float("nan"), 0
    rollout = _rollout(step, steps, whole_state=False)
    fn, args = _sharded(rollout, (state, ctrl)) if sharded else (rollout, (state, ctrl))
    return _time_jax(fn, args, repeats)


def our_system(xml: str, opt: dict[str, int] | None = None) -> Any:
    """brax-physics `System` of `xml`, with the MjOption fields `opt` set before it loads."""
    import brax_physics as bp

    model = mujoco.MjModel.from_xml_string(xml)
    for key, value in (opt or {}).items():
        setattr(model.opt, key, value)
    return bp.from_mjmodel(model)


def bench_ours(xml: str, batch: int, steps: int, repeats: int, sharded: bool = False,
               opt: dict[str, int] | None = None) -> tuple[float, float, int]:
    """brax-physics generalized pipeline (`sharded`: over every CPU device, see `_sharded`; `opt`:
    MjOption fields set on the model before it loads)."""
    import brax_physics as bp

    sys_ = our_system(xml, opt)
    key = _keyframe(xml)
    q = None if key is None else jnp.asarray(key[0], jnp.float32)
    state = jax.jit(jax.vmap(lambda _: bp.init(sys_, q)))(jnp.arange(batch))  # one compile, not one per op
    ctrl = jnp.asarray(_controls(sys_.nu, batch, xml))
    return _timed_rollout(lambda st, u: bp.step(sys_, st, u), state, ctrl, steps, repeats, sharded)


def bench_brax(xml: str, batch: int, steps: int, repeats: int, backend: str,
               opt: dict[str, int] | None = None, sharded: bool = False) -> tuple[float, float, int]:
    """Google brax's `generalized`, `positional`, `spring` or `mjx` pipeline (`opt`: MjOption
    fields set on the model before it loads; `sharded`: over every CPU device)."""
    import importlib

    # mujoco.mjx (imported by brax) prints optional-backend import failures to stdout, which must
    # stay JSON lines only.
    with contextlib.redirect_stdout(sys.stderr):
        from brax.io import mjcf

    pipeline = importlib.import_module(f"brax.{backend}.pipeline")
    model = mujoco.MjModel.from_xml_string(xml)
    if backend == "mjx" and _mjx_lacks_solver(model):
        model.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON  # MJX's own default (see the row's "solver")
    for key, value in (opt or {}).items():
        setattr(model.opt, key, value)
    sys_ = mjcf.load_model(model)
    start = _keyframe(xml)
    q = jnp.asarray(sys_.init_q if start is None else start[0])
    qd = jnp.zeros(sys_.qd_size())
    state = jax.jit(jax.vmap(lambda _: pipeline.init(sys_, q, qd)))(jnp.arange(batch))
    ctrl = jnp.asarray(_controls(sys_.act_size(), batch, xml))
    return _timed_rollout(lambda st, u: pipeline.step(sys_, st, u), state, ctrl, steps, repeats, sharded)


def _mjx_lacks_solver(model: mujoco.MjModel) -> bool:
    """MJX has no PGS solver: it runs such models (Gymnasium's humanoid) with its default, Newton."""
    return int(model.opt.solver) == int(mujoco.mjtSolver.mjSOL_PGS)


def _solver(backend: str, xml: str, model_name: str) -> str:
    """The constraint solver a backend runs the model with, as the row reports it."""
    model = mujoco.MjModel.from_xml_string(xml)
    if backend in _ENV_OPT_BACKENDS and model_name in MJX_ENV_OPT:
        o = MJX_ENV_OPT[model_name]
        name = str(mujoco.mjtSolver(o["solver"]).name).removeprefix("mjSOL_")
        return f"{name} (Google brax's env: {o['iterations']} iteration, {o['ls_iterations']} line search)"
    name = str(mujoco.mjtSolver(model.opt.solver).name).removeprefix("mjSOL_")
    if backend == "brax_mjx" and _mjx_lacks_solver(model):
        return f"NEWTON (MJX has no {name})"
    return name


def bench_mujoco(xml: str, batch: int, steps: int, repeats: int,
                 threads: int = 0) -> tuple[float, float, int]:
    """MuJoCo C: `mujoco.rollout` (native mj_step loop), on `threads` threads (0: one per core)."""
    from mujoco import rollout

    model = mujoco.MjModel.from_xml_string(xml)
    nthread = min(batch, threads or os.cpu_count() or 1)
    datas = [mujoco.MjData(model) for _ in range(nthread)]
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    init = np.zeros((batch, mujoco.mj_stateSize(model, spec)))
    if model.nkey:
        mujoco.mj_resetDataKeyframe(model, datas[0], 0)
    for i in range(batch):
        mujoco.mj_getState(model, datas[0], init[i], spec)
    ctrl = np.repeat(_controls(model.nu, batch, xml)[:, None, :], steps, axis=1).astype(np.float64)
    with rollout.Rollout(nthread=nthread) as r:
        r.rollout([model] * batch, datas, init, ctrl, nstep=steps)  # warm-up

        def run() -> float:
            t0 = time.perf_counter()
            r.rollout([model] * batch, datas, init, ctrl, nstep=steps)
            return time.perf_counter() - t0

        if os.environ.get("BENCH_SERVE") == "1":
            return _serve(float("nan"), 0, run)
        return float("nan"), statistics.median(run() for _ in range(repeats)), 0


# Each takes (xml, batch, steps, repeats, model name) and returns (compile s, run s, XLA bytes).
BACKENDS: dict[str, Callable[[str, int, int, int, str], tuple[float, float, int]]] = {
    "brax_physics": lambda x, b, s, r, m: bench_ours(x, b, s, r),
    "brax_generalized": lambda x, b, s, r, m: bench_brax(x, b, s, r, "generalized"),
    "brax_positional": lambda x, b, s, r, m: bench_brax(x, b, s, r, "positional"),
    "brax_spring": lambda x, b, s, r, m: bench_brax(x, b, s, r, "spring"),
    "brax_mjx": lambda x, b, s, r, m: bench_brax(x, b, s, r, "mjx"),
    # MJX with the solver settings Google brax's env of the model gives it (models.MJX_ENV_OPT)
    "brax_mjx_env": lambda x, b, s, r, m: bench_brax(x, b, s, r, "mjx", _env_opt(m)),
    # ours with those settings: engine against engine at one budget
    "brax_physics_mjx_env": lambda x, b, s, r, m: bench_ours(x, b, s, r, opt=_env_opt(m)),
    "mujoco_c": lambda x, b, s, r, m: bench_mujoco(x, b, s, r),
    # one thread: the per-core anchor (XLA:CPU runs a vmapped step's kernels one at a time)
    "mujoco_c_1thread": lambda x, b, s, r, m: bench_mujoco(x, b, s, r, threads=1),
    # one CPU device per core, the batch split over them (run only when named: see `_SHARDED`)
    "brax_physics_sharded": lambda x, b, s, r, m: bench_ours(x, b, s, r, sharded=True),
    "brax_mjx_env_sharded": lambda x, b, s, r, m: bench_brax(x, b, s, r, "mjx", _env_opt(m), sharded=True),
}
# Backends that run Google brax's env settings for MJX (`MJX_ENV_OPT`): only ant and humanoid have them.
_ENV_OPT_BACKENDS = frozenset({"brax_mjx_env", "brax_mjx_env_sharded", "brax_physics_mjx_env"})
# Backends that step JAX programs (the others have no XLA buffers for `--memory` to count).
_JAX_BACKENDS = frozenset(BACKENDS) - {"mujoco_c", "mujoco_c_1thread"}
# Backends whose child sees one XLA CPU device per core; not in the default grid.
_SHARDED = frozenset({"brax_physics_sharded", "brax_mjx_env_sharded"})


def _env_opt(model: str) -> dict[str, int]:
    """`MJX_ENV_OPT[model]`, or an error naming the models Google brax's envs set MJX options for."""
    if model not in MJX_ENV_OPT:
        raise ValueError(f"brax_mjx_env: Google brax has no MJX env settings for model {model!r} "
                         f"(only {', '.join(MJX_ENV_OPT)})")
    return MJX_ENV_OPT[model]
