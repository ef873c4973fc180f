"""A minimal TensorBoard event-file writer for scalars (no TensorFlow or tensorboardX needed).

An event file is a sequence of TFRecords (`uint64 length`, masked CRC-32C of the length, the
payload, masked CRC-32C of the payload), each payload a serialized `tensorflow.Event` protobuf:
the first record carries `file_version = "brain.Event:2"`, the others `Summary` values with a tag
and a `simple_value`. The few protobuf fields needed are encoded by hand.
"""

from __future__ import annotations

import os
import pathlib
import socket
import struct
import time
from collections.abc import Mapping
from typing import BinaryIO


def _crc32c_table() -> tuple[int, ...]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1  # Castagnoli polynomial, reflected
        table.append(c)
    return tuple(table)


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli) of `data`."""
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    """The masked CRC TFRecord stores (a rotation plus a constant, so CRCs of CRCs stay strong)."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(payload: bytes) -> bytes:
    """`payload` framed as one TFRecord."""
    header = struct.pack("<Q", len(payload))
    return (
        header
        + struct.pack("<I", masked_crc32c(header))
        + payload
        + struct.pack("<I", masked_crc32c(payload))
    )


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # protobuf encodes negative int64 as 10-byte two's complement
    out = bytearray()
    while True:
        bits = value & 0x7F
        value >>= 7
        if value:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def _field_bytes(number: int, data: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def event(
    wall_time: float,
    step: int = 0,
    *,
    file_version: str | None = None,
    scalars: Mapping[str, float] | None = None,
) -> bytes:
    """A serialized `Event(wall_time, step, file_version | summary{value{tag, simple_value}...})`."""
    out = _varint(1 << 3 | 1) + struct.pack("<d", wall_time)  # field 1, fixed64 double
    if step:
        out += _varint(2 << 3 | 0) + _varint(step)  # field 2, varint int64
    if file_version is not None:
        out += _field_bytes(3, file_version.encode("utf-8"))
    if scalars:
        values = b""
        for tag, value in scalars.items():
            v = _field_bytes(1, tag.encode("utf-8")) + _varint(2 << 3 | 5) + struct.pack("<f", value)
            values += _field_bytes(1, v)  # Summary.value (repeated)
        out += _field_bytes(5, values)  # Event.summary
    return out


class EventWriter:
    """Appends scalar summaries to a new `events.out.tfevents.*` file in `logdir`."""

    def __init__(self, logdir: str | os.PathLike[str]) -> None:
        """Create `logdir` and a fresh event file in it (TensorBoard reads all files of a directory)."""
        self.logdir = pathlib.Path(logdir)
        self.logdir.mkdir(parents=True, exist_ok=True)
        now = time.time()
        name = f"events.out.tfevents.{int(now)}.{socket.gethostname()}.{os.getpid()}.brax-train"
        self.path = self.logdir / name
        self._file: BinaryIO | None = self.path.open("ab")
        self._write(event(now, file_version="brain.Event:2"))

    def _write(self, payload: bytes) -> None:
        if self._file is None:
            raise ValueError(f"{self.path} is closed")
        self._file.write(record(payload))
        # Flushed per event: a killed run keeps everything logged so far.
        self._file.flush()

    def scalars(self, step: int, values: Mapping[str, float], wall_time: float | None = None) -> None:
        """Log `values` (tag -> number) at `step`."""
        if values:
            self._write(event(time.time() if wall_time is None else wall_time, step, scalars=values))

    def close(self) -> None:
        """Close the file."""
        if self._file is not None:
            self._file.close()
            self._file = None


def read_records(path: str | os.PathLike[str]) -> list[bytes]:
    """The payloads of a TFRecord file, checking every CRC (for tests and tools)."""
    data = pathlib.Path(path).read_bytes()
    out, pos = [], 0
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


__all__ = ["EventWriter", "crc32c", "event", "masked_crc32c", "read_records", "record"]
