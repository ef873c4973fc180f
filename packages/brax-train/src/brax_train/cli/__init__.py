"""The `brax-train` command line: `train`, `resume`, `eval`, `render`, `envs`, `doctor`.

`main(argv)` is the console-script entry point; it returns the exit status (0 success, 1 a
command failed, 2 bad arguments, 130 interrupted). Heavy modules (jax, the trainer) are imported
only by the commands that need them.
"""

from __future__ import annotations

from brax_train.cli._main import main


def _version() -> str:
    """The installed brax-train version."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("brax-train")
    except PackageNotFoundError:  # running from a source tree without an install
        return "0.0.0"


__all__ = ["main"]
