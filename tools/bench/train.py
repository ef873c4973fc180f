"""Training speed: every brax-train agent next to Google brax's same agent, same task and settings.

Each (agent, implementation, environment) run is its own subprocess, so the compatibility patch that
Google brax 0.14.2 needs under jax >= 0.10 (`jax.device_put_replicated`) only ever touches the
comparison process. Prints one JSON line per run (wall time, estimated compile time, training env
steps/s, the eval reward curve `[[env_step, reward, wall_s]]`), then one summary line per pair:
Google's final reward and wall time, the first wall time at which our eval reward reaches Google's
final reward, and their `ratio` (target: <= 0.7). Google's run goes first so the target is known.

Run with `hatch run bench:train [--agents ppo,sac,es,ars,apg] [--envs ...] [--impls ours,brax]`;
`--impls brax-on-ours,ours-on-brax` swaps the environments to tell trainer from environment
differences; `--ours-longer K` lets our side train K times as long (same hyper-parameters, evals on
the same steps and then on), for a pair whose equal-steps rewards tie but whose wall times do not.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from typing import Any

from results import record

AGENTS = ("ppo", "sac", "es", "ars", "apg")
"""Agents benchmarked, each `brax_train.<agent>.train` against `brax.training.agents.<agent>.train.train`."""

DEFAULT_ENVS: dict[str, tuple[str, ...]] = {
    "ppo": ("inverted_pendulum", "ant"),
    "sac": ("inverted_pendulum", "halfcheetah"),
    "es": ("inverted_pendulum", "reacher"),
    "ars": ("inverted_pendulum", "reacher"),
    "apg": ("fast",),
}
"""The pairs `hatch run bench:train` runs when `--envs` is not given."""

# PPO: Google brax's training notebook (notebooks/training.ipynb, `train_fn`), with step counts (and
# ant's batch sizes) scaled down so a run finishes on a 2-core CPU. inverted_pendulum: one training
# step of 1024 * 32 * 5 env steps per eval interval.
_PPO_PENDULUM: dict[str, Any] = dict(
    num_timesteps=1_310_720, num_evals=9, reward_scaling=10, episode_length=1000, normalize_observations=True,
    action_repeat=1, unroll_length=5, num_minibatches=32, num_updates_per_batch=4, discounting=0.97,
    learning_rate=3e-4, entropy_cost=1e-2, num_envs=2048, batch_size=1024, seed=1,
)
# SAC: the notebook publishes SAC settings only for hopper and walker2d, and brax's datasets/README.md
# lists the halfcheetah SAC sweep's ranges (which contain them); these are the walker2d entry
# (discounting 0.997, learning rate 6e-4, 128 envs, batch 128, 32 gradient updates per actor step,
# 8192-transition prefill) with the step count and replay size scaled down.
_SAC: dict[str, Any] = dict(
    num_evals=9, reward_scaling=5, episode_length=1000, normalize_observations=True, action_repeat=1,
    discounting=0.997, learning_rate=6e-4, num_envs=128, batch_size=128, grad_updates_per_step=32,
    min_replay_size=8192, seed=1,
)
# ES: brax publishes no per-task settings; `es.train`'s defaults (population 128, perturbation std 0.1)
# with the learning rate of brax's ES test (0.1; the default 1e-3 barely moves in a few generations).
# ARS: `ars.train`'s defaults (60 directions, top 20, step size 0.015, noise std 0.025). Both with
# observation normalization; run lengths are whole generations per eval interval.
_ES: dict[str, Any] = dict(
    num_evals=9, episode_length=1000, population_size=128, perturbation_std=0.1, learning_rate=0.1,
    normalize_observations=True, seed=1,
)
_ARS: dict[str, Any] = dict(
    num_evals=9, episode_length=1000, number_of_directions=60, top_directions=20, step_size=0.015,
    exploration_noise_std=0.025, normalize_observations=True, seed=1,
)
# Tasks that never end early (halfcheetah, reacher) and ant cost 1000 steps of every eval env per eval,
# slow on a CPU: 32 eval envs instead of 128, and fewer evals.
_SLOW_EVAL: dict[str, Any] = dict(num_eval_envs=32, num_evals=5)

SETTINGS: dict[tuple[str, str], dict[str, Any]] = {
    ("ppo", "inverted_pendulum"): _PPO_PENDULUM,
    ("ppo", "inverted_double_pendulum"): {**_PPO_PENDULUM, "num_timesteps": 2_000_000},
    ("ppo", "ant"): {
        **_PPO_PENDULUM, **_SLOW_EVAL, "num_timesteps": 1_024_000, "num_minibatches": 8, "num_envs": 256,
        "batch_size": 256,
    },
    ("sac", "inverted_pendulum"): {**_SAC, "num_timesteps": 40_960, "max_replay_size": 40_960},
    ("sac", "halfcheetah"): {**_SAC, **_SLOW_EVAL, "num_timesteps": 32_768, "max_replay_size": 32_768},
    ("es", "inverted_pendulum"): {**_ES, "num_timesteps": 2_048_000},
    ("es", "reacher"): {**_ES, **_SLOW_EVAL, "num_timesteps": 1_024_000},
    ("ars", "inverted_pendulum"): {**_ARS, "num_timesteps": 1_920_000},
    ("ars", "reacher"): {**_ARS, **_SLOW_EVAL, "num_timesteps": 960_000},
    # APG: brax's own APG test (brax/training/agents/apg/train_test.py, testTrain) trains on `fast`
    # with these settings; only num_evals is lowered from 200 (one update per eval) to 21. (Brax's
    # APG tutorial trains MJX's Anymal, which neither side has.)
    ("apg", "fast"): dict(
        policy_updates=200, episode_length=128, num_envs=64, num_evals=21, learning_rate=3e-3,
        normalize_observations=True,
    ),
}
"""Google brax's published hyper-parameters per (agent, environment), scaled to a 2-core CPU."""

