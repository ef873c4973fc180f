"""Environment wrappers: episodes, auto-reset, batching, domain randomization, evaluation, NaN guard."""

from brax_envs.base import Wrapper
from brax_envs.wrappers.training import (
    RANDOMIZED_SYS_KEY,
    AutoResetWrapper,
    DomainRandomizationVmapWrapper,
    EpisodeWrapper,
    EvalMetrics,
    EvalWrapper,
    FlattenObservationWrapper,
    NanGuardWrapper,
    PerEpisodeDomainRandomizationVmapWrapper,
    RandomizationFn,
    VmapWrapper,
    wrap_for_training,
)

__all__ = [
    "RANDOMIZED_SYS_KEY",
    "AutoResetWrapper",
    "DomainRandomizationVmapWrapper",
    "EpisodeWrapper",
    "EvalMetrics",
    "EvalWrapper",
    "FlattenObservationWrapper",
    "NanGuardWrapper",
    "PerEpisodeDomainRandomizationVmapWrapper",
    "RandomizationFn",
    "VmapWrapper",
    "Wrapper",
    "wrap_for_training",
]
