"""Dispatch to a command and turn expected failures into one line on stderr and an exit status."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence

from brax_train.cli._errors import CommandError, UsageError, one_line
from brax_train.cli._parser import PROG, build_parser


def _configure_logging(verbose: int) -> None:
    level = logging.WARNING if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger().setLevel(level)


def _commands() -> dict[str, Callable[[argparse.Namespace], int]]:
    from brax_train.cli import _commands, _doctor

    return {
        "train": _commands.cmd_train,
        "resume": _commands.cmd_resume,
        "eval": _commands.cmd_eval,
        "render": _commands.cmd_render,
        "envs": _commands.cmd_envs,
        "doctor": _doctor.cmd_doctor,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run `brax-train` with `argv` (default: `sys.argv[1:]`); returns the exit status."""
    try:
        args = build_parser().parse_args(argv)
        _configure_logging(args.verbose)
        return _commands()[args.command](args)
    except UsageError as e:
        print(f"{PROG}: error: {one_line(str(e))}", file=sys.stderr, flush=True)
        return 2
    except CommandError as e:
        print(f"{PROG}: error: {one_line(str(e))}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr, flush=True)
        return 130
    except BrokenPipeError:
        # `brax-train envs | head`: the reader left; not an error worth a traceback.
        sys.stderr.close()
        return 0
    except SystemExit as e:  # argparse's --help and --version
        return e.code if isinstance(e.code, int) else 0


__all__ = ["main"]
