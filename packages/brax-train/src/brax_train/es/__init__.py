"""Evolution strategies (Salimans et al. 2017) with Google Brax's `es.train` interface."""

from brax_train.es.config import ESConfig, ESConfigError, env_steps_per_update
from brax_train.es.fitness import FitnessShaping, centered_rank, shape_fitness, wierstra
from brax_train.es.networks import (
    ESNetworks,
    ESParams,
    make_es_networks,
    make_inference_fn,
    networks_from_description,
)
from brax_train.es.spec import CODEC, SPEC, policy_from_checkpoint
from brax_train.es.train import NonFiniteError, TrainingState, TrainResult, train

__all__ = [
    "CODEC",
    "SPEC",
    "ESConfig",
    "ESConfigError",
    "ESNetworks",
    "ESParams",
    "FitnessShaping",
    "NonFiniteError",
    "TrainResult",
    "TrainingState",
    "centered_rank",
    "env_steps_per_update",
    "make_es_networks",
    "make_inference_fn",
    "networks_from_description",
    "policy_from_checkpoint",
    "shape_fitness",
    "train",
    "wierstra",
]
