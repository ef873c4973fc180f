"""Environment wrappers: episodes, auto-reset, batching, domain randomization, evaluation, NaN guard."""

from brax_envs.base import Wrapper
from brax_envs.wrappers.training import (
    AutoResetWrapper,
    DomainRandomizationVmapWrapper,
    EpisodeWrapper,
    EvalMetrics,
    EvalWrapper,
    NanGuardWrapper,
    RandomizationFn,
    VmapWrapper,
    wrap_for_training,
)

__all__ = [
    "AutoResetWrapper",
    "DomainRandomizationVmapWrapper",
    "EpisodeWrapper",
    "EvalMetrics",
    "EvalWrapper",
    "NanGuardWrapper",
    "RandomizationFn",
    "VmapWrapper",
    "Wrapper",
    "wrap_for_training",
]
