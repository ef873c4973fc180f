"""Where a step's time goes on the device (`physics.py --profile`): one rollout under
`jax.profiler.trace`, its kernel events per step, and those summed by the named scopes of the
operations they run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import jax
from physics_measure import _rollout, _sharded

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
