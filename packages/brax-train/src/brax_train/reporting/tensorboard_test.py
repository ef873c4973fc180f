"""TensorBoard event files written through tensorboardX, read back with its Event protobuf."""

from __future__ import annotations

import pathlib
import struct
from typing import Any

import pytest
from tensorboardX.proto.event_pb2 import Event, SessionLog  # type: ignore[import-untyped]

from brax_train.cli import _rundir
from brax_train.reporting import metrics as metrics_mod
from brax_train.reporting.tensorboard import EventWriter, read_records


def _events(path: pathlib.Path) -> list[Any]:
    """Events of a TFRecord file: u64 length, u32 CRC, payload, u32 CRC (CRCs checked by read_records)."""
    data, pos, out = path.read_bytes(), 0, []
    while pos < len(data):
        (n,) = struct.unpack("<Q", data[pos : pos + 8])
        out.append(Event.FromString(data[pos + 12 : pos + 12 + n]))
        pos += 16 + n
    return out


def _scalars(event: Any) -> list[tuple[str, float]]:
    return [(v.tag, v.simple_value) for v in event.summary.value]


def test_event_file_holds_the_scalars(tmp_path: pathlib.Path) -> None:
    w = EventWriter(tmp_path / "tb")
    w.scalars(0, {"a": 1.5})
    w.scalars(2**40, {"eval/episode_reward": -3.25, "b": 7.0}, wall_time=123.0)
    w.scalars(3, {})  # nothing to log: no event
    w.close()
    (path,) = (tmp_path / "tb").glob("events.out.tfevents.*")
    first, second, third = _events(path)
    assert first.file_version == "brain.Event:2" and first.wall_time > 0
    assert second.step == 0 and _scalars(second) == [("a", 1.5)]
    assert third.step == 2**40 and third.wall_time == 123.0
    assert _scalars(third) == [("eval/episode_reward", -3.25), ("b", 7.0)]
    assert len(read_records(path)) == 3


def test_each_process_run_gets_its_own_file(tmp_path: pathlib.Path) -> None:
    for _ in range(2):
        EventWriter(tmp_path).close()  # within the same second: distinct names, nothing truncated
    assert len(list(tmp_path.glob("events.out.tfevents.*"))) == 2


def test_resume_purges_the_lost_steps(tmp_path: pathlib.Path) -> None:
    run = _rundir.RunDir(tmp_path)
    for name, start, steps in (("start", 0, (0, 10, 20)), ("resume", 10, (10, 20))):
        log = metrics_mod.MetricsLog(run.metrics, run.tensorboard)
        log.event(name, start)
        for s in steps:
            log.report(s, {"eval/episode_reward": float(s), "episode/sum_reward": 1.0})
        log.close()
    first, second = (_events(p) for p in sorted(run.tensorboard.glob("events.out.tfevents.*")))
    assert [e.step for e in first[1:]] == [0, 10, 20]
    assert _scalars(first[1]) == [("eval/episode_reward", 0.0), ("episode/sum_reward", 1.0)]
    # The resumed file starts with SessionLog.START at the resume step: TensorBoard drops steps >= 10
    # of the earlier file (what tensorboardX's SummaryWriter(purge_step=10) writes).
    assert second[1].session_log.status == SessionLog.START and second[1].step == 10
    assert [e.step for e in second[2:]] == [10, 20]


def test_corruption_is_detected(tmp_path: pathlib.Path) -> None:
    w = EventWriter(tmp_path)
    w.scalars(1, {"a": 1.0})
    w.close()
    (path,) = tmp_path.glob("events.out.tfevents.*")
    data = bytearray(path.read_bytes())
    data[-6] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="bad payload CRC"):
        read_records(path)
