"""The run's curves with matplotlib (the optional `plot` extra): reward, losses, entropy, KL, steps/s."""

from __future__ import annotations

import os
import pathlib
import sys
from typing import TYPE_CHECKING, Any

from brax_io import write_atomic

from brax_train.reporting.metrics import EVAL_REWARD, TRAIN_REWARD, read_metrics, reward_series
from brax_train.reporting.progress import format_number

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PANELS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("episode reward", ((EVAL_REWARD, "eval"), (TRAIN_REWARD, "training"))),
    (
        "loss",
        (("training/total_loss", "total"), ("training/policy_loss", "policy"), ("training/v_loss", "value")),
    ),
    ("entropy loss", (("training/entropy_loss", "entropy"),)),
    ("KL", (("training/kl_mean", "mean KL"),)),
    ("env steps/s", (("training/sps", "steps/s"),)),
)
"""(panel title, ((metric, legend label), ...)) in drawing order; the first panel is the reward."""

SIZE = (800, 480)
"""The PNG's width and height in pixels."""


def _short(value: float, _position: float | None) -> str:
    return format_number(value)


def figure(reports: list[dict[str, Any]], title: str) -> Figure | None:
    """The run's panels on an Agg canvas, or None before any reward; ImportError without matplotlib."""
    panels: list[tuple[str, list[tuple[str, list[float], list[float]]]]] = []
    for name, keys in PANELS:
        lines = [(label, *reward_series(reports, key)) for key, label in keys]
        lines = [line for line in lines if line[1]]
        if lines or not panels:
            panels.append((name, lines))
    if not panels[0][1]:
        return None
    # Imported here: the library and `brax-train --help` never load matplotlib.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    fig = Figure(figsize=(SIZE[0] / 100, SIZE[1] / 100), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    # The reward takes the left half; the other panels share a grid of up to two rows on the right.
    extra = len(panels) - 1
    rows = 2 if extra > 1 else 1
    cols = -(-extra // rows)
    grid = fig.add_gridspec(rows, max(2 * cols, 1))
    slots = [grid[:, : max(cols, 1)]] + [grid[i // cols, cols + i % cols] for i in range(extra)]
    for slot, (name, lines) in zip(slots, panels, strict=True):
        ax = fig.add_subplot(slot)
        for label, xs, ys in lines:
            ax.plot(xs, ys, marker="o", markersize=2.5, linewidth=1.2, label=label)
        ax.set_title(name, fontsize=9)
        ax.xaxis.set_major_formatter(FuncFormatter(_short))
        if name == "env steps/s":
            ax.yaxis.set_major_formatter(FuncFormatter(_short))
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        if len(lines) > 1:
            ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.supxlabel("environment steps", fontsize=8)
    return fig




_plot_noted = False


def write_plot(metrics_path: str | os.PathLike[str], png_path: str | os.PathLike[str], title: str) -> bool:
    """Draw a metrics.jsonl as a PNG; False when there is nothing to plot yet or no matplotlib."""
    global _plot_noted
    try:
        fig = figure(read_metrics(pathlib.Path(metrics_path)), title)
    except ImportError as e:
        # An optional extra: a run without it keeps training; say so once per process, not per report.
        if not _plot_noted:
            _plot_noted = True
            msg = f"no reward.png: matplotlib is not available ({e}); pip install 'brax-train[plot]'"
            print(f"brax-train: {msg}", file=sys.stderr, flush=True)
        return False
    if fig is None:
        return False
    write_atomic(png_path, lambda f: fig.savefig(f, format="png"))
    return True


__all__ = ["PANELS", "SIZE", "figure", "write_plot"]
