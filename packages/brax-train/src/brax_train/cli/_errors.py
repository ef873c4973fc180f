"""Errors the CLI reports as one line on stderr instead of a traceback."""

from __future__ import annotations


class UsageError(Exception):
    """A bad command-line argument, option or setting: one line on stderr, exit status 2."""


class CommandError(Exception):
    """A command that could not do its work (its arguments were fine): one line, exit status 1."""


def one_line(message: str) -> str:
    """`message` folded onto a single line (multi-line library messages become `a: b; c`)."""
    out = ""
    for part in filter(None, (p.strip().removeprefix("- ").strip() for p in message.splitlines())):
        out = part if not out else f"{out} {part}" if out.endswith(":") else f"{out}; {part}"
    return out


__all__ = ["CommandError", "UsageError", "one_line"]
