"""Reporting: metrics.jsonl after resumes, the matplotlib curves, strict JSON lines."""

from __future__ import annotations

import json
import pathlib
import sys
from typing import Any

import numpy as np
import pytest
from matplotlib.image import imread

from brax_train.cli import _rundir
from brax_train.reporting import metrics as metrics_mod
from brax_train.reporting import plot as plot_mod


def _write(run: _rundir.RunDir, rows: list[dict[str, Any]], tail: str = "") -> None:
    run.metrics.write_text("".join(json.dumps(x) + "\n" for x in rows) + tail)


def test_metrics_after_resume_drop_lost_reports(tmp_path: pathlib.Path) -> None:
    run = _rundir.RunDir(tmp_path)
    rows: list[dict[str, Any]] = [
        {"event": "start", "step": 0, "time": 0},
        {"step": 0, "time": 0, "eval/episode_reward": 1.0},
        {"step": 10, "time": 1, "eval/episode_reward": 2.0},
        {"step": 20, "time": 2, "eval/episode_reward": 9.0},  # after the last checkpoint: lost by a kill
        {"event": "resume", "step": 10, "time": 3},
        {"step": 10, "time": 3, "eval/episode_reward": 2.5},
        {"step": 20, "time": 4, "eval/episode_reward": 3.0, "episode/sum_reward": 4.0},
    ]
    _write(run, rows, tail='{"step": 30, "ti')  # a torn last line
    reports = metrics_mod.read_metrics(run.metrics)
    assert [r["step"] for r in reports] == [0, 10, 10, 20]
    assert metrics_mod.reward_series(reports, metrics_mod.EVAL_REWARD) == ([0.0, 10.0, 20.0], [1.0, 2.5, 3.0])


def _training_rows(n: int, keys: tuple[str, ...]) -> list[dict[str, Any]]:
    return [
        {"step": 100_000 * i, "time": i, **{k: float(i + j) for j, k in enumerate(keys)}} for i in range(n)
    ]


ALL_KEYS = tuple(key for _, keys in plot_mod.PANELS for key, _ in keys)


@pytest.mark.parametrize(("keys", "axes"), [(ALL_KEYS, 5), ((*ALL_KEYS[:2], "training/kl_mean"), 2)])
def test_figure_has_a_panel_per_reported_group(keys: tuple[str, ...], axes: int) -> None:
    fig = plot_mod.figure(_training_rows(4, keys), "t")
    assert fig is not None and len(fig.axes) == axes
    assert [ax.get_title() for ax in fig.axes][:2] == ["episode reward", "loss" if axes == 5 else "KL"]
    assert len(fig.axes[0].get_lines()) == 2  # eval and training reward
    if axes == 5:
        assert len(fig.axes[1].get_lines()) == 3  # total, policy and value loss


def test_write_plot_draws_a_png(tmp_path: pathlib.Path) -> None:
    run = _rundir.RunDir(tmp_path)
    _write(run, _training_rows(5, ALL_KEYS))
    assert plot_mod.write_plot(run.metrics, run.plot, "fast reward")
    img = imread(run.plot)
    assert img.shape[:2] == (plot_mod.SIZE[1], plot_mod.SIZE[0])
    rgb = img[..., :3]
    drawn = np.any(rgb < 0.9, axis=-1)  # non-white pixels: lines, text, axes
    assert drawn.mean() > 0.02
    # Every quadrant holds drawing: the reward on the left, the other panels on the right.
    h, w = drawn.shape
    assert all(
        drawn[i * h // 2 : (i + 1) * h // 2, j * w // 2 : (j + 1) * w // 2].any()
        for i in (0, 1)
        for j in (0, 1)
    )
    blue = (rgb[..., 2] > 0.6) & (rgb[..., 0] < 0.3)  # the default first line colour (eval reward)
    assert blue.any()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp file left


def test_no_plot_without_rewards(tmp_path: pathlib.Path) -> None:
    run = _rundir.RunDir(tmp_path)
    assert not plot_mod.write_plot(run.metrics, run.plot, "title")
    _write(run, _training_rows(3, ("training/total_loss",)))
    assert not plot_mod.write_plot(run.metrics, run.plot, "title")
    assert not run.plot.exists()


def test_write_plot_without_matplotlib_says_so_once(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.setitem(sys.modules, name, None)  # `import matplotlib...` now raises ImportError
    monkeypatch.setattr(plot_mod, "_plot_noted", False)
    run = _rundir.RunDir(tmp_path)
    _write(run, _training_rows(3, (metrics_mod.EVAL_REWARD,)))
    assert not plot_mod.write_plot(run.metrics, run.plot, "title")
    assert not plot_mod.write_plot(run.metrics, run.plot, "title")
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "pip install 'brax-train[plot]'" in lines[0] and "matplotlib" in lines[0]
    assert not run.plot.exists()


def test_metrics_log_writes_strict_json(tmp_path: pathlib.Path) -> None:
    run = _rundir.RunDir(tmp_path)
    log = metrics_mod.MetricsLog(run.metrics, run.tensorboard)
    log.event("start", 0)
    log.report(5, {"training/sps": float("inf"), "eval/episode_reward": np.float32(1.5), "n": 3, "s": "x"})
    log.close()
    rows = [json.loads(line, parse_constant=lambda c: 1 / 0) for line in run.metrics.read_text().splitlines()]
    assert rows[1]["training/sps"] is None and rows[1]["eval/episode_reward"] == 1.5 and rows[1]["n"] == 3
    assert rows[1]["step"] == 5 and rows[1]["time"] > 0 and "s" not in rows[1]
    assert len(list(run.tensorboard.glob("events.out.tfevents.*"))) == 1
