"""The argument parser: subcommands, typed option values, and one-line usage errors.

This module imports nothing heavy (no jax), so `brax-train --help` and argument errors are fast.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from typing import Any, NoReturn

from brax_train.cli._errors import UsageError

PROG = "brax-train"
COMMANDS: tuple[str, ...] = ("train", "resume", "eval", "render", "envs", "doctor")
"""The subcommands, in help order."""
RENDER_SUFFIXES: tuple[str, ...] = (".html", ".gif", ".mp4")
"""Output formats of `brax-train render --out`."""
DEFAULT_ENV = "inverted_pendulum"
"""The environment `brax-train train` uses without `--env`."""


def _clean_choices(text: str) -> str:
    return ", ".join(c.strip().strip("'\"") for c in text.split(","))


def rewrite_message(message: str) -> str:
    """argparse's error text in our style: `--flag: what was expected, got 'value'`."""
    message = " ".join(message.split())
    if m := re.fullmatch(r"the following arguments are required: (.*)", message):
        names = [n.strip() for n in m.group(1).split(",")]
        if names == ["command"]:
            return f"missing command; accepted: {', '.join(COMMANDS)}"
        return f"{', '.join(names)}: missing (required)"
    if m := re.fullmatch(r"argument ([^:]+): (.*)", message):
        names, rest = m.group(1).split("/"), m.group(2)
        flag = max(names, key=len)  # `-n/--episodes` -> `--episodes`
        if c := re.fullmatch(r"invalid choice: (.*?) \(choose from (.*)\)", rest):
            if flag == "command":
                return f"unknown command {c.group(1)}; accepted: {_clean_choices(c.group(2))}"
            return f"{flag}: invalid choice {c.group(1)}; accepted: {_clean_choices(c.group(2))}"
        return f"{flag}: {rest}"
    return message


class Parser(argparse.ArgumentParser):
    """`ArgumentParser` whose errors raise `UsageError` (one line, exit 2) instead of printing usage."""

    def error(self, message: str) -> NoReturn:
        """Raise `UsageError` with argparse's message rewritten to name the flag first."""
        raise UsageError(rewrite_message(message))


def _number(text: str) -> float | int:
    s = text.strip().replace("_", "")
    try:
        return int(s)
    except ValueError:
        value = float(s)  # 1e6, 2.5e5: ValueError propagates for non-numbers
        if not math.isfinite(value) or not value.is_integer():
            raise ValueError(text) from None
        return int(value)


def positive_int(text: str) -> int:
    """An integer >= 1 (`1_000_000` and `1e6` are accepted)."""
    try:
        value = _number(text)
    except ValueError:
        value = 0
    if not isinstance(value, int) or value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def nonnegative_int(text: str) -> int:
    """An integer >= 0."""
    try:
        value = _number(text)
    except ValueError:
        value = -1
    if not isinstance(value, int) or value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def parse_value(text: str) -> Any:
    """A `--set` value: JSON when it parses (numbers, booleans, null, lists, objects), else a string.

    Python spellings `True`, `False` and `None` are accepted too; `1_000_000` is an integer.
    """
    try:
        return json.loads(text)
    except ValueError:
        pass
    python_words = {"True": True, "False": False, "None": None}
    if text in python_words:
        return python_words[text]
    if re.fullmatch(r"[+-]?\d+(_\d+)+", text):
        return int(text.replace("_", ""))
    return text


