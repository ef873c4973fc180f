"""The `brax-train` command line: train, resume, eval, render, envs, doctor, export, reproduce.

`main(argv)` is the console-script entry point; it returns the exit status (0 success, 1 a
command failed, 2 bad arguments, 130 interrupted).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

from brax_train._versions import installed_version
from brax_train.cli._errors import CommandError, UsageError, one_line
from brax_train.cli._parser import PROG, CacheFlag, Command, parse


def _run(command: Command) -> int:
    from brax_train.cli._commands import COMMANDS

    level = [logging.WARNING, logging.INFO, logging.DEBUG][min(command.verbose, 2)]
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger().setLevel(level)
    if not isinstance(command, CacheFlag):
        return COMMANDS[type(command)](command)
    from brax_train.cli import _cache

    path = _cache.configure(command.compile_cache)
    with _cache.counting() as loads:
        status = COMMANDS[type(command)](command)
    if line := loads.summary(path):
        print(f"{PROG}: {line}", file=sys.stderr, flush=True)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    """Run `brax-train` with `argv` (default: `sys.argv[1:]`); returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args[:1] == ["--version"]:
            print(f"{PROG} {installed_version('brax-train') or '0.0.0'}", flush=True)
            return 0
        return _run(parse(args))
    except (UsageError, CommandError) as e:
        print(f"{PROG}: error: {one_line(str(e))}", file=sys.stderr, flush=True)
        return 2 if isinstance(e, UsageError) else 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr, flush=True)
        return 130
    except BrokenPipeError:
        # `brax-train envs | head`: the reader left; not an error worth a traceback.
        sys.stderr.close()
        return 0
    except SystemExit as e:  # tyro's --help
        return e.code if isinstance(e.code, int) else 0


__all__ = ["main"]
