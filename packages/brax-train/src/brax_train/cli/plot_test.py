"""The reward plot: PNG encoding, ticks, number formats, and metrics.jsonl reading across a resume."""

from __future__ import annotations

import json
import pathlib
import struct
import zlib

import numpy as np

from brax_train.cli import _plot, _rundir


def _decode_png(data: bytes) -> np.ndarray:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, size = 8, b"", (0, 0)
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        (crc,) = struct.unpack(">I", data[pos + 8 + n : pos + 12 + n])
        assert crc == zlib.crc32(kind + body)
        if kind == b"IHDR":
            w, h, depth, color = struct.unpack(">IIBB", body[:10])
            assert (depth, color) == (8, 2)
            size = (h, w)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(size[0], size[1] * 3 + 1)
    assert np.all(raw[:, 0] == 0)
    return raw[:, 1:].reshape(size[0], size[1], 3)


def test_png_round_trip() -> None:
    img = np.random.default_rng(0).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    assert np.array_equal(_decode_png(_plot.encode_png(img)), img)


def test_ticks_and_numbers() -> None:
    assert _plot.nice_ticks(0, 1_000_000) == [0.0, 200_000.0, 400_000.0, 600_000.0, 800_000.0, 1_000_000.0]
    t = _plot.nice_ticks(-114.2, -99.9)
    assert t[0] <= -114.2 and t[-1] >= -99.9 and len(t) <= 8
    assert _plot.nice_ticks(5.0, 5.0)[0] <= 4.0
    assert _plot.format_number(1500) == "1.5k"
    assert _plot.format_number(2_000_000) == "2M"
    assert _plot.format_number(0.25) == "0.25"
    assert _plot.format_number(0) == "0"
    assert _plot.format_number(-950) == "-950"


def test_chart_draws_lines_in_their_colours() -> None:
    c = _plot.line_chart([_plot.Series("eval", [0, 1, 2], [0.0, 5.0, 3.0], _plot.BLUE)], "t", "x", "y")
    px = c.pixels
    assert px.shape == (480, 800, 3)
    assert np.any(np.all(px == _plot.BLUE, axis=-1))
    assert _decode_png(c.png()).shape == (480, 800, 3)


def test_metrics_after_resume_drop_lost_reports(tmp_path: pathlib.Path) -> None:
    run = _rundir.RunDir(tmp_path)
    lines = [
        {"event": "start", "step": 0, "time": 0},
        {"step": 0, "time": 0, "eval/episode_reward": 1.0},
        {"step": 10, "time": 1, "eval/episode_reward": 2.0},
        {"step": 20, "time": 2, "eval/episode_reward": 9.0},  # after the last checkpoint: lost by a kill
        {"event": "resume", "step": 10, "time": 3},
        {"step": 10, "time": 3, "eval/episode_reward": 2.5},
        {"step": 20, "time": 4, "eval/episode_reward": 3.0, "episode/sum_reward": 4.0},
    ]
    run.metrics.write_text(
        "".join(json.dumps(x) + "\n" for x in lines) + '{"step": 30, "ti'
    )  # torn last line
    reports = _rundir.read_metrics(run.metrics)
    assert [r["step"] for r in reports] == [0, 10, 10, 20]
    assert _rundir.reward_series(reports, _rundir.EVAL_REWARD) == ([0.0, 10.0, 20.0], [1.0, 2.5, 3.0])
    assert _rundir.write_plot(run, "title")
    assert _decode_png(run.plot.read_bytes()).shape == (480, 800, 3)


def test_no_plot_without_rewards(tmp_path: pathlib.Path) -> None:
    assert not _rundir.write_plot(_rundir.RunDir(tmp_path), "title")
    assert not (tmp_path / "reward.png").exists()


def test_metrics_log_writes_strict_json(tmp_path: pathlib.Path) -> None:
    run = _rundir.RunDir(tmp_path)
    log = _rundir.MetricsLog(run)
    log.event("start", 0)
    log.report(5, {"training/sps": float("inf"), "eval/episode_reward": np.float32(1.5), "n": 3})
    log.close()
    rows = [json.loads(line, parse_constant=lambda c: 1 / 0) for line in run.metrics.read_text().splitlines()]
    assert rows[1]["training/sps"] is None and rows[1]["eval/episode_reward"] == 1.5 and rows[1]["n"] == 3
    assert rows[1]["step"] == 5 and rows[1]["time"] > 0
    assert len(list(run.tensorboard.glob("events.out.tfevents.*"))) == 1
