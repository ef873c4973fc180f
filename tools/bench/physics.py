"""Physics throughput: brax-physics next to Google's brax (generalized, positional, spring, MJX) and MuJoCo C.

Prints one JSON line per (model, backend, batch): physics steps per second and env steps per
second (physics steps / the env's n_frames: 5 for ant and humanoid, 1 otherwise; a jitted `lax.scan`
over a vmapped step; median of `--repeats` timed runs after a warm-up), compile time, the XLA
buffer footprint of the compiled rollout, and `ours_over_this`, our throughput divided by that
backend's. Run with `hatch run bench:physics [--models ant,humanoid] [--batches 1,128,1024]
[--timeout S] [--memory] [--profile]`; each row runs in its own process, and one that does not
finish in S seconds prints as an error row. `--memory` adds buffer bytes per env under one XLA
schedule for every backend: for the timed rollout, which returns positions only (XLA keeps what a
step reads from its state), and for the same rollout returning the whole state, as a training loop
keeps its envs' states.
`--profile` adds where a step's time goes on the device (kernels and host syncs per step, the
costliest kernels): the GPU's question, where launches and syncs rather than arithmetic set the pace.
Google brax's positional and spring pipelines approximate the model (their own contact and joint
models); their rows are speed references only. `brax_mjx` runs the XML's solver settings, as every
other backend; `brax_mjx_env` runs MJX with the ones Google brax's ant and humanoid envs give it (1
Newton iteration, 4 line-search steps: "each engine's own settings"), and only for those models
unless asked for by name; `brax_physics_mjx_env` runs ours with those settings (engine against
engine at the same budget). The `lb_*` models (the low-budget corpus) run their own budgets on every
backend, from their first keyframe. `mujoco_c` runs one thread per core,
`mujoco_c_1thread` one thread: the per-core anchor, as XLA:CPU runs a vmapped step's kernels one at
a time. `brax_physics_sharded` and `brax_mjx_env_sharded` (only when named) give their child one XLA
CPU device per core and split the batch over them with `jax.shard_map`, so the cores run steps side
by side as MuJoCo C's threads do. `--interleave` times a (model, batch)'s rows in turns instead of
one after another (`_interleaved`): each row's child stays alive after its compile, and each of
`--repeats` rounds gives every row a turn (`_serve`: at least `_TURN_S` of timed rollouts), so
drift between minutes (20-50% on shared 2-core machines) hits all rows alike; `ours_over_this`
is then the median of the rounds' paired ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import MJX_ENV_OPT, MODELS, N_FRAMES
from results import record

Result = dict[str, Any]


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


def _time_jax(rollout: Callable[..., Any], args: tuple[Any, ...], repeats: int) -> tuple[float, float, int]:
    """Compile seconds, median run seconds and XLA buffer bytes of `jit(rollout)(*args)` (with
    `BENCH_SERVE=1`, `_serve`s timed runs instead)."""
    t0 = time.perf_counter()
    compiled = jax.jit(rollout).lower(*args).compile()
    compile_s = time.perf_counter() - t0
    peak = _buffer_bytes(compiled)
    jax.block_until_ready(compiled(*args))

    def run() -> float:
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        return time.perf_counter() - t0

    if os.environ.get("BENCH_SERVE") == "1":
        return _serve(compile_s, peak, run)
    return compile_s, statistics.median(run() for _ in range(repeats)), peak


def _serve(compile_s: float, peak: int, run: Callable[[], float]) -> tuple[float, float, int]:
    """Child side of `--interleave`: print a ready line ({"ready": [compile_s, bytes]}), then per
    "run" line on stdin one untimed `run()` and timed ones for at least `_TURN_S` ({"run_s": their
    mean seconds}), until stdin closes.

    The untimed run wakes what the other rows' turns left idle (thread pools, caches): a rollout
    timed first after another process's turn ran up to 1.5x slower at batch 1. A batch-1 rollout
    takes milliseconds; one per turn made the rounds' ratios scatter by 1.4x.
    """
    print(json.dumps({"ready": [compile_s, peak]}), flush=True)
    for line in sys.stdin:
        if line.strip() == "run":
            run()
            times = [run()]
            while sum(times) < _TURN_S:
                times.append(run())
            print(json.dumps({"run_s": statistics.mean(times)}), flush=True)
    return compile_s, float("nan"), peak


# Seconds of timed rollouts per row and round under `--interleave` (at least one rollout).
_TURN_S = 0.5


def _sharded(rollout: Callable[..., Any],
             args: tuple[Any, ...]) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """`rollout` as one program per CPU device (`jax.shard_map`, the batch split evenly), and its
    arguments placed accordingly: XLA:CPU runs a step's kernels one at a time, a device per core
    runs them side by side."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    devices = jax.devices()
    batch = jax.tree.leaves(args)[0].shape[0]
    if batch % len(devices):
        raise ValueError(f"batch {batch} does not split evenly over {len(devices)} devices")
    mesh = Mesh(np.array(devices), ("batch",))
    split = PartitionSpec("batch")  # type: ignore[no-untyped-call]
    args = jax.device_put(args, NamedSharding(mesh, split))
    return jax.shard_map(rollout, mesh=mesh, in_specs=split, out_specs=split, check_vma=False), args


