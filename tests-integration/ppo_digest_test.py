"""Refactor invariant: `ppo.train` with a fixed seed reproduces recorded parameters and metrics.

`ppo_digest.json` holds, for two small seeded runs on CPU (the constant learning rate path, and the
adaptive-KL path with gradient clipping, timeout bootstrapping and resets):
- `values`: the final parameters (every leaf, in tree order) and the reported metrics (timings
  excluded) of the machine that recorded them;
- `digests`: SHA-256 digests of those parameters' bytes and metrics, per machine fingerprint (CPU
  vendor, family, model and vector extensions, core count, jaxlib version).

On a machine whose fingerprint is recorded, the run must match its digests bit for bit. On any
machine, every parameter and metric must equal the recorded value within `RTOL`: XLA compiles for
the host CPU, and another CPU model or XLA release rounds some reductions differently (measured:
relative differences up to about 2e-6 between AVX2 and SSE4.2 code on one machine), while any
change of the algorithm moves them by orders of magnitude more.

Update the record only together with a brax-train CHANGELOG entry that says why the numbers changed
(`python tests-integration/ppo_digest_test.py --record`); `--add-machine` adds this machine's
digests after checking its values against the record.

The runs happen in a child process whose XLA CPU code generation is capped at AVX2 (`XLA_FLAGS`
below), so machines with and without AVX-512 compile the same vector code.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import pathlib
import platform
import subprocess
import sys
from typing import Any

import brax_envs
import jax
import numpy as np
import pytest
from brax_train import ppo

pytestmark = pytest.mark.slow

RECORD = pathlib.Path(__file__).with_name("ppo_digest.json")
XLA_FLAGS = "--xla_cpu_max_isa=AVX2"
RTOL = 1e-4
"""Relative tolerance of the value comparison (about 50x the drift measured across CPU code paths)."""
_TIMINGS = ("training/sps", "training/walltime", "eval/sps", "eval/walltime", "eval/epoch_eval_time")
_COMMON: dict[str, Any] = {
    "num_timesteps": 2400,
    "episode_length": 40,
    "num_envs": 8,
    "batch_size": 8,
    "num_minibatches": 4,
    "unroll_length": 5,
    "num_updates_per_batch": 2,
    "num_evals": 3,
    "num_eval_envs": 4,
    "log_training_metrics": True,
    "normalize_observations": True,
    "learning_rate": 3e-3,
    "entropy_cost": 1e-2,
    "seed": 7,
    # One device: the digest must not depend on how many devices the test process forces.
    "max_devices_per_host": 1,
    "network_factory": {"policy_hidden_layer_sizes": (16,), "value_hidden_layer_sizes": (16,)},
}
CASES: dict[str, dict[str, Any]] = {
    "constant_lr": {},
    "adaptive_kl": {
        "learning_rate_schedule": "ADAPTIVE_KL",
        "desired_kl": 1e-3,
        "max_grad_norm": 0.5,
        "bootstrap_on_timeout": True,
        "num_resets_per_eval": 1,
    },
}


def run_case(case: str) -> dict[str, Any]:
    """Train `case` on CPU: its final parameters (flat float lists per leaf) and reported metrics."""
    reports: list[tuple[int, dict[str, float]]] = []
    env = brax_envs.get_environment("inverted_pendulum")
    _, params, _ = ppo.train(
        env,
        **_COMMON,
        **CASES[case],
        progress_fn=lambda step, m: reports.append(
            (step, {k: float(v) for k, v in m.items() if k not in _TIMINGS})
        ),
    )
    leaves = [np.asarray(leaf) for leaf in jax.tree.leaves(params)]
    h_params = hashlib.sha256()
    for leaf in leaves:
        h_params.update(leaf.tobytes())
    text = json.dumps(reports, sort_keys=True).encode()
    return {
        "digest": {"params": h_params.hexdigest(), "metrics": hashlib.sha256(text).hexdigest()},
        "values": {"params": [leaf.ravel().tolist() for leaf in leaves], "reports": reports},
    }


def fingerprint() -> str:
    """What decides XLA's CPU rounding here: CPU identity and vector extensions, cores, jaxlib."""
    info: dict[str, str] = {}
    cpuinfo = pathlib.Path("/proc/cpuinfo")
    for line in cpuinfo.read_text().splitlines() if cpuinfo.exists() else []:
        key, _, value = line.partition(":")
        info.setdefault(key.strip(), value.strip())
    flags = set(info.get("flags", "").split())
    isa = ",".join(f for f in ("sse4_2", "avx", "avx2", "fma", "avx512f") if f in flags)
    cpu = "/".join(info.get(k, "?") for k in ("vendor_id", "cpu family", "model", "model name"))
    cpu = cpu if info else platform.processor()
    return f"{cpu}|{isa}|cores={os.cpu_count()}|jaxlib={importlib.metadata.version('jaxlib')}"


