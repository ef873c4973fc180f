"""A/B of one brax-physics setting on the whole step: two programs in one process, timed alternately.

`hatch run bench:ab --model humanoid --batch 1024 --setting queue_slot_fraction --values 4 8` gives
the system each value of that `brax_physics.Lowering` field in turn (`sys.replace(lowering=...)`,
the other fields at their defaults), builds a fresh jit(scan(vmap(step))) rollout for it (the
settings are static data of the System, so each value traces and compiles its own program; no cache
to clear), checks that both give the same positions, and times the compiled rollouts alternately, so
that the machine's drift (20-30% within minutes on a shared CPU) hits both alike. Prints one JSON
line: per value the compile seconds, the median and fastest microseconds per physics step and the
program's XLA buffer bytes (arguments, outputs and temporaries of the positions-only rollout),
`same_program` (per value after the first, whether its optimized HLO equals the first's: a setting
that changes nothing shows here, not only as equal positions), and `b_over_a` and `b_over_a_min`,
the second value's step time over the first's by each. On a shared machine whose speed changes in
bursts the medians of two identical programs can differ by 5-10%; the fastest runs agree within
about 1%, so judge changes of a few percent by `b_over_a_min`. More than two values are timed the
same way, each run's `over_a_min` its fastest time over the first value's. The two compiles run in
the order given; the first compile of a process carries one-time setup, so compare compile seconds
only with the order also reversed. Several settings that only make sense together go
comma-separated, each value then a tuple with one entry per setting: `--setting
unroll_max_n,unroll_min_batch --values "(16, 128)" "(24, 64)"`; a platform list is a tuple literal:
`--setting queue_platforms --values "('cpu',)" "()"`. Through `hatch run`, which formats its
arguments again, a dict literal's braces are doubled: `--values "{{}}" "{{'cuda': 2}}"`.

A code change: with `--setting module:attribute` a value `@REV` is the attribute (a function, a
class) as its module defines it at git revision REV, and `@` the one loaded now: `--setting
brax_physics._src.solver:_hessian --values @ @d9dd9f0` times the working tree's Newton Hessian
against d9dd9f0's. The old version runs with its module's other definitions of that revision (its
private helpers) and today's imports. It replaces the attribute in every loaded module that holds
the same object (a `from x import f` copies the binding), and `patched` in the output names those
modules. With several settings a lone `@REV` stands for all of them at that revision: `--setting
brax_physics._src.constraint:impedance,brax_physics._src.constraint:contact_jacobian --values
@2bba847~1 @` times a change to both functions.

A stage's share of the step: the value `2x` is the loaded function computing everything twice,
the second time on inputs that XLA cannot tell equal the first's, and adding 0 times the second
result to the first's, so that XLA can neither merge the two nor drop the second (positions are
the same up to float32 rounding: which kernels XLA forms decides where LLVM contracts a multiply and
an add into one instruction): `--setting brax_physics._src.solver:solve --values @ 2x` gives, as
`b_over_a` minus one, what one Newton solve costs in the step as compiled, where a profile's
attribution misleads (below). The function must be looked up through its module at call time (as
`solver.solve` is by the pipeline); one nested in another's closure is not replaced.

`--warmup N` starts the timed rollouts N steps (of the loaded code) after `init`: a humanoid
touches the ground only after falling, so without it a short A/B of the constraint solver times
steps that have no contacts.

Why not a profile: a perfetto trace's self time per named scope charges a fusion to its root op's
scope and inflates many small kernels (humanoid at 512 envs: kinematics 2.0 ms per step in the
trace, 0.48 ms timed alone), and a stage timed alone compiles to a different program than inside
the step (the column-form Newton factor: 2x faster alone, 1.09x slower in the step). This times
the program users run.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import difflib
import importlib
import json
import re
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import MODELS
from physics import _buffer_bytes
from results import record


def _advance(sys_: Any, steps: int) -> Any:
    """A fresh rollout function (a new closure, so jit traces it again with the current setting)
    returning the whole state after `steps` steps."""
    import brax_physics as bp

    def advance(state: Any, ctrl: jax.Array) -> Any:
        def body(s: Any, _: None) -> tuple[Any, None]:
            return jax.vmap(lambda st, u: bp.step(sys_, st, u))(s, ctrl), None

        return jax.lax.scan(body, state, None, length=steps)[0]

    return advance


def _rollout(sys_: Any, steps: int) -> Any:
    """`_advance` returning only the positions (the timed program)."""
    advance = _advance(sys_, steps)

    def rollout(state: Any, ctrl: jax.Array) -> jax.Array:
        out: jax.Array = advance(state, ctrl).q
        return out

    return rollout


@dataclasses.dataclass(frozen=True)
class Revision:
    """A `--values @REV` entry: the attribute as its module defines it at revision `rev` ("": as loaded)."""

    rev: str

    def __repr__(self) -> str:
        return f"@{self.rev}"


@dataclasses.dataclass(frozen=True)
class Twice:
    """A `--values 2x` entry: the loaded function, computed twice per call (see `_twice`)."""

    def __repr__(self) -> str:
        return "2x"


def _twice(fn: Any) -> Any:
    """`fn` computed twice per call: the second time on its floating-point array arguments (those of a
    `System` aside: model constants) plus a zero XLA cannot see is zero (min(|x|, 0) of one entry), so
    that it can merge nothing of the two; the second result enters the returned first as 0 * it, so
    that it is not dropped (the values are the first call's)."""
    if not callable(fn):
        raise SystemExit(f"--values 2x: {fn!r} is not a function")
    import brax_physics as bp

    def floating(x: Any) -> bool:
        return isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jnp.floating) and x.size > 0

    def twice(*args: Any, **kwargs: Any) -> Any:
        first = fn(*args, **kwargs)
        varied = [a for a in (*args, *kwargs.values()) if not isinstance(a, bp.System)]
        leaves = [x for x in jax.tree.leaves(varied) if floating(x)]
        if not leaves:
            raise SystemExit(f"--values 2x: {getattr(fn, '__name__', fn)} has no array argument to vary")
        zero = jnp.minimum(jnp.abs(leaves[0].ravel()[0]), 0)

        def vary(a: Any) -> Any:
            if isinstance(a, bp.System):
                return a
            return jax.tree.map(lambda x: x + zero.astype(x.dtype) if floating(x) else x, a)

        second = fn(*(vary(a) for a in args), **{k: vary(v) for k, v in kwargs.items()})
        return jax.tree.map(lambda a, b: a + 0 * b if floating(a) else a, first, second)

    return twice


