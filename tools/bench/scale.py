"""Scale and deployment: PPO's training throughput over devices and processes, and exported-policy latency.

1. PPO training env steps/s on forced CPU devices: 1, 2 and 4 devices in one process, and 2 processes
   x 2 devices on localhost (`jax.distributed`), each in its own subprocess; the rate is measured
   between two evaluations after the first (compile) interval. Scaling efficiency is
   `sps / (devices * sps of 1 device)`. On a machine with fewer cores than forced devices, the devices
   share the cores, so the efficiency shows the cost of sharding and collectives, not a speed-up.
2. The deterministic policy of a fresh PPO network on the same env: the ONNX file in onnxruntime
   against the jitted JAX policy, at batch 1 and 1024 (median of repeated calls).

Run with `hatch run bench:scale [--env ant] [--num-envs 256]`; prints one JSON line per measurement.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from results import record

_NETS = {"policy_hidden_layer_sizes": (32, 32), "value_hidden_layer_sizes": (32, 32)}


def _ppo_settings(num_envs: int) -> dict[str, Any]:
    # three evaluation intervals of 4 training steps: the first holds the compile, the rest are timed
    per_step = num_envs * 5
    return dict(
        num_timesteps=3 * 4 * per_step, num_evals=4, num_envs=num_envs, batch_size=num_envs // 4,
        num_minibatches=4, unroll_length=5, num_updates_per_batch=2, episode_length=1000,
        normalize_observations=True, num_eval_envs=4, run_evals=False, network_factory=_NETS, seed=0,
    )


def _train_child(env_name: str, num_envs: int, coordinator: str | None, process_id: int) -> None:
    if coordinator is not None:
        from brax_train import distributed

        distributed.initialize(coordinator, 2, process_id)
    import brax_envs
    import jax
    from brax_train import ppo

    times: list[tuple[int, float]] = []
    ppo.train(
        brax_envs.get_environment(env_name),
        progress_fn=lambda step, _: times.append((int(step), time.perf_counter())),
        **_ppo_settings(num_envs),
    )
    if jax.process_index() == 0:
        (s1, t1), (s2, t2) = times[1], times[-1]
        result = {"sps": (s2 - s1) / (t2 - t1), "devices": jax.device_count()}
        print("RESULT" + json.dumps(result), flush=True)


def _spawn(args: list[str], devices: int) -> subprocess.Popen[str]:
    flags = f"--xla_force_host_platform_device_count={devices}"
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": flags}
    return subprocess.Popen([sys.executable, __file__, *args], env=env, stdout=subprocess.PIPE, text=True)


def _result(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out = proc.communicate()[0]
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark child failed with status {proc.returncode}")
    return dict(json.loads(next(ln for ln in out.splitlines() if ln.startswith("RESULT"))[6:]))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bench_scaling(env_name: str, num_envs: int, record_rows: bool = False) -> None:
    """Print PPO env steps/s at 1, 2, 4 devices (one process) and 2 processes x 2 devices (and
    `record_rows`: record them)."""
    base = ["--child", env_name, str(num_envs)]
    rows: list[dict[str, Any]] = []
    for devices in (1, 2, 4):
        r = _result(_spawn(base, devices))
        rows.append({"layout": f"1 process x {devices} devices", "processes": 1, **r})
    coordinator = f"127.0.0.1:{_free_port()}"
    procs = [_spawn([*base, coordinator, str(i)], 2) for i in (0, 1)]
    r = _result(procs[0])
    procs[1].communicate()
    rows.append({"layout": "2 processes x 2 devices", "processes": 2, **r})
    one = rows[0]["sps"]
    for row in rows:
        row["efficiency"] = row["sps"] / (row["devices"] * one)
        line = {"bench": "ppo_scaling", "env": env_name, "num_envs": num_envs, **row}
        print(json.dumps(line), flush=True)
        if record_rows:
            record([line], bench="scale")


def _jax_call(policy: Any, obs: Any, key: Any) -> Any:
    import jax

    return jax.block_until_ready(policy(obs, key)[0])


def bench_export(env_name: str, record_rows: bool = False) -> None:
    """Print ONNX (onnxruntime) and jitted JAX latency of the deterministic policy at batch 1 and 1024
    (and `record_rows`: record them)."""
    import brax_envs
    import jax
    import numpy as np
    import onnxruntime  # type: ignore[import-untyped]
    from brax_train import export, ppo

    env = brax_envs.get_environment(env_name)
    size = env.observation_size
    assert isinstance(size, int), f"{env_name} has structured observations"
    make_policy, params, _ = ppo.train(env, num_timesteps=0, network_factory=_NETS, episode_length=10)
    policy = jax.jit(make_policy(params, deterministic=True))
    key = jax.random.PRNGKey(0)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "policy.onnx")
        export.export_policy((make_policy, params), path, "onnx", observation_size=size)
        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        for batch in (1, 1024):
            obs = np.random.default_rng(0).standard_normal((batch, size)).astype(np.float32)
            jax_obs = jax.numpy.asarray(obs)
            calls: dict[str, Callable[[], Any]] = {
                "onnxruntime": functools.partial(session.run, None, {"observation": obs}),
                "jax_jit": functools.partial(_jax_call, policy, jax_obs, key),
            }
            for name, call in calls.items():
                for _ in range(20):
                    call()
                samples = []
                for _ in range(200):
                    t0 = time.perf_counter()
                    call()
                    samples.append(time.perf_counter() - t0)
                line: dict[str, Any] = {"bench": "policy_latency", "env": env_name, "runtime": name}
                line["batch"] = batch
                line["median_us"] = 1e6 * float(np.median(samples))
                print(json.dumps(line), flush=True)
                if record_rows:
                    record([line], bench="scale")


def main() -> None:
    """Parse the command line and run the benchmarks (or one child run)."""
    if sys.argv[1:2] == ["--child"]:
        env_name, num_envs, *rest = sys.argv[2:]
        _train_child(env_name, int(num_envs), rest[0] if rest else None, int(rest[1]) if rest else 0)
        return
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", default="ant")
    p.add_argument("--num-envs", type=int, default=256)
    p.add_argument("--skip", choices=("scaling", "export"), action="append", default=[])
    p.add_argument("--record", action="store_true",
                   help="also append each row to tools/bench/results.jsonl (see results.py)")
    a = p.parse_args()
    if "scaling" not in a.skip:
        bench_scaling(a.env, a.num_envs, a.record)
    if "export" not in a.skip:
        bench_export(a.env, a.record)


if __name__ == "__main__":
    main()