def _rollout(step: Callable[[Any, jax.Array], Any], steps: int, whole_state: bool) -> Callable[..., Any]:
    """`steps` vmapped steps under `lax.scan` from (state, ctrl); returns the final positions, or the
    final state (`whole_state`: what a training loop keeps between calls)."""
    def rollout(state: Any, ctrl: jax.Array) -> Any:
        def body(s: Any, _: None) -> tuple[Any, None]:
            return jax.vmap(step)(s, ctrl), None

        final = jax.lax.scan(body, state, None, length=steps)[0]
        return final if whole_state else final.q

    return rollout


def _buffer_bytes(compiled: Any) -> int:
    """Arguments, outputs and temporaries of a compiled program, in bytes (0 when XLA does not say)."""
    mem = compiled.memory_analysis()
    if mem is None:
        return 0
    return int(mem.temp_size_in_bytes + mem.argument_size_in_bytes + mem.output_size_in_bytes)


def _memory_per_env(step: Callable[[Any, jax.Array], Any], state: Any, ctrl: jax.Array, steps: int,
                    sharded: bool) -> dict[str, int]:
    """XLA buffer bytes per env of the rollout (compiled, not run): `bytes_per_env_q` returns the
    positions only, so XLA keeps just what a step reads from its state; `bytes_per_env_state` returns
    the whole state, as an RL environment's state persists between calls; `marginal_bytes_per_env_q`
    and `fixed_bytes_q` split the first by compiling it again at twice the batch."""
    out = {}
    batch = ctrl.shape[0]
    envs_per_program = batch // (len(jax.devices()) if sharded else 1)

    def bytes_of(whole: bool, st: Any, u: jax.Array) -> int:
        rollout = _rollout(step, steps, whole)
        fn, args = _sharded(rollout, (st, u)) if sharded else (rollout, (st, u))
        return _buffer_bytes(jax.jit(fn).lower(*args).compile())

    whole_q = bytes_of(False, state, ctrl)
    out["bytes_per_env_q"] = whole_q // envs_per_program
    out["bytes_per_env_state"] = bytes_of(True, state, ctrl) // envs_per_program
    # The same rollout at twice the batch splits the positions-only bytes into what each env adds
    # and what the program holds whatever the batch (a GPU's cuBLAS workspace is tens of MB).
    double = jax.tree.map(lambda x: jnp.concatenate([x, x]) if jnp.ndim(x) and x.shape[0] == batch
                          else x, (state, ctrl))
    marginal = (bytes_of(False, *double) - whole_q) // envs_per_program
    out["marginal_bytes_per_env_q"] = marginal
    out["fixed_bytes_q"] = whole_q - marginal * envs_per_program
    return out


# Steps of the profiled rollout: enough to average over, few enough that the trace stays small.
_PROFILE_STEPS = 20


