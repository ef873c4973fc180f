"""What brax-train's tests share: the `fast` env, tree equality, child processes with forced devices.

Test-only: the wheel leaves this module out (`pyproject.toml`), as it does the `*_test.py` files.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import brax_envs
import jax
import numpy as np
import pytest

from brax_train import runner
from brax_train._population import PopulationConfig
from brax_train.types import Policy


def on_fast(num_envs: int, num_eval_envs: int, **settings: Any) -> dict[str, Any]:
    """`settings` for a run on `fast`'s 100-step episodes in `num_envs` environments, evaluated
    deterministically in `num_eval_envs`."""
    run = dict(episode_length=100, num_envs=num_envs, num_eval_envs=num_eval_envs, deterministic_eval=True)
    return {**run, **settings}


PPO_ON_FAST: dict[str, Any] = on_fast(
    16, 4, batch_size=16, num_minibatches=4, unroll_length=10, num_updates_per_batch=2, learning_rate=1e-2,
    entropy_cost=1e-3, discounting=0.95, normalize_observations=True,
)
"""The small PPO-family run on `fast` of the PPO and RPPO tests (16 * 10 * 4 env steps a training step)."""


def smallest_ppo(num_envs: int, hidden: int) -> dict[str, Any]:
    """The least PPO training on `num_envs` environments: one pass over one minibatch of their 2-step
    unrolls, with one hidden layer of `hidden` units in each network."""
    nets = {"policy_hidden_layer_sizes": (hidden,), "value_hidden_layer_sizes": (hidden,)}
    return dict(
        num_envs=num_envs, batch_size=num_envs, num_minibatches=1, unroll_length=2, num_updates_per_batch=1,
        network_factory=nets,
    )


def population_on_fast(config: type[PopulationConfig], **settings: Any) -> dict[str, Any]:
    """`settings` for the small ES or ARS run on `fast` (`config`: the agent's): 8 antithetic pairs of
    50-step episodes, normalized observations, 4 evaluation episodes."""
    run = {config.PAIRS: 8, "episode_length": 50, "num_eval_envs": 4, "normalize_observations": True}
    return {**run, **settings}


POPULATION_STEP = 2 * 8 * 50
"""Env steps of a `population_on_fast` generation: 2 * 8 rollouts of 50 steps."""


def fast() -> brax_envs.Env:
    """The `fast` environment, the agents' end-to-end test task."""
    return brax_envs.get_environment("fast")


def leaves_equal(a: Any, b: Any) -> bool:
    """The two trees have the same leaves, bit for bit."""
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    return len(la) == len(lb) and all(
        np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(la, lb, strict=True)
    )


def on_both_devices(params: Any) -> bool:
    """Every leaf of `params` lives on both of the root conftest's 2 forced CPU devices."""
    return jax.local_device_count() == 2 and all(
        len(x.sharding.device_set) == 2 for x in jax.tree.leaves(params)
    )


def resumed_is_bit_exact(learned: Any, full: Any, resumed: Any) -> bool:
    """A run resumed from `learned`'s checkpoint ends with the parameters of the uninterrupted `full`
    run, which differ from `learned`'s (so the resumed run did train)."""
    return not leaves_equal(learned, full) and leaves_equal(resumed, full)


class Recorded(NamedTuple):
    """A training run's result and what its callbacks were given."""

    result: Any
    """What `train` returned."""
    progress: list[tuple[int, dict[str, float]]]
    """`(step, metrics)` of every `progress_fn` call."""
    snapshots: list[tuple[int, Any, Any]]
    """`(step, make_policy, params)` of every `policy_params_fn` call."""


def recorded(train: Callable[..., Any], *args: Any, **settings: Any) -> Recorded:
    """`train(*args, **settings)`, recording its progress reports and policy snapshots."""
    progress: list[tuple[int, dict[str, float]]] = []
    snapshots: list[tuple[int, Any, Any]] = []
    result = train(
        *args,
        **settings,
        progress_fn=lambda s, m: progress.append((s, dict(m))),
        policy_params_fn=lambda s, mp, p: snapshots.append((s, mp, p)),
    )
    return Recorded(result, progress, snapshots)


def full_and_resumed(train: Callable[..., Any], kw: Mapping[str, Any], learned_root: Any) -> dict[str, Any]:
    """`full`: `train(fast(), **kw)` in one go with 4 evaluations; `resumed`: the run checkpointed at
    `learned_root` resumed to the same end with 2 (the resume tests of APG and BC)."""
    full = train(fast(), **kw, num_evals=4)
    resumed = train(fast(), **kw, num_evals=2, restore_checkpoint_path=learned_root)
    return {"full": full, "resumed": resumed}


def assert_nan_guard(
    train: Callable[..., Any],
    environment: brax_envs.Env,
    settings: Mapping[str, Any],
    run_dir: pathlib.Path,
    quantity: str,
    step: int,
    saved: int,
) -> str:
    """`train(environment, **settings)` resumed from `run_dir` raises `NonFiniteError` naming `quantity`
    at env step `step` and `run_dir`'s checkpoint of step `saved`; the error's message."""
    with pytest.raises(runner.NonFiniteError) as e:
        train(environment, **settings, restore_checkpoint_path=run_dir)
    assert e.value.quantity == quantity and e.value.step == step
    assert str(run_dir / str(saved)) in str(e.value)
    return str(e.value)


def assert_same_actions(got: Policy, expected: Policy, obs: Any) -> None:
    """The two policies take the same actions, bit for bit, on `obs` with the same key."""
    key = jax.random.PRNGKey(0)
    np.testing.assert_array_equal(np.asarray(got(obs, key)[0]), np.asarray(expected(obs, key)[0]))


class Untouchable(brax_envs.Env):
    """Fails on use: what must be rejected or skipped before an environment is built or compiled."""

    def __init__(self, reason: str = "the environment must not be used") -> None:
        self.reason = reason

    def reset(self, rng: jax.Array) -> brax_envs.State:
        raise AssertionError(self.reason)

    def step(self, state: brax_envs.State, action: jax.Array) -> brax_envs.State:
        raise AssertionError(self.reason)

    @property
    def action_size(self) -> int:
        return 1


def forced_devices_env(count: int) -> dict[str, str]:
    """A child process's environment: this one's, on `count` forced CPU devices.

    The suite's compile flags (the root conftest.py) are kept, with this device count instead of its.
    """
    env = dict(os.environ)
    kept = [f for f in os.environ.get("XLA_FLAGS", "").split() if "device_count" not in f]
    env["XLA_FLAGS"] = " ".join([*kept, f"--xla_force_host_platform_device_count={count}"])
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


def result_line(stdout: str) -> Any:
    """The JSON a child printed after `RESULT` on a line of its own."""
    line = next(line for line in stdout.splitlines() if line.startswith("RESULT"))
    return json.loads(line.removeprefix("RESULT"))


def run_script(script: str, devices: int) -> Any:
    """Run Python `script` in a child on `devices` forced CPU devices; what it printed as `RESULT`."""
    proc = subprocess.run(
        [sys.executable, "-c", script], env=forced_devices_env(devices), capture_output=True,
        text=True, timeout=600, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return result_line(proc.stdout)
