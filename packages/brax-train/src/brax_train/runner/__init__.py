"""The host runner shared by every agent: schedule, evaluation, metrics, NaN guard, checkpoints, devices.

An agent is a pure pair in optax's shape (`Agent.init`, `Agent.update`), built for a wrapped
environment by a factory the agent's `train` passes to `run`. Everything else lives here once:
environment wrapping and sharding, the jitted chunk of training steps, the evaluation and metrics
schedule, `progress_fn` and `policy_params_fn`, orbax checkpoints with exact resume, and the
non-finite guard.

Determinism: training step `t` (a 64-bit index) draws its randomness from `fold_in(train_key, t)`,
so results do not depend on how steps are grouped into jitted chunks (evaluation intervals, metric
intervals, or a save/restore in between). The batch is sharded over devices along the environment
axis with `jax.sharding`; agents write every computation for the global batch, so 1, 2 or 4 devices
compute the same thing up to floating-point summation order. Under `jax.distributed` the mesh spans
every process's devices (`mesh_devices`); process 0 alone evaluates, reports and writes checkpoints.

The modules, each importing only those above it: `_agent` (`Agent`, `Setup`, `TrainResult`,
`NonFiniteError`, the metric keys, `checkpoint_meta`, `key_at`), `_sharding` (environment wrapping,
`AXIS`, `P`, `constrain`, per-device stepping, the environment's shardings, device lists,
`log_devices`), `_host` (a run's keys and progress, evaluation, reports, metric windows, checkpoint
writes, the non-finite check), `_schedule` (the schedule, `final_step`, the fixed and counted clocks)
and `_loop` (setup, restore, the jitted chunk and its compile ahead, the loop, `run`, `train`).
Every module logs to the logger "brax_train.runner".
"""

import logging

from brax_train.runner._agent import (
    ENV_STEPS,
    NONFINITE,
    NONFINITE_QUANTITIES,
    Agent,
    MakeAgent,
    NonFiniteError,
    Setup,
    TrainResult,
    checkpoint_meta,
    episode_sums,
    key_at,
)
from brax_train.runner._loop import run, train
from brax_train.runner._schedule import final_step
from brax_train.runner._sharding import (
    AXIS,
    constrain,
    local_devices,
    log_devices,
    mesh_devices,
    per_device,
    wrap_env,
)
from brax_train.runner._sharding import P as P  # not in __all__ (as in runner.py), imported by agents

logger = logging.getLogger("brax_train.runner")

__all__ = [
    "AXIS",
    "ENV_STEPS",
    "NONFINITE",
    "NONFINITE_QUANTITIES",
    "Agent",
    "MakeAgent",
    "NonFiniteError",
    "Setup",
    "TrainResult",
    "checkpoint_meta",
    "constrain",
    "episode_sums",
    "final_step",
    "key_at",
    "local_devices",
    "log_devices",
    "mesh_devices",
    "per_device",
    "run",
    "train",
    "wrap_env",
]
