"""Reporting training progress: metrics.jsonl + TensorBoard, matplotlib curves and a rich progress bar.

The CLI's run directory is written with these; a script can use them as its `progress_fn`.
"""

from brax_train.reporting.metrics import EVAL_REWARD, TRAIN_REWARD, MetricsLog, read_metrics, reward_series
from brax_train.reporting.plot import write_plot
from brax_train.reporting.progress import Progress
from brax_train.reporting.tensorboard import EventWriter, read_records

__all__ = [
    "EVAL_REWARD",
    "TRAIN_REWARD",
    "EventWriter",
    "MetricsLog",
    "Progress",
    "read_metrics",
    "read_records",
    "reward_series",
    "write_plot",
]
