"""PPO learning speed: brax-train next to Google brax's PPO on the same environment and settings.

Each (implementation, environment) pair runs in its own subprocess, so the compatibility patch that
Google brax 0.14.2 needs under jax >= 0.10 (`jax.device_put_replicated`) only ever touches the
comparison process. Prints one JSON line per run: wall time, estimated compile time, training env
steps/s, the eval reward curve and the wall time at which `--target` reward was first reached.
Run with `hatch run bench:ppo [--envs inverted_pendulum,ant] [--impls ours,brax]`; `--impls
brax-on-ours,ours-on-brax` swaps the environments to tell trainer from environment differences.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

# Google Brax's training-notebook settings, with step counts (and ant's batch sizes) scaled down so
# a run finishes on a 2-core CPU; both implementations get the same settings.
SETTINGS: dict[str, dict[str, Any]] = {
    "inverted_pendulum": dict(
        num_timesteps=820_000,
        num_evals=9,
        reward_scaling=10,
        episode_length=1000,
        normalize_observations=True,
        action_repeat=1,
        unroll_length=5,
        num_minibatches=32,
        num_updates_per_batch=4,
        discounting=0.97,
        learning_rate=3e-4,
        entropy_cost=1e-2,
        num_envs=2048,
        batch_size=1024,
        seed=1,
    ),
    "inverted_double_pendulum": dict(
        num_timesteps=2_000_000,
        num_evals=9,
        reward_scaling=10,
        episode_length=1000,
        normalize_observations=True,
        action_repeat=1,
        unroll_length=5,
        num_minibatches=32,
        num_updates_per_batch=4,
        discounting=0.97,
        learning_rate=3e-4,
        entropy_cost=1e-2,
        num_envs=2048,
        batch_size=1024,
        seed=1,
    ),
    "ant": dict(
        num_timesteps=2_000_000,
        num_evals=9,
        reward_scaling=10,
        episode_length=1000,
        normalize_observations=True,
        action_repeat=1,
        unroll_length=5,
        num_minibatches=8,
        num_updates_per_batch=4,
        discounting=0.97,
        learning_rate=3e-4,
        entropy_cost=1e-2,
        num_envs=256,
        batch_size=256,
        seed=1,
    ),
}
TARGETS = {"inverted_pendulum": 982.0, "inverted_double_pendulum": 9000.0, "ant": 1644.0}


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


IMPLS = ("ours", "brax", "brax-on-ours", "ours-on-brax")
"""Trainer and environment: ours/brax use their own env; `X-on-Y` trains X's PPO on Y's env."""


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


def run_one(impl: str, env_name: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """Train once in this process and summarize."""
    import jax

    settings = {**SETTINGS[env_name], **overrides}
    trainer, _, env_source = impl.partition("-on-")
    env = _environment(env_source or trainer, env_name, trainer)
    train_fn: Any
    if trainer == "brax":
        _patch_google_brax()
        from brax.training.agents.ppo import train as gbrax_ppo

        train_fn = gbrax_ppo.train
    else:
        from brax_train import ppo

        train_fn = ppo.train
    curve: list[tuple[int, float, float]] = []
    t0 = time.perf_counter()

    def progress(step: int, metrics: Any) -> None:
        curve.append((int(step), float(metrics["eval/episode_reward"]), time.perf_counter() - t0))

    train_fn(environment=env, progress_fn=progress, **settings)
    wall = time.perf_counter() - t0
    # Steady throughput from the later eval intervals; compile time as the first interval's excess.
    sps = float("nan")
    compile_s = float("nan")
    if len(curve) >= 3:
        (s1, _, t1), (s2, _, t2) = curve[1], curve[-1]
        sps = (s2 - s1) / (t2 - t1) if t2 > t1 else float("nan")
        compile_s = max(0.0, curve[1][2] - curve[1][0] / sps) if sps == sps else float("nan")
    target = TARGETS.get(env_name)
    reached = next((t for s, r, t in curve if target is not None and r >= target), None)
    return {
        "impl": impl,
        "env": env_name,
        "device": str(jax.devices()[0]),
        "num_timesteps": settings["num_timesteps"],
        "wall_s": round(wall, 2),
        "compile_s": round(compile_s, 2),
        "env_steps_per_s": round(sps, 1),
        "final_reward": curve[-1][1] if curve else None,
        "target": target,
        "wall_s_to_target": None if reached is None else round(reached, 2),
        "curve": [[s, round(r, 2), round(t, 2)] for s, r, t in curve],
    }


def main() -> None:
    """Parse arguments and run every (environment, implementation) pair in a fresh subprocess."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--envs", default="inverted_pendulum,ant")
    p.add_argument("--impls", default="ours,brax")
    p.add_argument("--num-timesteps", type=int, default=None, help="override every env's num_timesteps")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds per (impl, env) run")
    p.add_argument("--one", nargs=2, metavar=("IMPL", "ENV"), help=argparse.SUPPRESS)
    p.add_argument("--overrides", default="{}", help=argparse.SUPPRESS)
    args = p.parse_args()
    for impl in args.impls.split(","):
        if impl not in IMPLS:
            p.error(f"--impls: unknown {impl!r}; choose from {', '.join(IMPLS)}")
    if args.one:
        print(json.dumps(run_one(args.one[0], args.one[1], json.loads(args.overrides))), flush=True)
        return
    overrides = {} if args.num_timesteps is None else {"num_timesteps": args.num_timesteps}
    for env_name in args.envs.split(","):
        for impl in args.impls.split(","):
            cmd = [
                sys.executable,
                os.path.abspath(__file__),
                "--one",
                impl,
                env_name,
                "--overrides",
                json.dumps(overrides),
            ]
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=args.timeout)
            except subprocess.TimeoutExpired:
                print(json.dumps({"impl": impl, "env": env_name, "error": f"TimeoutError: no result within "
                                  f"{args.timeout:g} s"}), flush=True)
                continue
            lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
            if proc.returncode != 0 or not lines:
                print(
                    json.dumps({"impl": impl, "env": env_name, "error": proc.stderr.strip()[-2000:]}),
                    flush=True,
                )
            else:
                print(lines[-1], flush=True)


if __name__ == "__main__":
    main()