OWN_ENV_ONLY = frozenset({("apg", "fast")})
"""Pairs whose both trainers use brax-envs' environment: Google's `fast` is a different task (reward =
position) whose step reads the action only through `action > 0`, so it has no gradient for APG."""

IMPLS = ("ours", "brax", "brax-on-ours", "ours-on-brax")
"""Trainer and environment: ours/brax use their own env; `X-on-Y` trains X's agent on Y's env."""

TARGET_RATIO = 0.7
"""Goal: reach Google's final reward in at most this fraction of Google's wall time."""


def _patch_google_brax() -> None:
    """Restore `jax.device_put_replicated` (gone in jax 0.10) for brax 0.14.2; comparison process only."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    if hasattr(jax, "device_put_replicated"):
        return

    def device_put_replicated(x: Any, devices: list[Any]) -> Any:
        mesh = jax.sharding.Mesh(np.array(devices), ("d",))
        sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("d"))  # type: ignore[no-untyped-call]
        return jax.tree.map(lambda a: jax.device_put(jnp.stack([jnp.asarray(a)] * len(devices)), sharding), x)

    setattr(jax, "device_put_replicated", device_put_replicated)  # noqa: B010


def _FromGoogle(genv: Any) -> Any:
    """A Google brax env as a `brax_envs.Env` (same State fields), for our trainer."""
    import brax_envs
    from brax.envs.base import State as GState

    def to_google(s: Any) -> Any:
        return GState(pipeline_state=s.pipeline_state, obs=s.obs, reward=s.reward, done=s.done,
                      metrics=s.metrics, info=s.info)

    def to_ours(g: Any) -> Any:
        return brax_envs.State(pipeline_state=g.pipeline_state, obs=g.obs, reward=g.reward, done=g.done,
                               metrics=g.metrics, info=g.info)

    class FromGoogle(brax_envs.Env):
        def reset(self, rng: Any) -> Any:
            return to_ours(genv.reset(rng))

        def step(self, state: Any, action: Any) -> Any:
            return to_ours(genv.step(to_google(state), action))

        @property
        def action_size(self) -> int:
            return int(genv.action_size)

    return FromGoogle()


def _environment(source: str, env_name: str, trainer: str) -> Any:
    """`env_name` from brax-envs (`ours`) or from Google brax's generalized backend (`brax`)."""
    if source == "brax":
        _patch_google_brax()
        from brax import envs as gbrax_envs

        genv = gbrax_envs.get_environment(env_name, backend="generalized")
        return genv if trainer == "brax" else _FromGoogle(genv)
    import brax_envs

    env = brax_envs.get_environment(env_name)
    if trainer == "brax":
        # Google brax's EpisodeWrapper adds metrics at reset (e.g. 'reward') and relies on the env's
        # step to carry them through; our envs return their own metrics dict, so merge here.
        from brax_envs import wrappers

        class _KeepMetrics(wrappers.Wrapper):
            def step(self, state: Any, action: Any) -> Any:
                out = self.env.step(state, action)
                return out.replace(metrics={**state.metrics, **out.metrics})

        env = _KeepMetrics(env)
    return env