def _kernel_profile(step: Callable[[Any, jax.Array], Any], state: Any, ctrl: jax.Array, steps: int,
                    sharded: bool) -> dict[str, Any]:
    """Where a step's time goes on the device: one compiled rollout of `_PROFILE_STEPS` steps run
    under `jax.profiler.trace`, its events summed per name and divided by the steps.

    `kernels_per_step` and `kernel_us_per_step` count the device's kernel and copy events (a GPU's
    stream lines; on a CPU, the XLA client threads' thunks, not the events enclosing them,
    `_encloses_kernels`); `top` lists the costliest names as [name, per step, microseconds per
    step]; `cuda_api` the host's CUDA driver calls per step (a while loop's trip copies its
    predicate to the host: synchronizations show there); `host_top` the host's costliest events
    (nested ones counted in each enclosing one) as `top`; `stages` the kernels' count and
    microseconds per step by the named scopes of the operations they run (`_stages`: brax-physics
    names its stages after MuJoCo's functions, `fwd_position/kinematics`); `lines` every event
    line's count and microseconds per step, so an unexpected trace layout still reads."""
    import glob
    import tempfile
    from collections import Counter

    from jax.profiler import ProfileData

    n = min(steps, _PROFILE_STEPS)
    rollout = _rollout(step, n, whole_state=False)
    fn, args = _sharded(rollout, (state, ctrl)) if sharded else (rollout, (state, ctrl))
    compiled = jax.jit(fn).lower(*args).compile()
    op_names = _op_names(compiled.as_text() or "")
    jax.block_until_ready(compiled(*args))
    with tempfile.TemporaryDirectory() as tmp:
        with jax.profiler.trace(tmp):
            t0 = time.perf_counter()
            jax.block_until_ready(compiled(*args))
            wall = time.perf_counter() - t0
        data = ProfileData.from_file(glob.glob(f"{tmp}/**/*.xplane.pb", recursive=True)[0])
        count: Counter[str] = Counter()
        ns: Counter[str] = Counter()
        api: Counter[str] = Counter()
        host_count: Counter[str] = Counter()
        host_ns: Counter[str] = Counter()
        lines: dict[str, list[float]] = {}
        for plane in data.planes:
            device = plane.name.startswith("/device:")
            if not device and plane.name != "/host:CPU":
                continue
            for line in plane.lines:
                events = [e for e in line.events
                          if not e.name.startswith(("end: ", "ThreadpoolListener"))]
                key = f"{plane.name} {line.name}"
                lines[key] = [len(events) / n, sum(e.duration_ns for e in events) / n / 1e3]
                # GPU: kernels and copies run on the stream lines ("XLA Ops" and "XLA Modules"
                # repeat them by HLO name); CPU: every host line but Python's runs thunks.
                kernel_line = line.name.startswith("Stream") if device else (
                    line.name != "python" and jax.devices()[0].platform == "cpu")
                for e in events:
                    if kernel_line and not _encloses_kernels(e.name):
                        count[e.name] += 1
                        ns[e.name] += e.duration_ns
                    elif not device:
                        if e.name.startswith("cu"):
                            api[e.name] += 1
                        if not e.name.startswith("$"):  # Python's own frames: the tracer's
                            host_count[e.name] += 1
                            host_ns[e.name] += e.duration_ns
    return {
        "profile_steps": n,
        "wall_us_per_step": round(wall / n * 1e6, 1),
        "kernels_per_step": round(sum(count.values()) / n, 1),
        "kernel_us_per_step": round(sum(ns.values()) / n / 1e3, 1),
        "top": [[k, round(count[k] / n, 2), round(v / n / 1e3, 2)] for k, v in ns.most_common(15)],
        "cuda_api": [[k, round(v / n, 2)] for k, v in api.most_common(10)],
        "host_top": [[k[:120], round(host_count[k] / n, 2), round(v / n / 1e3, 2)]
                     for k, v in host_ns.most_common(25)],
        "stages": _stages(op_names, count, ns, n),
        "lines": {k: [round(c, 1), round(us, 1)] for k, (c, us) in lines.items() if c},
    }


# op_name components that are a program's structure, not a stage: the rollout's scan and the
# shard_map and calls around the step.
_STRUCTURE = frozenset({"while", "body", "cond", "closed_call", "core_call", "shard_map", "checkpoint",
                        "remat", "custom_jvp_call", "custom_vjp_call"})


def _op_names(hlo_text: str) -> dict[str, str]:
    """Each instruction of an optimized HLO module's text to its `op_name` metadata (the JAX
    operation it came from, under its named scopes)."""
    import re

    out = {}
    for m in re.finditer(r"^\s*(?:ROOT )?%?([\w.\-]+) = .*?op_name=\"([^\"]*)\"", hlo_text, re.M):
        out[m.group(1)] = m.group(2)
    return out


