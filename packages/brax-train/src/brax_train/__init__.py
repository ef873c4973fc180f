"""brax-train: agents on a shared runner for brax-envs with typed configs, exact resume and checkpoints."""

from brax_train import (
    acting,
    agents,
    apg,
    ars,
    bc,
    checkpoint,
    config,
    distributed,
    distribution,
    es,
    export,
    networks,
    ppo,
    presets,
    rppo,
    runner,
    running_statistics,
    sac,
    types,
)
from brax_train._versions import installed_version

__version__ = installed_version("brax-train") or "0.0.0"  # "0.0.0": a source tree without an install

__all__ = [
    "__version__",
    "acting",
    "agents",
    "apg",
    "ars",
    "bc",
    "checkpoint",
    "config",
    "distributed",
    "distribution",
    "es",
    "export",
    "networks",
    "ppo",
    "presets",
    "rppo",
    "runner",
    "running_statistics",
    "sac",
    "types",
]
