"""Environment throughput: brax-envs next to Google brax's same environment (`backend='generalized'`).

Prints one JSON line per (env, batch): env steps per second of a jitted `lax.scan` over a vmapped
`env.step` with uniform random actions in [-1, 1] (no resets; median of `--repeats` timed runs after a
warm-up), the compile time of that rollout reported separately, and `ours_over_brax`, our throughput
divided by Google brax's. Each (implementation, env) pair runs in its own subprocess, so the
compatibility patches Google brax 0.14.2 needs under jax >= 0.10 only ever touch the comparison
process. A side that fails (e.g. Google brax is not installed) gets an `error` instead of numbers,
and the line a top-level `error`. Run with
`hatch run bench:envs [--envs ant,hopper] [--batch 128,1024] [--steps 100] [--timeout 900]`.

`--randomization` compares domain-randomization modes of our env instead (no Google brax): the
env runs through the training wrappers (`wrap_for_training`: NaN guard, episodes, batching,
auto-reset) with a randomization function over sliding friction and body masses, drawn once per run
(`once_per_run`, cached-state resets, today's default), once per run with fresh resets
(`once_per_run_fresh`, only with `--impls`), or at every auto-reset (`per_episode`). Episode step
counters start staggered, so about `batch / --episode-length` envs hit their time limit every step,
as in a long training run (terminations come on top); `per_episode_over_once_per_run` is the
throughput ratio. E.g. `hatch run bench:envs --randomization --envs ant --batch 1024`.

`--solvers` compares the `solver` options of dm_control suite tasks instead (ours only): dm_control's
own settings (`solver-default`) and the domain's fast Newton budget (`solver-fast`), with
`fast_over_default`, e.g. `hatch run bench:envs --solvers --envs dm_control/walker-walk --batch 128`.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import inspect
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from physics import _time_jax
from ppo import _patch_google_brax
from results import record

Result = dict[str, Any]
IMPLS = ("ours", "brax")
RANDOMIZATION_MODES = ("once_per_run", "once_per_run_fresh", "per_episode")
DEFAULT_RANDOMIZATION_MODES = ("once_per_run", "per_episode")
SOLVER_MODES = ("solver-default", "solver-fast")


def _patch_jnp_clip() -> None:
    """Accept `jnp.clip(x, a_min=, a_max=)` (removed in jax 0.10, used by brax 0.14.2's swimmer).

    Comparison process only: our packages never see the patched function.
    """
    original = jnp.clip
    if "a_min" in inspect.signature(original).parameters:
        return

    def clip(arr: Any, min: Any = None, max: Any = None, *, a_min: Any = None, a_max: Any = None,
             **kwargs: Any) -> Any:
        return original(arr, min if a_min is None else a_min, max if a_max is None else a_max, **kwargs)

    setattr(jnp, "clip", clip)  # noqa: B010


def make_env(impl: str, name: str) -> Any:
    """Build environment `name` of `impl` ('ours': brax-envs, 'brax': Google brax, generalized;
    'solver-default', 'solver-fast': ours with that suite task's `solver` option)."""
    if impl == "brax":
        _patch_google_brax()
        _patch_jnp_clip()
        # Google brax warns on every load that it is unmaintained, and mujoco.mjx (imported by brax)
        # prints optional-backend import failures to stdout, which must stay JSON lines only.
        warnings.filterwarnings("ignore", message="Brax System", category=UserWarning)
        with contextlib.redirect_stdout(sys.stderr):
            from brax import envs as gbrax_envs
        return gbrax_envs.get_environment(name, backend="generalized")
    import brax_envs

    if impl in SOLVER_MODES:
        return brax_envs.get_environment(name, solver=impl.removeprefix("solver-"))
    return brax_envs.get_environment(name)


def bench_env(env: Any, batch: int, steps: int, repeats: int) -> Result:
    """Env steps/s, compile seconds and XLA buffer bytes of a `steps`-long random-action rollout."""
    keys = jax.random.split(jax.random.PRNGKey(0), batch + 1)
    state = jax.jit(jax.vmap(env.reset))(keys[1:])
    step = jax.vmap(env.step)

    def rollout(state: Any, key: jax.Array) -> Any:
        def body(carry: tuple[Any, jax.Array], _: None) -> tuple[tuple[Any, jax.Array], None]:
            s, k = carry
            k, sub = jax.random.split(k)
            action = jax.random.uniform(sub, (batch, env.action_size), minval=-1.0, maxval=1.0)
            return (step(s, action), k), None

        (s, _), _ = jax.lax.scan(body, (state, key), None, length=steps)
        return s.obs

    compile_s, run_s, peak = _time_jax(rollout, (state, keys[0]), repeats)
    return {"env_steps_per_s": round(batch * steps / run_s, 1), "compile_s": round(compile_s, 3),
            "xla_buffer_bytes": peak or None}


def randomize_friction_and_mass(sys: Any, rng: jax.Array) -> tuple[Any, Any]:
    """Per env: sliding friction of every geom times U(0.6, 1.4), each body mass times U(0.8, 1.2)."""

    @jax.vmap
    def one(key: jax.Array) -> tuple[jax.Array, jax.Array]:
        k_f, k_m = jax.random.split(key)
        scale = jax.random.uniform(k_f, (), jnp.float32, 0.6, 1.4)
        mass = sys.body_mass * jax.random.uniform(k_m, (sys.nbody,), jnp.float32, 0.8, 1.2)
        return sys.geom_friction.at[:, 0].multiply(scale), mass

    friction, mass = one(rng)
    in_axes = jax.tree.map(lambda _: None, sys).replace(geom_friction=0, body_mass=0)
    return sys.replace(geom_friction=friction, body_mass=mass), in_axes


def bench_randomized(env: Any, mode: str, batch: int, steps: int, repeats: int,
                     episode_length: int) -> Result:
    """`bench_env`'s numbers for `env` in the training wrappers, randomized in `mode`."""
    from brax_envs import wrappers

    keys = jax.random.split(jax.random.PRNGKey(0), batch + 2)
    per_episode = mode == "per_episode"
    fn = randomize_friction_and_mass if per_episode else functools.partial(
        randomize_friction_and_mass, rng=jax.random.split(keys[-1], batch))
    wrapped = wrappers.wrap_for_training(env, episode_length, randomization_fn=fn,
                                         fresh_reset=mode != "once_per_run",
                                         randomize_per_episode=per_episode)
    state = jax.jit(wrapped.reset)(keys[1:-1])
    # Staggered time limits: the steady state of a long run, where some env restarts on most steps.
    stagger = jnp.arange(batch, dtype=jnp.int32) * episode_length // batch
    state = state.replace(info={**state.info, "steps": stagger})

    def rollout(state: Any, key: jax.Array) -> Any:
        def body(carry: tuple[Any, jax.Array], _: None) -> tuple[tuple[Any, jax.Array], None]:
            s, k = carry
            k, sub = jax.random.split(k)
            action = jax.random.uniform(sub, (batch, env.action_size), minval=-1.0, maxval=1.0)
            return (wrapped.step(s, action), k), None

        (s, _), _ = jax.lax.scan(body, (state, key), None, length=steps)
        return s.obs

    compile_s, run_s, peak = _time_jax(rollout, (state, keys[0]), repeats)
    return {"env_steps_per_s": round(batch * steps / run_s, 1), "compile_s": round(compile_s, 3),
            "xla_buffer_bytes": peak or None}


def run_worker(impl: str, name: str, batches: list[int], steps: int, repeats: int,
               episode_length: int = 1000) -> None:
    """Benchmark one implementation or randomization mode of one env at every batch size; a line each."""
    try:
        env = make_env("ours" if impl in RANDOMIZATION_MODES else impl, name)
    except Exception as e:  # e.g. Google brax missing: a result for every batch, not a crash
        error = f"{type(e).__name__}: {e}"[:300]
        for batch in batches:
            print(json.dumps({"batch": batch, "error": error}), flush=True)
        return
    for batch in batches:
        row: Result = {"batch": batch}
        try:
            if impl in RANDOMIZATION_MODES:
                row.update(bench_randomized(env, impl, batch, steps, repeats, episode_length))
            else:
                row.update(bench_env(env, batch, steps, repeats))
        except Exception as e:  # one failing batch size must not hide the others
            row["error"] = f"{type(e).__name__}: {e}"[:300]
        print(json.dumps(row), flush=True)


def _run_side(impl: str, name: str, args: argparse.Namespace) -> dict[int, Result]:
    """Run `run_worker` in a fresh subprocess; its results by batch size."""
    cmd = [sys.executable, os.path.abspath(__file__), "--one", impl, name, "--batch", args.batch,
           "--steps", str(args.steps), "--repeats", str(args.repeats),
           "--episode-length", str(args.episode_length)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=args.timeout)
        stdout, returncode, why = proc.stdout, proc.returncode, proc.stderr.strip()[-300:]
    except subprocess.TimeoutExpired as e:  # jaxlib 0.10.2 CPU runs can wedge: lose a side, not the grid
        out = e.stdout or b""
        stdout = out.decode() if isinstance(out, bytes) else out
        returncode, why = -1, f"TimeoutError: no result within {args.timeout:g} s"
    rows = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    results = {int(r.pop("batch")): r for r in rows}
    if returncode != 0:  # a crash, OOM kill or timeout leaves batches without a line
        error = why if returncode == -1 else f"exit {returncode}: {why}"
        for batch in _ints(args.batch):
            results.setdefault(batch, {"error": error})
    return results


def _ints(text: str) -> list[int]:
    """Comma-separated ints."""
    return [int(b) for b in text.split(",") if b]


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run each (env, implementation) in a subprocess and print merged JSON lines."""
    import brax_envs.envs

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--envs", default=",".join(brax_envs.envs.STANDARD_ENVIRONMENTS))
    ap.add_argument("--batch", default="128,1024", help="comma-separated batch sizes")
    ap.add_argument("--steps", type=int, default=100, help="env steps per timed rollout")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per measurement (median; >= 3)")
    ap.add_argument("--timeout", type=float, default=900.0,
                    help="seconds per (implementation, env) subprocess, all batch sizes")
    ap.add_argument("--randomization", action="store_true",
                    help="compare domain randomization once per run and per episode (ours only)")
    ap.add_argument("--episode-length", type=int, default=1000,
                    help="with --randomization: the training wrappers' time limit")
    ap.add_argument("--solvers", action="store_true",
                    help="compare a dm_control suite task's solver options, default and fast (ours only)")
    ap.add_argument("--impls", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--one", nargs=2, metavar=("IMPL", "ENV"), help=argparse.SUPPRESS)
    ap.add_argument("--record", action="store_true",
                    help="also append each row to tools/bench/results.jsonl (see results.py)")
    args = ap.parse_args(argv)
    if args.episode_length < 1:
        ap.error("--episode-length must be positive")
    if args.repeats < 3:
        ap.error("--repeats must be at least 3 (the reported figure is a median)")
    if args.steps < 1:
        ap.error("--steps must be positive")
    batches = _ints(args.batch)
    if not batches or min(batches) < 1:
        ap.error("--batch must list positive batch sizes")
    if args.one:
        run_worker(args.one[0], args.one[1], batches, args.steps, args.repeats, args.episode_length)
        return
    if args.randomization and args.solvers:
        ap.error("--randomization and --solvers are separate comparisons")
    choices = RANDOMIZATION_MODES if args.randomization else SOLVER_MODES if args.solvers else IMPLS
    default = DEFAULT_RANDOMIZATION_MODES if args.randomization else SOLVER_MODES if args.solvers else IMPLS
    impls = args.impls.split(",") if args.impls else list(default)
    for impl in impls:
        if impl not in choices:
            ap.error(f"--impls: unknown implementation {impl!r}; choose from {', '.join(choices)}")
    device = jax.devices()[0]
    for name in args.envs.split(","):
        sides = {impl: _run_side(impl, name, args) for impl in impls}
        for batch in batches:
            row: Result = {"env": name, "batch": batch, "steps": args.steps, "repeats": args.repeats,
                           "device": f"{device.platform}:{device.device_kind}", "cpus": os.cpu_count()}
            if args.randomization:
                row.update(episode_length=args.episode_length, randomized="geom_friction[:, 0],body_mass")
            errors = []
            for impl in impls:
                side = sides[impl].get(batch, {"error": "no result"})
                row[impl] = side
                if "error" in side:
                    errors.append(f"{impl}: {side['error']}")
            ours = row.get("ours", {}).get("env_steps_per_s")
            theirs = row.get("brax", {}).get("env_steps_per_s")
            if ours and theirs:
                row["ours_over_brax"] = round(ours / theirs, 3)
            once = row.get("once_per_run", {}).get("env_steps_per_s")
            each = row.get("per_episode", {}).get("env_steps_per_s")
            if once and each:
                row["per_episode_over_once_per_run"] = round(each / once, 3)
            slow = row.get("solver-default", {}).get("env_steps_per_s")
            fast = row.get("solver-fast", {}).get("env_steps_per_s")
            if slow and fast:
                row["fast_over_default"] = round(fast / slow, 3)
            if errors:
                row["error"] = "; ".join(errors)
            print(json.dumps(row), flush=True)
            if args.record:
                record([row], bench="envs")


if __name__ == "__main__":
    main()