def _scopes(op_name: str) -> list[str]:
    """The named scopes of an `op_name` ("jit(rollout)/while/body/closed_call/vmap(fwd_position)/
    kinematics/gather" -> ["fwd_position", "kinematics"]): the outer jit, the program's structure
    (`_STRUCTURE`) and the operation itself dropped, transformations unwrapped."""
    import re

    parts = []
    for part in op_name.split("/")[1:-1]:
        while (m := re.fullmatch(r"\w+\((.*)\)", part)) is not None:
            part = m.group(1)
        if part and part not in _STRUCTURE:
            parts.append(part)
    return parts


def _encloses_kernels(name: str) -> bool:
    """Whether a CPU trace event encloses kernels rather than being one: the thunk executor's own
    events, and a while loop's or conditional's thunk (its body's kernels are events too)."""
    import re

    loop = re.fullmatch(r"(while|conditional|call)(\.\d+)?", name)
    return name.startswith("ThunkExecutor") or loop is not None


def _stages(op_names: dict[str, str], count: Any, ns: Any, n: int, depth: int = 2) -> dict[str, list[float]]:
    """Kernel events (`count`, `ns` by name) summed by their operations' first `depth` named scopes
    (`_scopes`) below the scopes every scoped kernel shares (MJX's `step`), as [per step,
    microseconds per step], costliest first. "other": an operation outside every scope; "?": an
    event whose name has no op_name in the module (copies XLA adds; a GPU's kernel names, when
    neither they nor they with a last "_N" read ".N" are the module's)."""
    import re
    from collections import Counter

    scopes: dict[str, list[str] | None] = {}
    for name in count:
        op = op_names.get(name) or op_names.get(re.sub(r"_(\d+)$", r".\1", name))
        scopes[name] = None if op is None else _scopes(op)
    scoped = [p for p in scopes.values() if p]
    shared = 0
    while scoped and all(len(p) > shared and p[shared] == scoped[0][shared] for p in scoped):
        shared += 1
    by_count: Counter[str] = Counter()
    by_ns: Counter[str] = Counter()
    for name, c in count.items():
        p = scopes[name]
        # a kernel right in the shared scopes is named by the innermost of them
        key = "?" if p is None else "/".join(p[shared:shared + depth] or p[shared - 1:shared]) or "other"
        by_count[key] += c
        by_ns[key] += ns[name]
    return {k: [round(by_count[k] / n, 1), round(v / n / 1e3, 1)] for k, v in by_ns.most_common()}


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


# jaxlib 0.10.x's batched LAPACK kernels (potrf, the Cholesky behind MJX's Newton solver) split the
# batch over XLA:CPU's intra-op pool and block their pool thread until the chunks are done. XLA's
# default concurrency-optimized scheduler places MJX's two independent Cholesky calls side by side;
# once as many are in flight as the pool has threads (2 on a 2-core machine), every thread waits in
# `jax::ParallelBatchMap` and none is left to run the chunks. The memory-minimizing schedule keeps
# them apart, which in practice avoids the deadlock; that is observed, not guaranteed (no XLA flag
# sizes the pool or serializes thunks). Only the backends listed get it: ours keeps every batched
# LAPACK call below jaxlib's thread-pool threshold (brax_physics._src.linalg) and runs as users run
# it; each row names the flags it ran with. Sharded over CPU devices, MJX hangs even so.
_CHILD_XLA_FLAGS = "--xla_cpu_enable_concurrency_optimized_scheduler=false"
_NEEDS_CHILD_FLAGS = frozenset({"brax_mjx", "brax_mjx_env", "brax_mjx_env_sharded"})


def _cores() -> int:
    """The cores this process may run on: the sharded backends' device count."""
    return len(os.sched_getaffinity(0))


def _child_env(backend: str, memory: bool = False, profile: bool = False,
               serve: bool = False) -> dict[str, str]:
    """The environment of `backend`'s child: XLA_FLAGS plus `_CHILD_XLA_FLAGS` where it needs them,
    one CPU device per core for the sharded backends; `memory`: `BENCH_MEMORY=1` and
    `_CHILD_XLA_FLAGS` for every backend, so all count bytes under one schedule (XLA's default one
    trades buffer bytes for concurrency; MJX's children need the memory-minimizing one);
    `profile`: `BENCH_PROFILE=1`; `serve`: `BENCH_SERVE=1` (`_serve`), and on a GPU no
    preallocation (several children hold the device at once; JAX's default takes 75% of its memory
    for the first)."""
    env = dict(os.environ)
    if serve:
        env["BENCH_SERVE"] = "1"
        env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    if memory:
        env["BENCH_MEMORY"] = "1"
    if profile:
        env["BENCH_PROFILE"] = "1"
    flags = env.get("XLA_FLAGS", "")
    needs_flag = memory or backend in _NEEDS_CHILD_FLAGS
    if needs_flag and "xla_cpu_enable_concurrency_optimized_scheduler" not in flags:
        flags = f"{flags} {_CHILD_XLA_FLAGS}".strip()
    if backend in _SHARDED and "xla_force_host_platform_device_count" not in flags:
        flags = f"{flags} --xla_force_host_platform_device_count={_cores()}".strip()
    if flags:
        env["XLA_FLAGS"] = flags
    return env


