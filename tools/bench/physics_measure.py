"""Measuring a rollout in this process, for `physics.py`'s backends: the rollout (`lax.scan` over a
vmapped step), compile and run seconds, XLA buffer bytes, per-env memory, the sharded variant, and
the timed turns a child serves under `--interleave` (`_serve`).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


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