def set_item(text: str) -> tuple[str, Any]:
    """`KEY=VALUE` -> (key, parsed value)."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, parse_value(value.strip())


def _verbosity(p: argparse.ArgumentParser) -> None:
    p.add_argument("-v", "--verbose", action="count", default=0, help="log more (-v info, -vv debug)")


def _imports(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import a module (dotted name or .py path) first, e.g. one that registers custom environments",
    )


def build_parser() -> Parser:
    """The `brax-train` parser with its subcommands."""
    from brax_train.cli import _version

    parser = Parser(
        prog=PROG,
        description="Train, resume, evaluate and render PPO policies on brax-envs environments.",
        epilog="Run `brax-train COMMAND --help` for the options of a command.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="command", required=True)

    t = sub.add_parser(
        "train",
        help="train a policy into a new run directory",
        description="Train PPO on an environment. Settings, lowest to highest precedence: the "
        "environment's defaults, --config FILE, --set KEY=VALUE, then the dedicated flags.",
    )
    t.add_argument(
        "--env", metavar="NAME", help=f"environment name (default: {DEFAULT_ENV}); see `brax-train envs`"
    )
    t.add_argument("--backend", metavar="NAME", help="physics pipeline of the environment")
    t.add_argument("--num-timesteps", type=positive_int, metavar="N", help="environment steps to train for")
    t.add_argument("--num-envs", type=positive_int, metavar="N", help="parallel training environments")
    t.add_argument("--seed", type=nonnegative_int, metavar="N", help="random seed")
    t.add_argument("--run-dir", metavar="DIR", help="new run directory (default: runs/<env>-<time>)")
    t.add_argument(
        "--config", metavar="FILE", help="settings file (.json or .toml) with the keys --set takes"
    )
    t.add_argument(
        "--set",
        dest="settings",
        type=set_item,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting: a ppo.train keyword (num_evals=5, learning_rate=3e-4), env.<kwarg> for the "
        "environment, network_factory.<kwarg> for make_ppo_networks; VALUE is parsed as JSON when it can be",
    )
    t.add_argument("--no-replay", action="store_true", help="skip the HTML replay of the final policy")
    _imports(t)
    _verbosity(t)

    r = sub.add_parser(
        "resume",
        help="continue a run from its latest complete checkpoint",
        description="Continue a run from its latest complete checkpoint to its num_timesteps.",
    )
    r.add_argument("run_dir", metavar="DIR", help="run directory written by `brax-train train`")
    r.add_argument(
        "--num-timesteps", type=positive_int, metavar="N", help="train to N steps instead (extend a run)"
    )
    r.add_argument("--no-replay", action="store_true", help="skip the HTML replay of the final policy")
    _verbosity(r)

    e = sub.add_parser(
        "eval",
        help="evaluate a run's policy",
        description="Run the deterministic policy for N episodes and report the episode reward.",
    )
    e.add_argument("run_dir", metavar="DIR", help="run directory")
    e.add_argument(
        "-n", "--episodes", type=positive_int, default=10, metavar="N", help="episodes (default 10)"
    )
    e.add_argument(
        "--step", type=nonnegative_int, metavar="STEP", help="checkpoint step (default: the latest)"
    )
    e.add_argument("--seed", type=nonnegative_int, default=0, metavar="N", help="random seed (default 0)")
    _verbosity(e)

    d = sub.add_parser(
        "render",
        help="render one episode of a run's policy to .html, .gif or .mp4",
        description="Roll out the deterministic policy for one episode and write a replay.",
    )
    d.add_argument("run_dir", metavar="DIR", help="run directory")
    d.add_argument("--out", required=True, metavar="FILE", help="output: FILE.html, FILE.gif or FILE.mp4")
    d.add_argument(
        "--step", type=nonnegative_int, metavar="STEP", help="checkpoint step (default: the latest)"
    )
    d.add_argument("--seed", type=nonnegative_int, default=0, metavar="N", help="random seed (default 0)")
    d.add_argument(
        "--max-steps", type=positive_int, default=1000, metavar="N", help="at most N steps (default 1000)"
    )
    d.add_argument("--width", type=positive_int, default=320, metavar="PX", help="image width (default 320)")
    d.add_argument(
        "--height", type=positive_int, default=240, metavar="PX", help="image height (default 240)"
    )
    d.add_argument("--camera", metavar="NAME", help="MJCF camera name or index for images")
    _verbosity(d)

    v = sub.add_parser("envs", help="list environments with their sizes")
    v.add_argument("--json", action="store_true", help="one JSON object per line instead of a table")
    _imports(v)
    _verbosity(v)

    g = sub.add_parser("doctor", help="check the installation: versions, devices, precision, rendering")
    g.add_argument("--json", action="store_true", help="print the report as JSON")
    _verbosity(g)
    return parser


__all__ = [
    "COMMANDS",
    "DEFAULT_ENV",
    "PROG",
    "RENDER_SUFFIXES",
    "Parser",
    "build_parser",
    "nonnegative_int",
    "parse_value",
    "positive_int",
    "rewrite_message",
    "set_item",
]