def _measure(backend: str, xml: str, batch: int, steps: int, repeats: int, timeout: float,
             model: str = "", memory: bool = False,
             profile: bool = False) -> tuple[float, float, int, dict[str, Any]]:
    """Run one measurement in a fresh subprocess, so a run that never returns costs `timeout`, not the grid.

    jaxlib 0.10.2's CPU client was seen to wedge here at batch 1024 (every XLA worker and the main
    thread parked on futexes in `block_until_ready`, no CPU used), for Google brax's spring and MJX
    pipelines and for ours alike. MJX's wedge (batch 512 and 1024) and ours were traced to batched
    LAPACK calls running two at once (see `_CHILD_XLA_FLAGS`; ours now keeps them off the pool). Spring
    makes no LAPACK call and was not traced; the timeout stays as the backstop. A fresh process per
    row also keeps compile caches from leaking between backends.
    """
    job = json.dumps({"backend": backend, "xml": xml, "batch": batch, "steps": steps, "repeats": repeats,
                      "model": model})
    def child(mem_child: bool, profile_child: bool = False) -> str:
        try:
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--one"], input=job, text=True,
                                  capture_output=True, timeout=timeout, check=False,
                                  env=_child_env(backend, mem_child, profile_child))
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"no result within {timeout:.0f} s (see _measure's docstring)") from None
        if proc.returncode != 0 or not any(ln.startswith("[") for ln in proc.stdout.splitlines()):
            raise RuntimeError(proc.stderr.strip()[-300:] or f"exit status {proc.returncode}")
        return proc.stdout

    out = child(False)
    compile_s, run_s, peak = json.loads([ln for ln in out.splitlines() if ln.startswith("[")][-1])
    mem: dict[str, Any] = {}
    if memory and backend in _JAX_BACKENDS:
        try:  # a memory child that fails costs its fields, not the row's timing
            mem = [json.loads(ln) for ln in child(True).splitlines() if ln.startswith("{")][-1]
        except Exception as e:
            mem = {"memory_error": f"{type(e).__name__}: {e}"[:300]}
    if profile and backend in _JAX_BACKENDS:
        try:  # likewise for the profile child
            mem.update([json.loads(ln) for ln in child(False, True).splitlines() if ln.startswith("{")][-1])
        except Exception as e:
            mem["profile_error"] = f"{type(e).__name__}: {e}"[:300]
    return float(compile_s), float(run_s), int(peak), mem


class _Server:
    """One row's child kept alive for `--interleave`: it compiles once (`_serve`), then takes a
    turn of timed rollouts per request, so the rows of a (model, batch) are timed in turns within
    the same minutes."""

    def __init__(self, backend: str, job: str, timeout: float) -> None:
        self.timeout = timeout
        # stderr to a file (closed in `close`): a pipe nobody reads could fill and block the child
        self.err = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--one"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err,
                                     env=_child_env(backend, serve=True))
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin, self.fd, self.buf = self.proc.stdin, self.proc.stdout.fileno(), b""
        self.stdin.write(job.encode() + b"\n")
        self.stdin.flush()

    def reply(self) -> dict[str, Any]:
        """The child's next JSON object line (other output skipped), within the timeout."""
        deadline = time.monotonic() + self.timeout
        while True:
            line, sep, rest = self.buf.partition(b"\n")
            if sep:
                self.buf = rest
                if line.startswith(b"{"):
                    out: dict[str, Any] = json.loads(line)
                    return out
                continue
            ready, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                self.close()
                raise TimeoutError(f"no result within {self.timeout:.0f} s (see _measure's docstring)")
            chunk = os.read(self.fd, 65536)
            if not chunk:
                self.proc.wait()
                self.err.seek(0)
                raise RuntimeError(self.err.read().strip()[-300:] or f"exit status {self.proc.returncode}")
            self.buf += chunk

    def run(self) -> float:
        """Seconds of one timed rollout."""
        self.stdin.write(b"run\n")
        self.stdin.flush()
        return float(self.reply()["run_s"])

    def close(self) -> None:
        """End the child (closing its stdin ends `_serve`)."""
        with contextlib.suppress(OSError):
            self.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        self.err.close()


