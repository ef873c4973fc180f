"""The progress display: plain `progress:` lines off a terminal, a live rich bar on one."""

from __future__ import annotations

import io

import pytest

from brax_train.reporting.progress import Progress, format_duration, format_number


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_plain_lines_when_not_a_tty() -> None:
    out, clock = io.StringIO(), _Clock()
    p = Progress(1000, out, clock=clock)  # a StringIO is no terminal
    assert not p.tty
    p.update(0, {"eval/episode_reward": 5.0})
    clock.t += 10
    p.update(500, {"episode/sum_reward": 7.0})
    p.close()
    lines = out.getvalue().splitlines()
    assert lines == [
        "progress:   0% 0/1k steps | ? steps/s | reward 5 | ETA ?",
        "progress:  50% 500/1k steps | 50 steps/s | reward 5 | ETA 10s",
    ]


def test_live_bar_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.setenv("TERM", "xterm-256color")
    out, clock = io.StringIO(), _Clock()
    p = Progress(2_000_000, out, tty=True, clock=clock, start_step=1_000_000)
    clock.t += 100
    p.update(1_500_000, {"eval/episode_reward": 900.5})
    clock.t += 100
    p.update(2_000_000, {"episode/sum_reward": 1.0})
    p.close()
    p.close()  # idempotent: _commands closes on interrupt and again in `finally`
    text = out.getvalue()
    assert "progress:" not in text and "\x1b[" in text  # drawn in place with terminal control codes
    assert "━" in text  # rich's bar
    assert "75% 1.5M/2M steps | 5k steps/s | reward 900.5 | ETA 1m40s" in text
    assert text.rstrip("\n").endswith("\x1b[?25h")  # cursor shown again
    last = text.rsplit("\r", 1)[-1]
    assert "100% 2M/2M steps | 5k steps/s | reward 900.5 | ETA 0s" in last


def test_formats() -> None:
    assert format_duration(42) == "42s"
    assert format_duration(187) == "3m07s"
    assert format_duration(3720) == "1h02m"
    assert format_duration(float("nan")) == "?"
    assert [format_number(v) for v in (1500, 2_000_000, 0.25, 0, -950)] == ["1.5k", "2M", "0.25", "0", "-950"]


def test_evaluation_reward_wins_once_seen() -> None:
    p = Progress(100, io.StringIO(), tty=False, clock=_Clock())
    p.update(10, {"episode/sum_reward": 3.0})
    assert p.reward == 3.0
    p.update(20, {"eval/episode_reward": 900.0, "episode/sum_reward": 4.0})
    p.update(30, {"episode/sum_reward": 5.0})
    assert p.reward == 900.0