def runs_in_child() -> dict[str, Any]:
    """Every case's digests and values, and the fingerprint, from a child process with `XLA_FLAGS`."""
    env = {**os.environ, "XLA_FLAGS": XLA_FLAGS, "JAX_PLATFORMS": "cpu"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    cmd = [sys.executable, __file__, "--print"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out: dict[str, Any] = json.loads(proc.stdout.splitlines()[-1])
    return out


def mismatches(values: dict[str, Any], recorded: dict[str, Any]) -> list[str]:
    """Parameters and metrics of `values` that differ from `recorded` by more than `RTOL`."""
    bad: list[str] = []
    for case, rec in recorded.items():
        got = values[case]
        for i, (a, b) in enumerate(zip(got["params"], rec["params"], strict=True)):
            err = np.abs(np.asarray(a) - np.asarray(b)) / (1.0 + np.abs(np.asarray(b)))
            if err.size and err.max() > RTOL:
                bad.append(f"{case}: parameter leaf {i} differs by {err.max():.3g} (relative)")
        assert [s for s, _ in got["reports"]] == [s for s, _ in rec["reports"]], f"{case}: report steps"
        for (step, m), (_, r) in zip(got["reports"], rec["reports"], strict=True):
            assert sorted(m) == sorted(r), f"{case}: metric keys at step {step}"
            for k in r:
                if abs(m[k] - r[k]) > RTOL * (1.0 + abs(r[k])):
                    bad.append(f"{case}: {k} at step {step}: {m[k]!r} vs recorded {r[k]!r}")
    return bad


@pytest.fixture(scope="module")
def child() -> dict[str, Any]:
    """The seeded runs, computed once in a child process."""
    return runs_in_child()


def test_ppo_matches_recorded_values(child: dict[str, Any]) -> None:
    """Every final parameter and reported metric equals the recorded one within `RTOL`."""
    recorded = json.loads(RECORD.read_text())
    assert mismatches(child["values"], recorded["values"]) == []


def test_ppo_matches_recorded_digests_bit_for_bit(child: dict[str, Any]) -> None:
    """On every recorded machine the runs reproduce the recorded digests bit for bit."""
    digests = json.loads(RECORD.read_text())["digests"]
    assert digests, "no machine's digests are recorded"
    if child["fingerprint"] in digests:
        assert child["digests"] == digests[child["fingerprint"]]
    else:
        # An unrecorded machine: its values passed the tolerance test; its digests must at least
        # be self-consistent (the run is deterministic on one machine).
        again = runs_in_child()
        assert again["digests"] == child["digests"]


def _record(add_machine: bool) -> None:
    out = runs_in_child()
    data = json.loads(RECORD.read_text()) if RECORD.exists() else {"values": {}, "digests": {}}
    if add_machine:
        bad = mismatches(out["values"], data["values"])
        if bad:
            raise SystemExit("values differ from the record; not adding this machine:\n" + "\n".join(bad))
        data["digests"][out["fingerprint"]] = out["digests"]
    else:
        data = {"values": out["values"], "digests": {out["fingerprint"]: out["digests"]}}
    RECORD.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(json.dumps(data["digests"], indent=2))


if __name__ == "__main__":
    if sys.argv[1:] == ["--print"]:
        runs = {c: run_case(c) for c in sorted(CASES)}
        print(
            json.dumps(
                {
                    "fingerprint": fingerprint(),
                    "digests": {c: r["digest"] for c, r in runs.items()},
                    "values": {c: r["values"] for c, r in runs.items()},
                },
                sort_keys=True,
            )
        )
    elif sys.argv[1:] in (["--record"], ["--add-machine"]):
        _record(add_machine=sys.argv[1:] == ["--add-machine"])
    else:
        raise SystemExit("usage: python tests-integration/ppo_digest_test.py --record | --add-machine")