def _interleaved(backends: list[str], xml: str, batch: int, steps: int, repeats: int, timeout: float,
                 model: str) -> dict[str, tuple[float, list[float], int] | Exception]:
    """Per backend, (compile s, the `repeats` run seconds, XLA bytes) or the error: each backend's
    child compiles in turn (alone, as `_measure`'s would), then every round gives each backend a
    turn (`_serve`: the mean rollout seconds of at least `_TURN_S`), one after another (every
    other round in reverse order), so the machine's drift over minutes hits every row alike."""
    out: dict[str, tuple[float, list[float], int] | Exception] = {}
    servers: dict[str, tuple[_Server, float, int]] = {}
    try:
        for backend in backends:
            job = json.dumps({"backend": backend, "xml": xml, "batch": batch, "steps": steps,
                              "repeats": repeats, "model": model})
            server = _Server(backend, job, timeout)
            try:
                compile_s, peak = server.reply()["ready"]
            except Exception as e:  # a peer failing on a model is a result, not a crash
                server.close()
                out[backend] = e
            else:
                servers[backend] = (server, float(compile_s), int(peak))
        runs: dict[str, list[float]] = {b: [] for b in servers}
        for r in range(repeats):
            # every other round in reverse, so no row always runs right after the same one
            for backend in list(runs)[:: 1 if r % 2 == 0 else -1]:
                try:
                    runs[backend].append(servers[backend][0].run())
                except Exception as e:
                    out[backend] = e
                    del runs[backend]
        for backend, times in runs.items():
            out[backend] = (servers[backend][1], times, servers[backend][2])
    finally:
        for server, _, _ in servers.values():
            server.close()
    return out


