"""`--compile-cache`: where JAX's persistent compilation cache goes, and the line on what it saved."""

from __future__ import annotations

import logging
import pathlib
from collections.abc import Iterator

import jax
import pytest

from brax_train.cli import _cache
from brax_train.cli._errors import UsageError
from brax_train.cli._parser import Eval, Render, Resume, Train, parse

_KEYS = ("jax_enable_compilation_cache", "jax_compilation_cache_dir", "jax_compilation_cache_max_size")


@pytest.fixture(autouse=True)
def _restore_config() -> Iterator[None]:
    """Each test changes JAX's process-wide cache settings; put the suite's back afterwards."""
    saved = {k: _cache.setting_of(k) for k in _KEYS}
    yield
    for k, v in saved.items():
        jax.config.update(k, v)


def test_flag_on_the_commands_that_compile(tmp_path: pathlib.Path) -> None:
    train = parse(["train", "--compile-cache", str(tmp_path)])
    assert isinstance(train, Train) and train.compile_cache == str(tmp_path)
    resume = parse(["resume", "runs/x", "--compile-cache", "off"])
    assert isinstance(resume, Resume) and resume.compile_cache == _cache.OFF
    assert isinstance(parse(["eval", "runs/x"]), Eval)
    render = parse(["render", "runs/x", "--out", "a.gif"])
    assert isinstance(render, Render) and render.compile_cache is None


def test_explicit_directory_is_created_and_bounded(tmp_path: pathlib.Path) -> None:
    jax.config.update("jax_compilation_cache_max_size", -1)
    where = tmp_path / "a" / "b"
    assert _cache.configure(str(where)) == where
    assert where.is_dir() and list(where.iterdir()) == []  # the write probe leaves nothing
    assert _cache.setting_of("jax_compilation_cache_dir") == str(where)
    assert _cache.setting_of("jax_enable_compilation_cache") is True
    assert _cache.setting_of("jax_compilation_cache_max_size") == _cache.MAX_BYTES


def test_users_size_bound_is_kept(tmp_path: pathlib.Path) -> None:
    jax.config.update("jax_compilation_cache_max_size", 12345)
    _cache.configure(str(tmp_path))
    assert _cache.setting_of("jax_compilation_cache_max_size") == 12345


def test_off_disables_jax_cache(tmp_path: pathlib.Path) -> None:
    assert _cache.configure("off") is None
    assert _cache.setting_of("jax_enable_compilation_cache") is False
    assert _cache.configure(None) is None  # the user's own "off" (JAX_ENABLE_COMPILATION_CACHE=0) holds
    assert _cache.setting_of("jax_enable_compilation_cache") is False
    assert _cache.configure(str(tmp_path)) == tmp_path  # unless a directory is named
    assert _cache.setting_of("jax_enable_compilation_cache") is True


def test_default_is_jax_own_setting_then_xdg(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jax.config.update("jax_compilation_cache_dir", str(tmp_path / "users"))
    assert _cache.configure(None) == tmp_path / "users"  # e.g. JAX_COMPILATION_CACHE_DIR
    jax.config.update("jax_compilation_cache_dir", None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert _cache.default_dir() == tmp_path / "xdg" / "brax-train" / "xla"
    assert _cache.configure(None) == _cache.default_dir()
    assert _cache.setting_of("jax_compilation_cache_dir") == str(_cache.default_dir())


def test_unusable_directory(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
                            caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(UsageError, match=r"^--compile-cache: cannot use '.*file/xla': "):
        _cache.configure(str(blocker / "xla"))
    jax.config.update("jax_compilation_cache_dir", None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # the default: a warning, and no cache
    with caplog.at_level(logging.WARNING):
        assert _cache.configure(None) is None
    assert "no compile cache" in caplog.text and "--compile-cache" in caplog.text
    assert _cache.setting_of("jax_compilation_cache_dir") is None


def test_counting_sees_only_cache_loads_inside(tmp_path: pathlib.Path) -> None:
    with _cache.counting() as loads:
        jax.monitoring.record_event(_cache._HIT)
        jax.monitoring.record_event("/jax/compilation_cache/cache_misses")
        jax.monitoring.record_event_duration_secs(_cache._SAVED, 2.6)
        jax.monitoring.record_event(_cache._HIT)
        jax.monitoring.record_event_duration_secs(_cache._SAVED, 1.0)
    jax.monitoring.record_event(_cache._HIT)  # after the block: not counted
    assert loads.programs == 2 and loads.saved_s == pytest.approx(3.6)
    assert loads.summary(tmp_path) == f"compile cache {tmp_path}: 2 programs loaded, ~4 s of compiling saved"
    assert loads.summary(None) is None
    assert _cache.Loads().summary(tmp_path) is None


def test_doctor_describes_the_cache(tmp_path: pathlib.Path) -> None:
    from brax_train.cli._doctor import _cache_text

    jax.config.update("jax_compilation_cache_dir", str(tmp_path))
    assert _cache.describe() == {"dir": str(tmp_path), "programs": 0, "bytes": 0}
    (tmp_path / "jit_chunk-abc-cache").write_bytes(b"x" * 1500)
    (tmp_path / "jit_chunk-abc-atime").write_bytes(b"12")  # JAX's access times: not programs
    d = _cache.describe()
    assert d == {"dir": str(tmp_path), "programs": 1, "bytes": 1500}
    assert _cache_text(d) == f"{tmp_path} (1 program, 0.0 MB; --compile-cache)"
