"""Errors the CLI reports as one line on stderr instead of a traceback."""

from __future__ import annotations


class UsageError(Exception):
    """A bad command-line argument, option or setting: one line on stderr, exit status 2."""


class CommandError(Exception):
    """A command that could not do its work (its arguments were fine): one line, exit status 1."""


def one_line(message: str) -> str:
    """`message` folded onto a single line (multi-line library messages become `a; b; c`)."""
    parts = [p.strip().removeprefix("- ").strip() for p in message.splitlines()]
    parts = [p for p in parts if p]
    out = ""
    for p in parts:
        if not out:
            out = p
        elif out.endswith(":"):
            out = f"{out} {p}"
        else:
            out = f"{out}; {p}"
    return out


__all__ = ["CommandError", "UsageError", "one_line"]