def _one() -> None:
    """Child process of `_measure` (or `_Server`): read one job as JSON on stdin, print [compile_s,
    run_s, bytes]."""
    job = json.loads(sys.stdin.readline())  # one line: under `_serve` requests follow it
    warnings.filterwarnings("ignore", message="Brax System", category=UserWarning)
    out = BACKENDS[job["backend"]](job["xml"], job["batch"], job["steps"], job["repeats"], job["model"])
    print(json.dumps(list(out)), flush=True)


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark grid and print JSON lines."""
    if argv is None and sys.argv[1:] == ["--one"]:
        _one()
        return
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--backends", default=",".join(b for b in BACKENDS if b not in _SHARDED))
    ap.add_argument("--batches", default="1,128,1024")
    ap.add_argument("--steps", type=int, default=200, help="physics steps per timed rollout")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=0,
                    help="override the models' solver iterations (all backends; 0: as in the XML)")
    ap.add_argument("--ls-iterations", type=int, default=0, help="override line-search iterations (0: XML)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per (model, backend, batch) row")
    ap.add_argument("--memory", action="store_true",
                    help="add bytes_per_env_q, bytes_per_env_state, marginal_bytes_per_env_q and "
                         "fixed_bytes_q to each JAX row (three more compiles; see _memory_per_env)")
    ap.add_argument("--profile", action="store_true",
                    help="add a kernel-level profile of the step to each JAX row (one more child; see "
                         "_kernel_profile)")
    ap.add_argument("--interleave", action="store_true",
                    help="time a (model, batch)'s rows in turns: every backend's child compiles, then "
                         "each of --repeats rounds gives each a turn of timed rollouts (see _interleaved)")
    ap.add_argument("--record", action="store_true",
                    help="also append each row to tools/bench/results.jsonl (see results.py)")
    args = ap.parse_args(argv)
    if args.interleave and (args.memory or args.profile):
        ap.error("--interleave times rows only: run --memory or --profile without it")
    for name in args.models.split(","):
        if name not in MODELS:
            ap.error(f"--models: unknown model {name!r}; choose from {', '.join(MODELS)}")
    for name in args.backends.split(","):
        if name not in BACKENDS:
            ap.error(f"--backends: unknown backend {name!r}; choose from {', '.join(BACKENDS)}")
    default_backends = args.backends == ap.get_default("backends")
    # Google brax warns on every load that it is unmaintained; the lines here are the output.
    warnings.filterwarnings("ignore", message="Brax System", category=UserWarning)
    device = jax.devices()[0]
    override = "".join(f' {k}="{v}"' for k, v in (("iterations", args.iterations),
                                                       ("ls_iterations", args.ls_iterations)) if v)
    for model in args.models.split(","):
        xml = MODELS[model].replace("<option", "<option" + override, 1) if override else MODELS[model]
        for batch in (int(b) for b in args.batches.split(",")):
            ours: float | None = None  # brax_physics runs first when listed, so each row prints as it ends
            backends = sorted(args.backends.split(","), key=lambda b: b != "brax_physics")
            rows: dict[str, Result] = {}
            for backend in backends:
                if backend in _ENV_OPT_BACKENDS and model not in MJX_ENV_OPT and default_backends:
                    continue
                row: Result = {"model": model + (f" ({override.strip()})" if override else ""),
                               "backend": backend, "batch": batch, "steps": args.steps,
                               "device": f"{device.platform}:{device.device_kind}", "cpus": os.cpu_count(),
                               "xla_flags": _child_env(backend).get("XLA_FLAGS", ""),
                               "solver": _solver(backend, xml, model)}
                rows[backend] = row
                try:
                    if backend in _ENV_OPT_BACKENDS:
                        _env_opt(model)  # an error row at once for models without such settings
                    if backend in _SHARDED and batch % _cores():
                        raise ValueError(f"batch {batch} does not split evenly over {_cores()} devices")
                except Exception as e:
                    row["error"] = f"{type(e).__name__}: {e}"[:300]
            if args.interleave:
                _print_interleaved(rows, xml, batch, args, model)
                continue
            for backend, row in rows.items():
                if "error" not in row:
                    try:
                        compile_s, run_s, peak, mem = _measure(backend, xml, batch, args.steps, args.repeats,
                                                               args.timeout, model, args.memory, args.profile)
                    except Exception as e:  # a peer failing on a model is a result, not a crash
                        row["error"] = f"{type(e).__name__}: {e}"[:300]
                    else:
                        row.update(_rates(model, batch, args.steps, run_s),
                                   compile_s=None if compile_s != compile_s else round(compile_s, 3),
                                   xla_buffer_bytes=peak or None, **mem)
                if backend == "brax_physics":
                    ours = row.get("steps_per_s")
                if ours and row.get("steps_per_s"):
                    row["ours_over_this"] = round(ours / row["steps_per_s"], 3)
                print(json.dumps(row), flush=True)
                if args.record:
                    record([row], bench="physics")


def _rates(model: str, batch: int, steps: int, run_s: float) -> dict[str, float]:
    """A row's physics steps/s and env steps/s (physics steps / the env's frames) for `run_s` per rollout."""
    return {"steps_per_s": round(batch * steps / run_s, 1),
            "env_steps_per_s": round(batch * steps / run_s / N_FRAMES.get(model, 1), 1)}


def _print_interleaved(rows: dict[str, Result], xml: str, batch: int, args: argparse.Namespace,
                       model: str) -> None:
    """`rows` measured by `_interleaved` and printed: each row's median over the rounds, and
    `ours_over_this` the median over rounds of this row's rollout time over brax_physics's in the
    same round (paired, so drift between rounds cancels)."""
    live = [b for b, row in rows.items() if "error" not in row]
    results = _interleaved(live, xml, batch, args.steps, args.repeats, args.timeout, model)
    ours = results.get("brax_physics")
    for backend, row in rows.items():
        res = results.get(backend)
        if isinstance(res, Exception):
            row["error"] = f"{type(res).__name__}: {res}"[:300]
        elif res is not None:
            compile_s, times, peak = res
            row.update(_rates(model, batch, args.steps, statistics.median(times)),
                       compile_s=None if compile_s != compile_s else round(compile_s, 3),
                       xla_buffer_bytes=peak or None, rounds=len(times), interleaved=True)
            if isinstance(ours, tuple):
                pairs = [t / o for t, o in zip(times, ours[1], strict=True)]
                row["ours_over_this"] = round(statistics.median(pairs), 3)
        print(json.dumps(row), flush=True)
        if args.record:
            record([row], bench="physics")


if __name__ == "__main__":
    main()