def _train_fn(agent: str, trainer: str) -> Any:
    """`train` of `agent` from Google brax (`brax`) or brax-train (`ours`)."""
    import importlib

    if trainer == "brax":
        _patch_google_brax()
        return importlib.import_module(f"brax.training.agents.{agent}.train").train
    return importlib.import_module(f"brax_train.{agent}").train


def settings_for(agent: str, env_name: str, num_timesteps: int | None, longer: int = 1,
                 seed: int | None = None, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The pair's settings, with every run's length set to `num_timesteps` env steps, its seed to
    `seed` and each key of `overrides` to its value when given.

    `longer` > 1 trains `longer` times as long with `longer` times as many eval intervals, so the evals
    fall on the same env steps as the unextended run's and then go on; everything else is unchanged.
    """
    s = {**SETTINGS[(agent, env_name)], **(overrides or {})}
    if num_timesteps is not None:
        if agent == "apg":  # APG's length is counted in policy updates of num_envs * horizon_length steps
            per_update = s["num_envs"] * s.get("horizon_length", 32)
            s["policy_updates"] = max(1, math.ceil(num_timesteps / per_update))
        else:
            s["num_timesteps"] = num_timesteps
            if "max_replay_size" in s:
                s["max_replay_size"] = max(num_timesteps, s["min_replay_size"])
    if longer > 1:
        s["policy_updates" if agent == "apg" else "num_timesteps"] *= longer
        s["num_evals"] = (s.get("num_evals", 1) - 1) * longer + 1
    if seed is not None:
        s["seed"] = seed
    return s


def _env_step_of(agent: str, trainer: str, settings: dict[str, Any]) -> Any:
    """Map a `progress_fn` step to env steps: Google's APG reports its eval index, not env steps."""
    if agent != "apg" or trainer != "brax":
        return lambda step: step
    num_evals = settings.get("num_evals", 1)
    per_epoch = round(settings["policy_updates"] / max(num_evals - 1, 1))
    per_update = settings["num_envs"] * settings.get("horizon_length", 32)
    return lambda step: step * per_epoch * per_update


def _finite(x: float, digits: int) -> float | None:
    """`x` rounded, or None for NaN/inf (strict JSON)."""
    return round(x, digits) if math.isfinite(x) else None


def timing(curve: list[tuple[int, float, float]]) -> tuple[float, float]:
    """(steady env steps/s, compile s) from `[(env_step, reward, wall_s)]`.

    Throughput over the eval intervals after the first; compile time as the first interval's excess over
    that throughput (so it also holds the first eval's compile). NaN with fewer than three points.
    """
    if len(curve) < 3:
        return float("nan"), float("nan")
    (s1, _, t1), (s2, _, t2) = curve[1], curve[-1]
    if t2 <= t1 or s2 <= s1:
        return float("nan"), float("nan")
    sps = (s2 - s1) / (t2 - t1)
    return sps, max(0.0, t1 - s1 / sps)


def run_one(agent: str, impl: str, env_name: str, num_timesteps: int | None, longer: int = 1,
            seed: int | None = None, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Train once in this process and summarize."""
    import jax

    settings = settings_for(agent, env_name, num_timesteps, longer, seed, overrides)
    trainer, _, env_source = impl.partition("-on-")
    if (agent, env_name) in OWN_ENV_ONLY:
        env_source = "ours"
    env_source = env_source or trainer
    env = _environment(env_source, env_name, trainer)
    train_fn = _train_fn(agent, trainer)
    env_step = _env_step_of(agent, trainer, settings)
    curve: list[tuple[int, float, float]] = []

    def progress(step: int, metrics: Any) -> None:
        wall = time.perf_counter() - t0
        curve.append((int(env_step(int(step))), float(metrics["eval/episode_reward"]), wall))

    extra: dict[str, Any] = {}
    if trainer == "brax" and env_source == "ours":
        # Google's ARS and SAC wrap only Google env classes unless given the wrapper to use.
        from brax.envs import training as gbrax_training

        extra["wrap_env_fn"] = gbrax_training.wrap
    t0 = time.perf_counter()
    train_fn(environment=env, progress_fn=progress, **settings, **extra)
    wall = time.perf_counter() - t0
    sps, compile_s = timing(curve)
    return {
        "agent": agent,
        "impl": impl,
        "env": env_name,
        "env_source": env_source,
        "device": str(jax.devices()[0]),
        "settings": {k: v for k, v in settings.items() if isinstance(v, int | float | str | bool)},
        "wall_s": round(wall, 2),
        "first_eval_s": round(curve[0][2], 2) if curve else None,
        "compile_s": _finite(compile_s, 2),
        "env_steps_per_s": _finite(sps, 1),
        "initial_reward": round(curve[0][1], 2) if curve else None,
        "final_reward": round(curve[-1][1], 2) if curve else None,
        "curve": [[s, round(r, 2), round(t, 2)] for s, r, t in curve],
    }


def summarize(google: dict[str, Any], ours: dict[str, Any]) -> dict[str, Any]:
    """One pair's verdict: when our curve first reaches Google's final reward, against Google's wall time."""
    target = google["final_reward"]
    reached = None if target is None else next((t for _, r, t in ours["curve"] if r >= target), None)
    ratio = None if reached is None else round(reached / google["wall_s"], 3)
    g0 = google["curve"][0] if google["curve"] else None
    o0 = ours["curve"][0] if ours["curve"] else None
    # Our reward at Google's last eval step (the equal-steps comparison when our run went on longer).
    g_last = google["curve"][-1][0] if google["curve"] else None
    at_steps = [r for s, r, _ in ours["curve"] if g_last is not None and s <= g_last]
    return {
        "summary": True,
        "agent": ours["agent"],
        "env": ours["env"],
        "impls": [google["impl"], ours["impl"]],
        "google_final_reward": target,
        "google_wall_s": google["wall_s"],
        "ours_final_reward": ours["final_reward"],
        "ours_reward_at_google_steps": at_steps[-1] if at_steps else None,
        "ours_wall_s": ours["wall_s"],
        "ours_wall_s_to_google_final": reached,
        "ratio": ratio,
        "target_ratio": TARGET_RATIO,
        "met": ratio is not None and ratio <= TARGET_RATIO,
        # Read `ratio` with these: a target Google's training did not raise above its untrained policy,
        # or one our untrained policy already reaches (e.g. another env's reward scale), says nothing.
        # None where a run has no eval at step 0 (Google's ARS evaluates only after training).
        "google_improved": None if g0 is None or g0[0] != 0 or target is None else bool(target > g0[1]),
        "ours_reached_untrained": (
            None if o0 is None or o0[0] != 0 or target is None else bool(o0[1] >= target)
        ),
        "env_sources": [google.get("env_source"), ours.get("env_source")],
        "compile_s": [google["compile_s"], ours["compile_s"]],
        "env_steps_per_s": [google["env_steps_per_s"], ours["env_steps_per_s"]],
    }


def _pairs(agents: list[str], envs: list[str] | None) -> list[tuple[str, str]]:
    """(agent, env) pairs to run: each agent's defaults, or those of `envs` it has settings for."""
    if envs is None:
        return [(a, e) for a in agents for e in DEFAULT_ENVS[a]]
    return [(a, e) for a in agents for e in envs if (a, e) in SETTINGS]


def _run_subprocess(agent: str, impl: str, env_name: str, num_timesteps: int | None,
                    timeout: float, longer: int = 1, seed: int | None = None,
                    overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """`run_one` in a fresh interpreter; an `error` record if it fails or times out."""
    cmd = [sys.executable, os.path.abspath(__file__), "--one", agent, impl, env_name, "--longer", str(longer)]
    if num_timesteps is not None:
        cmd += ["--num-timesteps", str(num_timesteps)]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    for key, value in (overrides or {}).items():
        cmd += ["--set", f"{key}={json.dumps(value)}"]
    head = {"agent": agent, "impl": impl, "env": env_name}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {**head, "error": f"TimeoutError: no result within {timeout:g} s"}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {**head, "error": proc.stderr.strip()[-2000:]}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def main() -> None:
    """Parse arguments and run every (agent, environment, implementation) in a fresh subprocess."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--agents", default=",".join(AGENTS))
    p.add_argument("--envs", default=None, help="default: each agent's benchmark tasks (DEFAULT_ENVS)")
    p.add_argument("--impls", default="ours,brax")
    p.add_argument("--num-timesteps", type=int, default=None, help="override every run's length (env steps)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    p.add_argument(
        "--ours-longer", type=int, default=1, metavar="K",
        help="train our side K times as long (evals on the same steps, then on): reward against wall time "
        "past Google's last step; the summary still reports our reward at Google's last step",
    )
    p.add_argument("--longer", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=None, help="override every run's seed (default: SETTINGS')")
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE",
        help="override one setting of every run (VALUE in JSON: --set num_envs=4096), e.g. to give a GPU "
        "the published batch sizes that SETTINGS scale down for a 2-core CPU",
    )
    p.add_argument("--one", nargs=3, metavar=("AGENT", "IMPL", "ENV"), help=argparse.SUPPRESS)
    p.add_argument("--record", action="store_true",
                   help="also append each row to tools/bench/results.jsonl (see results.py)")
    args = p.parse_args()
    overrides: dict[str, Any] = {}
    for item in args.set:
        key, eq, value = item.partition("=")
        if not eq or not key:
            p.error(f"--set: expected KEY=VALUE, got {item!r}")
        try:
            overrides[key] = json.loads(value)
        except json.JSONDecodeError:
            p.error(f"--set {key}: VALUE must be JSON (a number, true/false, a quoted string), got {value!r}")
    if args.one:
        agent, impl, env_name = args.one
        result = run_one(agent, impl, env_name, args.num_timesteps, args.longer, args.seed, overrides)
        print(json.dumps(result), flush=True)
        return
    agents = args.agents.split(",")
    for a in agents:
        if a not in AGENTS:
            p.error(f"--agents: unknown {a!r}; choose from {', '.join(AGENTS)}")
    if args.ours_longer < 1:
        p.error(f"--ours-longer: must be a positive integer, got {args.ours_longer}")
    impls = args.impls.split(",")
    for impl in impls:
        if impl not in IMPLS:
            p.error(f"--impls: unknown {impl!r}; choose from {', '.join(IMPLS)}")
    envs = None if args.envs is None else args.envs.split(",")
    pairs = _pairs(agents, envs)
    for e in envs or ():
        if not any((a, e) in SETTINGS for a in agents):
            known = sorted({k for a, k in SETTINGS if a in agents})
            p.error(f"--envs: no settings for {e!r} with agents {args.agents}; known: {', '.join(known)}")
    # Google's runs first, so our run's target (Google's final reward) is known when it is summarized.
    impls.sort(key=lambda i: not i.startswith("brax"))
    for agent, env_name in pairs:
        google: dict[str, Any] | None = None
        for impl in impls:
            longer = 1 if impl.startswith("brax") else args.ours_longer
            result = _run_subprocess(agent, impl, env_name, args.num_timesteps, args.timeout, longer,
                                     args.seed, overrides)
            print(json.dumps(result), flush=True)
            if args.record:
                record([result], bench="train")
            if "error" in result:
                continue
            if impl.startswith("brax"):
                google = google or result
            elif google is not None:
                summary = summarize(google, result)
                print(json.dumps(summary), flush=True)
                if args.record:
                    record([summary], bench="train")


if __name__ == "__main__":
    main()
