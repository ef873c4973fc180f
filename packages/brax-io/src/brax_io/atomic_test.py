"""Tests for the public `brax_io.write_atomic`: all-or-nothing replacement, cleanup, permissions."""

import os
import pathlib
import stat
from collections.abc import Iterator
from typing import IO

import pytest

import brax_io


@pytest.fixture
def umask() -> Iterator[None]:
    """Restores the process umask that a test changes."""
    old = os.umask(0o022)
    os.umask(old)
    try:
        yield
    finally:
        os.umask(old)


def test_writes_and_replaces(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "out.bin"
    brax_io.write_atomic(path, lambda f: f.write(b"first"))
    assert path.read_bytes() == b"first"
    brax_io.write_atomic(str(path), lambda f: f.write(b"second, longer"))
    assert path.read_bytes() == b"second, longer"
    assert os.listdir(tmp_path) == ["out.bin"]


def test_temp_file_is_written_next_to_the_target(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "out.bin"
    seen: list[str] = []

    def write(f: IO[bytes]) -> None:
        seen.extend(os.listdir(tmp_path))
        f.write(b"x")

    brax_io.write_atomic(path, write)
    # Same directory, so the final rename never crosses a file system; hidden, so globs skip it.
    assert len(seen) == 1 and seen[0].startswith(".out.bin.") and seen[0].endswith(".tmp")


@pytest.mark.parametrize("error", [OSError("disk full"), KeyboardInterrupt()])
def test_failure_mid_write_keeps_old_file_and_leaves_no_temp_file(
    tmp_path: pathlib.Path, error: BaseException
) -> None:
    path = tmp_path / "out.bin"
    path.write_bytes(b"old contents")

    def broken(f: IO[bytes]) -> None:
        f.write(b"partial new contents")
        f.flush()
        raise error

    with pytest.raises(type(error)):
        brax_io.write_atomic(path, broken)
    assert path.read_bytes() == b"old contents"
    assert os.listdir(tmp_path) == ["out.bin"]


def test_failure_without_old_file_creates_nothing(tmp_path: pathlib.Path) -> None:
    def broken(f: IO[bytes]) -> None:
        f.write(b"partial")
        raise ValueError("bad data")

    with pytest.raises(ValueError, match="bad data"):
        brax_io.write_atomic(tmp_path / "new.bin", broken)
    assert os.listdir(tmp_path) == []


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
@pytest.mark.usefixtures("umask")
def test_permissions_follow_umask(tmp_path: pathlib.Path, mask: int) -> None:
    os.umask(mask)
    path = tmp_path / "out.bin"
    brax_io.write_atomic(path, lambda f: f.write(b"x"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask  # what open(path, "wb") would give
    # Replacing a file gives the new one the same umask-derived mode, not the temp file's 0600.
    path.chmod(0o600)
    brax_io.write_atomic(path, lambda f: f.write(b"y"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask
