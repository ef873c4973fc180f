"""Render tools/bench/results.jsonl into one current table per kind of bench row.

Keeps the newest row (by `utc`, then by line) per key: the bench, the fields that identify a
measurement of that kind (`TABLES`) and the machine. Writes the tables between
`<!-- bench-results:begin -->` and `<!-- bench-results:end -->` in README.md and as the body of
tools/bench/RESULTS.md. `--check` writes nothing and exits 1, naming each stale file, when either
differs from what would be written. Run with `hatch run bench-render [--check]`.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import results_path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
"""The README whose `## Benchmarks` section holds the tables between `BEGIN` and `END`."""
RESULTS_MD = ROOT / "tools/bench/RESULTS.md"
"""The page that is the header plus the tables."""
BEGIN = "<!-- bench-results:begin -->"
"""Marker line after which README.md's tables start."""
END = "<!-- bench-results:end -->"
"""Marker line before which README.md's tables end."""
HEADER = """\
# Benchmark results

The newest result per benchmark, backend or setting, and machine: `tools/bench/render.py` writes this page
(and README.md's tables) from `tools/bench/results.jsonl`, to which each bench script appends the rows it
prints when run with `--record` (`hatch run bench:physics --record`, then `hatch run bench-render`).
Rows without a commit were taken from the dated notebook, `archive/NOTEBOOK-2026-11.md`, which also
holds the reasoning behind the numbers, the runs' settings and machine load.
"""
"""The lines above RESULTS.md's tables."""
MISSING = "—"
"""A cell with no value."""

Row = Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class Column:
    """A table column: its title and the row field it shows (dotted into nested objects, `*` over a list)."""

    title: str
    field: str


@dataclasses.dataclass(frozen=True)
class Table:
    """The rows of one `bench` (of `kind`, or holding any of `any_of`) and the columns that show them."""

    title: str
    bench: str
    keys: tuple[Column, ...]
    values: tuple[Column, ...]
    kind: str | None = None
    any_of: tuple[str, ...] = ()

    def holds(self, row: Row) -> bool:
        """Whether `row` belongs in this table (the first table of `TABLES` that holds it takes it)."""
        return (row.get("bench") == self.bench and (self.kind is None or row.get("kind") == self.kind)
                and (not self.any_of or any(f in row for f in self.any_of)))


def _c(title: str, field: str | None = None) -> Column:
    """A column titled `title` showing field `field` (default: the title)."""
    return Column(title, field or title)


TABLES: tuple[Table, ...] = (
    Table("physics: steps/s per model, backend and batch (`bench:physics`)", "physics",
          (_c("model"), _c("batch"), _c("backend")),
          (_c("env steps/s", "env_steps_per_s"), _c("ours/this", "ours_over_this"),
           _c("compile s", "compile_s"))),
    Table("envs: dm_control solver options (`bench:envs --solvers`)", "envs",
          (_c("env"), _c("batch")),
          (_c("default env steps/s", "solver-default.env_steps_per_s"),
           _c("fast env steps/s", "solver-fast.env_steps_per_s"), _c("fast/default", "fast_over_default")),
          any_of=("solver-default", "solver-fast")),
    Table("envs: domain randomization (`bench:envs --randomization`)", "envs",
          (_c("env"), _c("batch")),
          (_c("once per run env steps/s", "once_per_run.env_steps_per_s"),
           _c("per episode env steps/s", "per_episode.env_steps_per_s"),
           _c("per episode/once", "per_episode_over_once_per_run")),
          any_of=("once_per_run", "once_per_run_fresh", "per_episode")),
    Table("envs: env steps/s against Google brax (`bench:envs`)", "envs",
          (_c("env"), _c("batch")),
          (_c("ours env steps/s", "ours.env_steps_per_s"), _c("brax env steps/s", "brax.env_steps_per_s"),
           _c("ours/brax", "ours_over_brax"), _c("ours compile s", "ours.compile_s"))),
    Table("train: our first wall time at Google's final reward (`bench:train` summaries)", "train",
          (_c("agent"), _c("env"), _c("impls")),
          (_c("Google final reward", "google_final_reward"), _c("ours final reward", "ours_final_reward"),
           _c("Google wall s", "google_wall_s"),
           _c("ours s to Google's final", "ours_wall_s_to_google_final"), _c("ratio"), _c("met")),
          any_of=("summary",)),
    Table("train: dm_control suite recipes, PPO preset per seed (`bench:recipes`)", "train",
          (_c("env"), _c("seed")),
          (_c("steps"), _c("final return", "final_reward"), _c("best return", "best_reward"),
           _c("target"), _c("met"), _c("wall s", "wall_s"), _c("env steps/s", "env_steps_per_s")),
          kind="recipe"),
    Table("train: training runs (`bench:train`)", "train",
          (_c("agent"), _c("impl"), _c("env")),
          (_c("wall s", "wall_s"), _c("env steps/s", "env_steps_per_s"), _c("compile s", "compile_s"),
           _c("final reward", "final_reward"))),
    Table("scale: PPO over devices and processes (`bench:scale`)", "scale",
          (_c("env"), _c("num envs", "num_envs"), _c("layout")),
          (_c("env steps/s", "sps"), _c("efficiency")), kind="ppo_scaling"),
    Table("scale: exported-policy latency (`bench:scale`)", "scale",
          (_c("env"), _c("runtime"), _c("batch")),
          (_c("median us", "median_us"),), kind="policy_latency"),
    Table("ab: one setting at two or more values (`bench:ab`)", "ab",
          (_c("model"), _c("batch"), _c("setting")),
          (_c("values", "runs.*.value"), _c("b/a", "b_over_a"), _c("b/a fastest", "b_over_a_min"),
           _c("same program", "same_program"))),
    Table("torch: the PyTorch bridge against JAX alone (`bench:torch`)", "torch",
          (_c("env"), _c("batch")),
          (_c("JAX steps/s", "jax_steps_per_s"), _c("bridge steps/s", "bridge_steps_per_s"),
           _c("bridge/JAX", "bridge_over_jax"), _c("overhead us/step", "overhead_us_per_step")), kind="step"),
    Table("torch: rsl_rl on the bridge against Gymnasium's MuJoCo (`bench:torch`)", "torch",
          (_c("impl"), _c("env"), _c("num envs", "num_envs")),
          (_c("env steps/s", "env_steps_per_s"), _c("ours/Gymnasium", "ours_over_gymnasium")), kind="rsl_rl"),
)
"""Every table, in the order rendered; a row goes to the first whose `holds` is true."""


def get(row: Any, field: str) -> Any:
    """`field` of `row`, dotted into nested objects, `*` mapping the rest over a list; None if absent."""
    head, _, rest = field.partition(".")
    if head == "*":
        return [get(item, rest) for item in row] if isinstance(row, list) else None
    if not isinstance(row, Mapping) or head not in row:
        return None
    return get(row[head], rest) if rest else row[head]


def load(path: Path) -> list[dict[str, Any]]:
    """The rows of a results file, in file order (blank lines skipped)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def newest(rows: Iterable[Row]) -> dict[Table, list[Row]]:
    """Per table, the newest row of each key (latest `utc`; on a tie the later row), sorted by key."""
    best: dict[tuple[Table, str], Row] = {}
    for row in rows:
        table = next((t for t in TABLES if t.holds(row)), None)
        if table is None:  # a kind of row no table shows (yet): it stays in the file, off the page
            continue
        key = json.dumps([row.get("machine"), *_key_values(table, row)])
        old = best.get((table, key))
        if old is None or str(row.get("utc")) >= str(old.get("utc")):
            best[(table, key)] = row
    out: dict[Table, list[Row]] = {t: [] for t in TABLES}
    for (table, _), row in best.items():
        out[table].append(row)
    for table, kept in out.items():
        kept.sort(key=functools.partial(_sort_key, table))
    return out


def _sort_key(table: Table, row: Row) -> list[tuple[int, float, str]]:
    """Rows by machine, then by `table`'s key columns in order."""
    return [_order(v) for v in (row.get("machine"), *_key_values(table, row))]


def _key_values(table: Table, row: Row) -> list[Any]:
    """`row`'s values of `table`'s key columns."""
    return [get(row, c.field) for c in table.keys]


def _order(value: Any) -> tuple[int, float, str]:
    """A sort key that puts numbers in numeric order before text, and missing values last."""
    if isinstance(value, bool) or value is None:
        return (2, 0.0, json.dumps(value))
    if isinstance(value, int | float):
        return (0, float(value), "")
    return (1, 0.0, value if isinstance(value, str) else json.dumps(value))


def cell(value: Any, key: bool = False) -> str:
    """A value as table text: numbers to three significant digits (whole above 100), lists joined by " / "."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return " / ".join(cell(v, key) for v in value) or MISSING
    if isinstance(value, int | float) and not key:
        if isinstance(value, int) and abs(value) < 100:
            return str(value)
        short = f"{value:#.3g}".rstrip(".")  # three significant digits, trailing zeros kept: 1.00
        return f"{value:,.0f}" if abs(float(short)) >= 100 else short
    return str(value).replace("|", "\\|").replace("\n", " ")


def _values(table: Table, row: Row) -> list[str]:
    """`row`'s value cells; a row with an `error` shows it in the first cell that has no value."""
    cells = [cell(get(row, c.field)) for c in table.values]
    error = row.get("error")
    if error and MISSING in cells:
        text = cell(str(error))
        cells[cells.index(MISSING)] = "error: " + (text[:80] + "…" if len(text) > 80 else text)
    return cells


def render_tables(rows: Iterable[Row], level: int) -> str:
    """Markdown for every table that has rows, headed at `level` (`###` for 3)."""
    parts = []
    for table, kept in newest(rows).items():
        if not kept:
            continue
        titles = [c.title for c in (*table.keys, *table.values)] + ["commit", "date", "machine"]
        lines = [f"{'#' * level} {table.title}", "", "| " + " | ".join(titles) + " |",
                 "|" + "|".join("---" for _ in titles) + "|"]
        for row in kept:
            cells = [cell(get(row, c.field), key=True) for c in table.keys] + _values(table, row)
            cells += [cell(row.get("commit")), cell(str(row.get("utc") or "")[:10] or None),
                      cell(row.get("machine"))]
            lines.append("| " + " | ".join(cells) + " |")
        parts.append("\n".join(lines) + "\n")
    return "\n".join(parts)


def results_page(rows: Sequence[Row]) -> str:
    """The whole of tools/bench/RESULTS.md: `HEADER`, then the tables."""
    return HEADER + "\n" + render_tables(rows, level=2)


def with_tables(readme: str, rows: Sequence[Row]) -> str:
    """`readme` with the text between its `BEGIN` and `END` lines replaced by the tables."""
    lines = readme.splitlines(keepends=True)
    marks = [i for i, line in enumerate(lines) if line.strip() in (BEGIN, END)]
    if len(marks) != 2 or lines[marks[0]].strip() != BEGIN:
        raise ValueError(f"expected one {BEGIN} line followed by one {END} line")
    start, end = marks
    body = "\n" + render_tables(rows, level=3) + "\n"
    return "".join(lines[:start + 1]) + body + "".join(lines[end:])


def main(argv: list[str] | None = None) -> int:
    """Write (or with `--check`, compare) README.md's tables and RESULTS.md; the exit status."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file is stale")
    p.add_argument("--results", type=Path, default=None,
                   help="the results file (default: $BRAX_BENCH_RESULTS, else tools/bench/results.jsonl)")
    p.add_argument("--readme", type=Path, default=README)
    p.add_argument("--page", type=Path, default=RESULTS_MD, help="the page written whole (RESULTS.md)")
    args = p.parse_args(argv)
    rows = load(results_path(args.results))
    try:
        wanted = {args.readme: with_tables(args.readme.read_text(encoding="utf-8"), rows),
                  args.page: results_page(rows)}
    except ValueError as e:
        print(f"{args.readme}: {e}", file=sys.stderr)
        return 2
    stale = [path for path, text in wanted.items()
             if not path.exists() or path.read_text(encoding="utf-8") != text]
    for path in stale:
        if args.check:
            print(f"stale: {path} (run `hatch run bench-render`)", file=sys.stderr)
        else:
            path.write_text(wanted[path], encoding="utf-8")
            print(f"wrote {path}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
