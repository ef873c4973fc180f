"""Environment wrappers: episodes, auto-reset, batching, domain randomization, evaluation, NaN guard,
and sim-to-real tools (per-episode physical randomization, observation noise, action delay, pushes,
privileged critic observations)."""

from brax_envs.base import Wrapper
from brax_envs.wrappers.sim2real import (
    LEGGED,
    MANIPULATION,
    ActionDelayWrapper,
    ObservationNoiseWrapper,
    PrivilegedFn,
    PrivilegedObservationWrapper,
    PushWrapper,
    Randomization,
)
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
    "LEGGED",
    "MANIPULATION",
    "RANDOMIZED_SYS_KEY",
    "ActionDelayWrapper",
    "AutoResetWrapper",
    "DomainRandomizationVmapWrapper",
    "EpisodeWrapper",
    "EvalMetrics",
    "EvalWrapper",
    "FlattenObservationWrapper",
    "NanGuardWrapper",
    "ObservationNoiseWrapper",
    "PerEpisodeDomainRandomizationVmapWrapper",
    "PrivilegedFn",
    "PrivilegedObservationWrapper",
    "PushWrapper",
    "Randomization",
    "RandomizationFn",
    "VmapWrapper",
    "Wrapper",
    "wrap_for_training",
]
