"""The dm_control suite's PPO recipes against issue 55's targets: each task's preset trained per seed.

Each (task, seed) is one `brax-train train` subprocess with the task's preset and that seed, pinned
to one core (`--jobs` at once, default one per core). Prints one JSON line per run: the final
evaluation return (at the preset's `num_timesteps` rounded up to whole evaluation intervals), the
best one, the target and whether the final return meets it, wall and compile seconds, env steps/s
and the evaluation curve `[[env_step, return, wall_s]]`. `--record` appends the rows to
`results.jsonl`, whose "suite recipes" table RESULTS.md shows.

Run with `hatch run bench:recipes [--envs cartpole-swingup,reacher-easy] [--seeds 0,1,2,3]`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from brax_train import reporting
from results import record

TARGETS: dict[str, tuple[float, int]] = {
    "cartpole-balance": (950.0, 5_000_000),
    "cartpole-swingup": (800.0, 10_000_000),
    "pendulum-swingup": (750.0, 10_000_000),
    "point_mass-easy": (850.0, 5_000_000),
    "reacher-easy": (900.0, 10_000_000),
    "finger-spin": (700.0, 20_000_000),
    "cheetah-run": (500.0, 30_000_000),
    "walker-walk": (800.0, 30_000_000),
}
"""Issue 55's bar per task: (evaluation return, within env steps)."""


def _curve(metrics: Path) -> tuple[list[list[float]], float]:
    """The run's evaluations `[[step, return, elapsed_s]]` and its training env steps/s (mean)."""
    reports = reporting.read_metrics(metrics)
    reward = reporting.EVAL_REWARD
    curve = [[int(r["step"]), round(float(r[reward]), 1), round(float(r.get("elapsed", 0.0)), 1)]
             for r in reports if reward in r]
    sps = [float(r["training/sps"]) for r in reports if "training/sps" in r]
    return curve, (sum(sps) / len(sps) if sps else float("nan"))


def run_one(task: str, seed: int, core: int | None, timeout: float, extra: list[str]) -> dict[str, Any]:
    """Train `dm_control/task`'s preset with `seed` (on `core` alone when given); the result row."""
    env = f"dm_control/{task}"
    target, within = TARGETS[task]
    head = {"kind": "recipe", "env": env, "seed": seed, "target": target, "target_steps": within}
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        cmd = [sys.executable, "-m", "brax_train.cli", "train", "--env", env, "--set", f"seed={seed}",
               "--run-dir", str(run_dir), "--no-replay", *extra]
        pin = (lambda: os.sched_setaffinity(0, {core})) if core is not None else None
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, preexec_fn=pin,
                                  check=False)
        except subprocess.TimeoutExpired:
            return {**head, "error": f"TimeoutError: no result within {timeout:g} s"}
        metrics = run_dir / "metrics.jsonl"
        if proc.returncode != 0 or not metrics.is_file():
            return {**head, "error": proc.stderr.strip()[-2000:]}
        curve, sps = _curve(metrics)
    if not curve:
        return {**head, "error": "no evaluation in metrics.jsonl"}
    final_step, final, wall = curve[-1]
    return {
        **head,
        "steps": final_step,
        "final_reward": final,
        "best_reward": max(r for _, r, _ in curve),
        "met": bool(final >= target),
        "wall_s": wall,
        "compile_s": curve[0][2],  # the first evaluation comes right after the programs compile
        "env_steps_per_s": round(sps, 1),
        "curve": curve,
        "overrides": extra,
    }


def main() -> None:
    """Parse arguments and train every (task, seed), `--jobs` at a time."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--envs", default=",".join(TARGETS), help="tasks of TARGETS, comma-separated")
    p.add_argument("--seeds", default="0,1", help="seeds, comma-separated")
    p.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)),
                   help="runs at once, one core each")
    p.add_argument("--timeout", type=float, default=4 * 3600.0, help="seconds per run")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a setting for every run, as `brax-train train --set` takes it (recorded in the row)")
    p.add_argument("--record", action="store_true", help="append each row to tools/bench/results.jsonl")
    args = p.parse_args()
    tasks = [t.removeprefix("dm_control/") for t in args.envs.split(",")]
    for t in tasks:
        if t not in TARGETS:
            p.error(f"--envs: no target for {t!r}; choose from {', '.join(TARGETS)}")
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        p.error(f"--seeds: expected integers separated by commas, got {args.seeds!r}")
    if args.jobs < 1:
        p.error(f"--jobs: must be a positive integer, got {args.jobs}")
    extra = [a for item in args.set for a in ("--set", item)]
    cores = sorted(os.sched_getaffinity(0))
    runs = [(t, s) for t in tasks for s in seeds]
    free: list[int | None] = [*cores[: args.jobs]] if len(cores) >= args.jobs else [None] * args.jobs

    def job(i: int) -> dict[str, Any]:
        core = free.pop(0)
        try:
            return run_one(*runs[i], core, args.timeout, extra)
        finally:
            free.append(core)

    with ThreadPoolExecutor(args.jobs) as pool:
        for row in pool.map(job, range(len(runs))):
            print(json.dumps(row), flush=True)
            if args.record:
                record([row], bench="train")


if __name__ == "__main__":
    main()
