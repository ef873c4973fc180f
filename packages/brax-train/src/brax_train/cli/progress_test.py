"""The progress display: an in-place line on a terminal, log lines otherwise."""

from __future__ import annotations

import io

from brax_train.cli._progress import Progress, format_duration


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_plain_lines_when_not_a_tty() -> None:
    out, clock = io.StringIO(), _Clock()
    p = Progress(1000, out, tty=False, clock=clock)
    p.update(0, {"eval/episode_reward": 5.0})
    clock.t += 10
    p.update(500, {"episode/sum_reward": 7.0})
    p.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "progress:   0% 0/1k steps | ? steps/s | reward 5 | ETA ?"
    assert lines[1] == "progress:  50% 500/1k steps | 50 steps/s | reward 5 | ETA 10s"
    assert len(lines) == 2


def test_one_updating_line_on_a_tty() -> None:
    out, clock = io.StringIO(), _Clock()
    p = Progress(2_000_000, out, tty=True, clock=clock, start_step=1_000_000)
    clock.t += 100
    p.update(1_500_000, {"eval/episode_reward": 900.5})
    p.close()
    text = out.getvalue()
    assert text.startswith("\r\x1b[K") and text.endswith("\n") and text.count("\n") == 1
    assert "75% 1.5M/2M steps | 5k steps/s | reward 900.5 | ETA 1m40s" in text


def test_durations() -> None:
    assert format_duration(42) == "42s"
    assert format_duration(187) == "3m07s"
    assert format_duration(3720) == "1h02m"
    assert format_duration(float("nan")) == "?"


def test_evaluation_reward_wins_once_seen() -> None:
    out = io.StringIO()
    p = Progress(100, out, tty=False, clock=_Clock())
    p.update(10, {"episode/sum_reward": 3.0})
    assert p.reward == 3.0
    p.update(20, {"eval/episode_reward": 900.0, "episode/sum_reward": 4.0})
    p.update(30, {"episode/sum_reward": 5.0})
    assert p.reward == 900.0