def _at_revision(module: types.ModuleType, attr: str, rev: str) -> Any:
    """`module.attr` as `module`'s source at git revision `rev` defines it (its module run anew)."""
    path = Path(str(module.__file__)).resolve()
    try:
        top = subprocess.run(["git", "-C", str(path.parent), "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise SystemExit(f"--values @{rev}: needs git (tools/ci/system-deps.sh installs it)") from None
    if top.returncode != 0:
        raise SystemExit(f"--values @{rev}: {path} is not in a git checkout")
    rel = path.relative_to(Path(top.stdout.strip()).resolve()).as_posix()
    src = subprocess.run(["git", "-C", top.stdout.strip(), "show", f"{rev}:{rel}"],
                         capture_output=True, text=True, check=False)
    if src.returncode != 0:
        raise SystemExit(f"--values @{rev}: git cannot show {rel} at {rev}: {src.stderr.strip()}")
    old = types.ModuleType(f"{module.__name__}@{rev}")
    old.__file__, old.__package__ = module.__file__, module.__package__
    sys.modules[old.__name__] = old  # dataclasses look their module up while the source runs
    try:
        exec(compile(src.stdout, f"{rel}@{rev}", "exec"), old.__dict__)
    finally:
        del sys.modules[old.__name__]
    if not hasattr(old, attr):
        raise SystemExit(f"--values @{rev}: {module.__name__} has no attribute {attr!r} at {rev}")
    return getattr(old, attr)


def _holders(module: types.ModuleType, attr: str) -> list[types.ModuleType]:
    """`module` and every other loaded module whose `attr` is the same function or class object."""
    obj = getattr(module, attr)
    if not callable(obj):
        return [module]
    others = [m for m in list(sys.modules.values())
              if isinstance(m, types.ModuleType) and m is not module and vars(m).get(attr) is obj]
    return [module, *others]


def _lowering_fields() -> list[str]:
    """The fields of `brax_physics.Lowering`, the settings a `--setting` without a module names."""
    import brax_physics as bp

    return [f.name for f in dataclasses.fields(bp.Lowering)]


def _targets(setting: str, values: list[Any]) -> list[tuple[Any, str, list[Any]]]:
    """(module, attribute, its value per run) of each comma-separated "module:attribute" in `setting`,
    `Revision` values resolved to the attribute at that revision; (None, field, values) for a field
    of `brax_physics.Lowering`."""
    names = setting.split(",")
    if len(names) > 1:  # a lone @REV (or 2x) stands for every setting at that revision
        values = [(v,) * len(names) if isinstance(v, (Revision, Twice)) else v for v in values]
    if len(names) > 1 and not all(isinstance(v, tuple) and len(v) == len(names) for v in values):
        n = len(names)
        raise SystemExit(f"--values: {n} settings take tuples of {n} values each (or one @REV for all), "
                         f"got {values}")
    out: list[tuple[Any, str, list[Any]]] = []
    for k, name in enumerate(names):
        per_run = [v[k] if len(names) > 1 else v for v in values]
        if ":" not in name:  # a field of the system's lowering settings
            if name not in _lowering_fields():
                close = difflib.get_close_matches(name, _lowering_fields(), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise SystemExit(f"--setting: brax_physics.Lowering has no field {name!r}{hint}")
            if any(isinstance(v, (Revision, Twice)) for v in per_run):
                raise SystemExit(f"--setting {name}: @REV and 2x take a module:attribute (code), not a field")
            out.append((None, name, per_run))
            continue
        module_name, attr = name.split(":")
        module = importlib.import_module(module_name)
        if not hasattr(module, attr):
            field = attr.lower().lstrip("_")
            hint = f" (now the field {field!r} of brax_physics.Lowering: --setting {field})" \
                if field in _lowering_fields() else ""
            raise SystemExit(f"--setting: {module_name} has no attribute {attr!r}{hint}")
        per_run = [(_at_revision(module, attr, v.rev) if v.rev else getattr(module, attr))
                   if isinstance(v, Revision) else _twice(getattr(module, attr)) if isinstance(v, Twice)
                   else v for v in per_run]
        out.append((module, attr, per_run))
    return out


def _program(compiled: Any) -> str:
    """A compiled program's optimized HLO without its source metadata, to tell two programs apart."""
    text = re.sub(r", metadata=\{[^}]*\}", "", compiled.as_text())
    return "\n".join(line for line in text.splitlines()
                     if "stack_frame" not in line and not re.match(r"^\s*\d+ [{\"]", line))


def run(model: str, batch: int, setting: str, values: list[Any], steps: int, rounds: int,
        warmup: int = 0) -> dict[str, Any]:
    """The A/B of `setting` (a `Lowering` field or "module:attribute", or several comma-separated with
    tuple values) at `values` (two or more; ratios are against the first) on `model` with `batch`
    envs, timed from the state `warmup` steps (of the loaded code) after `init`."""
    import brax_physics as bp

    targets = _targets(setting, values)
    fields = [(attr, per_run) for module, attr, per_run in targets if module is None]
    patches = [(module, attr, per_run) for module, attr, per_run in targets if module is not None]
    originals = [getattr(module, attr) for module, attr, _ in patches]
    holders = [_holders(module, attr) for module, attr, _ in patches]
    sys_ = bp.load_mjcf(MODELS[model])
    state = jax.jit(jax.vmap(lambda _: bp.init(sys_)))(jnp.arange(batch))  # one compile, not one per op
    ctrl = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, (batch, sys_.nu)).astype(np.float32))
    if warmup:  # e.g. a humanoid is in contact only after falling: time the solver's real work
        state = jax.jit(_advance(sys_, warmup))(state, ctrl)
    compiled, compile_s = [], []
    try:
        for i in range(len(values)):
            for (_, attr, per_run), held in zip(patches, holders, strict=True):
                for module in held:
                    setattr(module, attr, per_run[i])
            if patches:
                # JAX caches traces of the functions it has seen (a custom_vmap rule's among them): a
                # patched function would otherwise not reach the second program. Settings need no
                # clearing: they are static data of the System, part of every cache key.
                jax.clear_caches()
            sys_i = sys_.replace(lowering=bp.Lowering(**{attr: per_run[i] for attr, per_run in fields}))
            t0 = time.perf_counter()
            compiled.append(jax.jit(_rollout(sys_i, steps)).lower(state, ctrl).compile())
            compile_s.append(time.perf_counter() - t0)
    finally:
        for (_, attr, _), original, held in zip(patches, originals, holders, strict=True):
            for module in held:
                setattr(module, attr, original)
    qs = [np.asarray(c(state, ctrl)) for c in compiled]
    times: list[list[float]] = [[] for _ in values]
    for _ in range(rounds):
        for i, c in enumerate(compiled):
            t0 = time.perf_counter()
            jax.block_until_ready(c(state, ctrl))
            times[i].append(time.perf_counter() - t0)
    per_step = [statistics.median(t) / steps * 1e6 for t in times]
    fastest = [min(t) / steps * 1e6 for t in times]
    return {
        "model": model, "batch": batch, "setting": setting, "steps": steps, "rounds": rounds,
        "warmup": warmup,
        "runs": [{"value": repr(v), "compile_s": round(c, 2), "us_per_step": round(u, 1),
                  "min_us_per_step": round(f, 1), "over_a_min": round(f / fastest[0], 3),
                  "buffer_bytes": _buffer_bytes(p)}
                 for v, c, u, f, p in zip(values, compile_s, per_step, fastest, compiled, strict=True)],
        "b_over_a": round(per_step[1] / per_step[0], 3),
        "b_over_a_min": round(fastest[1] / fastest[0], 3),
        "max_abs_dq": max(float(np.max(np.abs(q - qs[0]))) for q in qs[1:]),
        "same_program": [_program(c) == _program(compiled[0]) for c in compiled[1:]],
        "patched": sorted({m.__name__ for held in holders for m in held}),
    }


def main(argv: list[str] | None = None) -> None:
    """Parse the flags, run the A/B, print its JSON line."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="ant", choices=sorted(MODELS))
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--setting", required=True,
                   help="a brax_physics.Lowering field, e.g. queue_min_batch, or module:attribute (a "
                        "function, for @REV and 2x); several: comma-separated")
    p.add_argument("--values", nargs="+", required=True,
                   help="two or more Python literals (A, B, ...); tuples, one entry per setting, for "
                        "several; @REV: the attribute as defined at git revision REV (with several "
                        "settings: each of them), @: as loaded now, 2x: the loaded function computed "
                        "twice (its share of the step)")
    p.add_argument("--steps", type=int, default=60, help="physics steps per timed rollout")
    p.add_argument("--rounds", type=int, default=7, help="alternating timed runs of each")
    p.add_argument("--warmup", type=int, default=0,
                   help="physics steps from init before the timed rollouts start (contacts, solver work)")
    p.add_argument("--record", action="store_true",
                   help="also append each row to tools/bench/results.jsonl (see results.py)")
    a = p.parse_args(argv)
    if len(a.values) < 2:
        p.error("--values: give at least two values (A, B, ...)")
    values = [Revision(v[1:]) if v.startswith("@") else Twice() if v == "2x" else ast.literal_eval(v)
              for v in a.values]
    row = run(a.model, a.batch, a.setting, values, a.steps, a.rounds, a.warmup)
    print(json.dumps(row), flush=True)
    if a.record:
        record([row], bench="ab")


if __name__ == "__main__":
    main()
