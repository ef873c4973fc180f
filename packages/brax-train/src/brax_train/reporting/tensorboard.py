"""TensorBoard scalars through tensorboardX: one event file per process that trains, one event per report."""

from __future__ import annotations

import itertools
import os
import pathlib
import struct
from collections.abc import Mapping
from typing import Any

_serial = itertools.count()


class EventWriter:
    """Appends scalar summaries to a new `events.out.tfevents.*` file in `logdir`."""

    def __init__(self, logdir: str | os.PathLike[str]) -> None:
        """Create `logdir` and a fresh event file in it (TensorBoard reads all files of a directory)."""
        from tensorboardX import FileWriter  # type: ignore[import-untyped]  # ships no type hints

        # tensorboardX names files by second and host and truncates a name that exists: make it unique,
        # the serial zero-padded so that a process's files of one second sort (as TensorBoard reads them)
        # in the order they were written.
        suffix = f".{os.getpid()}.{next(_serial):06d}.brax-train"
        # Flushed about every second: a killed run keeps (nearly) everything logged so far.
        self._writer: Any = FileWriter(str(logdir), flush_secs=1, filename_suffix=suffix)

    def scalars(self, step: int, values: Mapping[str, float], wall_time: float | None = None) -> None:
        """Log `values` (tag -> number) at `step`, as one event."""
        from tensorboardX.proto.summary_pb2 import Summary  # type: ignore[import-untyped]

        if values:
            summary = Summary(value=[Summary.Value(tag=k, simple_value=v) for k, v in values.items()])
            self._writer.add_summary(summary, int(step), wall_time)

    def purge_from(self, step: int) -> None:
        """Hide events at `step` and later from earlier files (a resumed run logs them again)."""
        from tensorboardX.proto.event_pb2 import Event, SessionLog  # type: ignore[import-untyped]

        # What SummaryWriter(purge_step=...) writes: TensorBoard drops the orphaned steps on SessionLog.START.
        self._writer.add_event(Event(session_log=SessionLog(status=SessionLog.START)), int(step))

    def close(self) -> None:
        """Write what is queued and close the file."""
        self._writer.close()


def read_records(path: str | os.PathLike[str]) -> list[bytes]:
    """The payloads of a TFRecord file, checking every CRC (for tests and tools)."""
    from tensorboardX.record_writer import masked_crc32c  # type: ignore[import-untyped]

    data, pos = pathlib.Path(path).read_bytes(), 0
    out: list[bytes] = []
    while pos < len(data):
        header = data[pos : pos + 8]
        (length,) = struct.unpack("<Q", header)
        (crc,) = struct.unpack("<I", data[pos + 8 : pos + 12])
        if crc != masked_crc32c(header):
            raise ValueError(f"{path}: bad length CRC at byte {pos}")
        payload = data[pos + 12 : pos + 12 + length]
        (crc,) = struct.unpack("<I", data[pos + 12 + length : pos + 16 + length])
        if len(payload) != length or crc != masked_crc32c(payload):
            raise ValueError(f"{path}: bad payload CRC at byte {pos}")
        out.append(payload)
        pos += 16 + length
    return out


__all__ = ["EventWriter", "read_records"]
