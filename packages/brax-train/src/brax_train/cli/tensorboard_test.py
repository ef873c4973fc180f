"""TensorBoard event files: CRC-32C, TFRecord framing, and the Event protobuf decoded independently."""

from __future__ import annotations

import importlib
import pathlib
import struct
from typing import Any

import pytest

from brax_train.cli._tensorboard import EventWriter, crc32c, masked_crc32c, read_records, record


def test_crc32c_known_values() -> None:
    assert crc32c(b"") == 0
    assert crc32c(b"123456789") == 0xE3069283  # the standard CRC-32C check value
    assert crc32c(bytes(32)) == 0x8A9136AA  # RFC 3720 test vector: 32 bytes of zeros


def test_record_framing() -> None:
    rec = record(b"abc")
    assert struct.unpack("<Q", rec[:8]) == (3,)
    assert struct.unpack("<I", rec[8:12]) == (masked_crc32c(rec[:8]),)
    assert rec[12:15] == b"abc"
    assert struct.unpack("<I", rec[15:]) == (masked_crc32c(b"abc"),)


def _event_class() -> Any:
    """The Event/Summary messages of tensorflow's event.proto (fields we write), built at run time."""
    descriptor_pb2 = importlib.import_module("google.protobuf.descriptor_pb2")
    descriptor_pool = importlib.import_module("google.protobuf.descriptor_pool")
    message_factory = importlib.import_module("google.protobuf.message_factory")

    f = descriptor_pb2.FileDescriptorProto(
        name="brax_train_test_event.proto", package="tbtest", syntax="proto3"
    )
    T = descriptor_pb2.FieldDescriptorProto
    value = f.message_type.add(name="Value")
    value.field.add(name="tag", number=1, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    value.field.add(name="simple_value", number=2, type=T.TYPE_FLOAT, label=T.LABEL_OPTIONAL)
    summary = f.message_type.add(name="Summary")
    summary.field.add(
        name="value", number=1, type=T.TYPE_MESSAGE, type_name=".tbtest.Value", label=T.LABEL_REPEATED
    )
    event = f.message_type.add(name="Event")
    event.field.add(name="wall_time", number=1, type=T.TYPE_DOUBLE, label=T.LABEL_OPTIONAL)
    event.field.add(name="step", number=2, type=T.TYPE_INT64, label=T.LABEL_OPTIONAL)
    event.field.add(name="file_version", number=3, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    event.field.add(
        name="summary", number=5, type=T.TYPE_MESSAGE, type_name=".tbtest.Summary", label=T.LABEL_OPTIONAL
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tbtest.Event"))


def test_event_file_decodes_as_tensorflow_events(tmp_path: pathlib.Path) -> None:
    w = EventWriter(tmp_path / "tb")
    w.scalars(0, {"a": 1.5})
    w.scalars(2**40, {"eval/episode_reward": -3.25, "b": 7.0}, wall_time=123.0)
    w.close()
    files = list((tmp_path / "tb").glob("events.out.tfevents.*"))
    assert files == [w.path]
    payloads = read_records(w.path)
    assert len(payloads) == 3
    Event = _event_class()
    first, second, third = (Event.FromString(p) for p in payloads)
    assert first.file_version == "brain.Event:2" and first.wall_time > 0
    assert second.step == 0 and [(v.tag, v.simple_value) for v in second.summary.value] == [("a", 1.5)]
    assert third.step == 2**40 and third.wall_time == 123.0
    assert [(v.tag, v.simple_value) for v in third.summary.value] == [
        ("eval/episode_reward", -3.25),
        ("b", 7.0),
    ]


def test_corruption_is_detected(tmp_path: pathlib.Path) -> None:
    w = EventWriter(tmp_path)
    w.scalars(1, {"a": 1.0})
    w.close()
    data = bytearray(w.path.read_bytes())
    data[-6] ^= 0xFF
    w.path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="bad payload CRC"):
        read_records(w.path)
