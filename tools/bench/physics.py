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
from pathlib import Path
from typing import Any

import jax

# The rows' in-process side lives beside this file: physics_backends.py (the backends), physics_measure.py
# (timing and memory of a rollout) and physics_profile.py (`--profile`); this file runs each row in a
# child process of its own (itself, with `--one`) and is the command line.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import MJX_ENV_OPT, MODELS, N_FRAMES
from physics_backends import _ENV_OPT_BACKENDS, _JAX_BACKENDS, _SHARDED, BACKENDS, _env_opt, _solver
from physics_backends import our_system as our_system
from physics_measure import _buffer_bytes as _buffer_bytes
from physics_measure import _time_jax as _time_jax
from physics_profile import _encloses_kernels as _encloses_kernels
from physics_profile import _scopes as _scopes
from physics_profile import _stages as _stages
from results import record

Result = dict[str, Any]


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
