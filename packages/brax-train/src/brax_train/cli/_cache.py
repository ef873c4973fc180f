"""The persistent XLA compilation cache of the commands that compile (train, resume, eval, render).

A run's programs (environment reset, training chunk, evaluation rollout) take most of a short run's
first minute to compile, and the same environment and settings compile to the same programs: JAX's
persistent cache keeps them on disk, keyed by the program, the compile options, XLA's flags and the
JAX/jaxlib versions, so a second run with other seeds or another run directory loads them instead.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import pathlib
from collections.abc import Iterator
from typing import Any

import jax

from brax_train.cli._errors import UsageError, one_line

OFF = "off"
"""The `--compile-cache` value that turns the cache off."""
MAX_BYTES = 2 << 30
"""Size bound of a cache this module turns on (least recently used entries go first)."""
_HIT = "/jax/compilation_cache/cache_hits"
_SAVED = "/jax/compilation_cache/compile_time_saved_sec"

logger = logging.getLogger(__name__)


def setting_of(name: str) -> Any:
    """The current value of JAX config option `name` (e.g. `jax_compilation_cache_dir`)."""
    return getattr(jax.config, name)


def default_dir() -> pathlib.Path:
    """`$XDG_CACHE_HOME/brax-train/xla` (`~/.cache/brax-train/xla` without it)."""
    base = os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache"
    return pathlib.Path(base) / "brax-train" / "xla"


def describe() -> dict[str, Any]:
    """Where `train`/`resume`/`eval`/`render` keep compiled programs by default (JAX's own setting,
    else `default_dir()`), how many are there and their bytes (for `brax-train doctor`)."""
    path = pathlib.Path(setting_of("jax_compilation_cache_dir") or default_dir())
    entries = sorted(path.glob("*-cache")) if path.is_dir() else []
    return {"dir": str(path), "programs": len(entries), "bytes": sum(e.stat().st_size for e in entries)}


def configure(setting: str | None) -> pathlib.Path | None:
    """Point JAX's persistent compilation cache at `setting` (a directory, `off`, or None: JAX's own
    setting when the user made one, e.g. `JAX_COMPILATION_CACHE_DIR` or `JAX_ENABLE_COMPILATION_CACHE=0`,
    else `default_dir()`); the directory in use, or None. Call before the command's first compile.

    An explicit directory that cannot be used is a `UsageError` naming the flag; the default one is
    skipped with a warning (a read-only home must not stop a run).
    """
    if setting == OFF:
        jax.config.update("jax_enable_compilation_cache", False)
        return None
    own = setting_of("jax_compilation_cache_dir")
    if setting is None and not setting_of("jax_enable_compilation_cache"):
        return None
    if setting is None and own:
        return pathlib.Path(own)
    path = pathlib.Path(setting).expanduser() if setting is not None else default_dir()
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".write-test-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError as e:
        if setting is not None:
            raise UsageError(f"--compile-cache: cannot use {setting!r}: {one_line(str(e))}") from None
        logger.warning("no compile cache: %s (%s); pass --compile-cache DIR or off", path, e)
        return None
    jax.config.update("jax_enable_compilation_cache", True)
    jax.config.update("jax_compilation_cache_dir", str(path))
    if setting_of("jax_compilation_cache_max_size") == -1:  # unbounded unless the user said otherwise
        jax.config.update("jax_compilation_cache_max_size", MAX_BYTES)
    return path


@dataclasses.dataclass
class Loads:
    """Programs loaded from the cache and the compile seconds that saved (JAX's estimate)."""

    programs: int = 0
    saved_s: float = 0.0

    def summary(self, path: pathlib.Path | None) -> str | None:
        """One line on what the cache at `path` saved, or None when it loaded nothing."""
        if path is None or not self.programs:
            return None
        n = f"{self.programs} program{'s' if self.programs != 1 else ''}"
        return f"compile cache {path}: {n} loaded, ~{self.saved_s:.0f} s of compiling saved"


@contextlib.contextmanager
def counting() -> Iterator[Loads]:
    """The `Loads` of the compiles run while inside."""
    loads = Loads()

    def on_event(event: str, **_: str | int) -> None:
        if event == _HIT:
            loads.programs += 1

    def on_duration(event: str, duration_secs: float, **_: str | int) -> None:
        if event == _SAVED:
            loads.saved_s += max(duration_secs, 0.0)

    jax.monitoring.register_event_listener(on_event)
    jax.monitoring.register_event_duration_secs_listener(on_duration)
    try:
        yield loads
    finally:
        jax.monitoring.unregister_event_listener(on_event)
        jax.monitoring.unregister_event_duration_listener(on_duration)
