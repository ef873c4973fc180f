"""tools/bench/results.py and render.py: rows recorded with commit, time, bench and machine; the newest
row per key rendered between README.md's markers; `--check` on a stale and a fresh file, and on the
committed README.md and RESULTS.md against the committed results.jsonl."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools/bench"))
import render
import results
import train

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "tools/bench"

README = ("# Title\n\nIntro.\n\n## Benchmarks\n\nProse stays.\n\n{begin}\nold table\n{end}\n\n"
          "## Layout\n\nRest.\n")


def _readme() -> str:
    """A README with the markers and text on both sides of them."""
    return README.format(begin=render.BEGIN, end=render.END)


def _physics(utc: str, steps: float, machine: str = "2-core x86 CPU",
             batch: int = 128) -> dict[str, Any]:
    """A recorded physics row."""
    return {"commit": "abc1234", "utc": utc, "bench": "physics", "machine": machine, "model": "ant",
            "backend": "brax_physics", "batch": batch, "env_steps_per_s": steps, "ours_over_this": 1.0}


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    """`rows` as a results file."""
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _render(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """render.py run as a user runs it, in a fresh interpreter."""
    return subprocess.run([sys.executable, str(BENCH / "render.py"), *map(str, args)],
                          capture_output=True, text=True, check=False, timeout=120)


def test_record_appends_stamped_rows(tmp_path: Path) -> None:
    path = tmp_path / "out" / "results.jsonl"
    before = datetime.now(UTC).replace(microsecond=0)
    step = {"bench": "step", "env": "ant", "batch": 256, "bridge_over_jax": 0.95, "device": "cpu:0"}
    results.record([step], bench="torch", path=path)
    results.record([{"model": "ant", "backend": "brax_physics", "batch": 1024, "device": "gpu:NVIDIA H200"},
                    {"model": "ant", "backend": "mujoco_c", "batch": 1024}], bench="physics", path=path)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rows) == 3
    assert [r["bench"] for r in rows] == ["torch", "physics", "physics"]
    assert list(rows[0])[:4] == ["commit", "utc", "bench", "machine"]
    assert (rows[0]["kind"], rows[0]["env"], rows[0]["bridge_over_jax"]) == ("step", "ant", 0.95)
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    assert {r["commit"] for r in rows} <= {head, f"{head}-dirty"}
    when = datetime.strptime(rows[0]["utc"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert before <= when <= datetime.now(UTC) + timedelta(seconds=1)
    assert rows[0]["machine"] == rows[2]["machine"] == results.cpu_machine()  # CPU rows: the host
    assert rows[1]["machine"] == "NVIDIA H200"  # an accelerator row: its device


def test_record_path_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "env.jsonl"
    monkeypatch.setenv(results.ENV_VAR, str(target))
    assert results.record([{"env": "ant", "batch": 1}], bench="envs") == target
    (row,) = [json.loads(line) for line in target.read_text().splitlines()]
    assert (row["bench"], row["env"], row["batch"]) == ("envs", "ant", 1)
    with pytest.raises(ValueError, match="bench 'nope'"):
        results.record([{"env": "ant"}], bench="nope")
    assert len(target.read_text().splitlines()) == 1  # nothing written for a bad bench


def test_commit_dirty_and_outside_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "f.txt").write_text("a\n")
    subprocess.run([*git, "add", "f.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "one"], check=True)
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    monkeypatch.setattr(results, "HERE", repo)
    (repo / "untracked.txt").write_text("x\n")
    assert results.commit() == head  # untracked files do not make it dirty
    (repo / "f.txt").write_text("b\n")
    assert results.commit() == f"{head}-dirty"
    monkeypatch.setattr(results, "HERE", tmp_path / "nowhere")
    assert results.commit() is None


def test_cpu_machine() -> None:
    info = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13\n"
    assert results.cpu_machine(info, 2) == "2-core AMD EPYC 7B13"
    assert results.cpu_machine("", 8) == "8-core CPU"
    assert results.machine({"device": "cpu:cpu"}) == results.cpu_machine()


def test_newest_row_per_key_between_markers() -> None:
    rows = [_physics("2026-12-02T00:00:00Z", 2000.0), _physics("2026-12-01T00:00:00Z", 1000.0),
            _physics("2026-12-01T00:00:00Z", 3000.0, machine="NVIDIA H200"),
            _physics("2026-12-01T00:00:00Z", 5000.0, batch=1024),
            {"commit": None, "utc": "2026-12-03T00:00:00Z", "bench": "physics", "machine": "2-core x86 CPU",
             "model": "humanoid", "backend": "brax_mjx", "batch": 1, "error": "TimeoutError: no result"}]
    (table,) = [t for t, kept in render.newest(rows).items() if kept]
    kept = render.newest(rows)[table]
    assert [(r["machine"], r["batch"], r["env_steps_per_s"]) for r in kept if r["model"] == "ant"] == [
        ("2-core x86 CPU", 128, 2000.0), ("2-core x86 CPU", 1024, 5000.0), ("NVIDIA H200", 128, 3000.0)]
    # Equal times: the later line is the newer.
    tie = render.newest([_physics("2026-12-01T00:00:00Z", 1.0), _physics("2026-12-01T00:00:00Z", 7.0)])
    assert [r["env_steps_per_s"] for r in tie[table]] == [7.0]
    text = render.with_tables(_readme(), rows)
    head, tail = text.split(render.BEGIN + "\n")[0], text.split(render.END)[1]
    assert head == "# Title\n\nIntro.\n\n## Benchmarks\n\nProse stays.\n\n"
    assert tail == "\n\n## Layout\n\nRest.\n"
    body = text.split(render.BEGIN + "\n")[1].split(render.END)[0]
    assert "old table" not in body and "| 1,000 |" not in body
    assert "| ant | 128 | brax_physics | 2,000 | 1.00 | — | abc1234 | 2026-12-02 | 2-core x86 CPU |" in body
    assert "| humanoid | 1 | brax_mjx | error: TimeoutError: no result | — | — | — | 2026-12-03 |" in body
    assert body.startswith("\n### physics: ")
    assert render.with_tables(text, rows) == text  # rendering again changes nothing


def test_cells() -> None:
    assert [render.cell(v) for v in (1.0, 0.6724, 99.96, 7845.9, 12, 1024, -50.36, None, True)] == [
        "1.00", "0.672", "100", "7,846", "12", "1,024", "-50.4", "—", "yes"]
    assert render.cell(["brax", "ours"], key=True) == "brax / ours"
    assert render.cell(1024, key=True) == "1024"  # a key is shown as given
    assert render.get({"runs": [{"value": "4"}, {"value": "8"}]}, "runs.*.value") == ["4", "8"]
    assert render.get({"ours": {"env_steps_per_s": 5.0}}, "ours.env_steps_per_s") == 5.0
    assert render.get({"ours": {}}, "ours.env_steps_per_s") is None


def test_check_exits_1_when_stale_and_0_when_fresh(tmp_path: Path) -> None:
    data, readme, page = tmp_path / "r.jsonl", tmp_path / "README.md", tmp_path / "RESULTS.md"
    _write(data, [_physics("2026-12-01T00:00:00Z", 1000.0)])
    readme.write_text(_readme())
    files = ("--results", data, "--readme", readme, "--page", page)
    stale = _render("--check", *files)
    assert stale.returncode == 1
    assert f"stale: {readme}" in stale.stderr and f"stale: {page}" in stale.stderr
    assert readme.read_text() == _readme() and not page.exists()  # --check writes nothing
    wrote = _render(*files)
    assert wrote.returncode == 0 and f"wrote {page}" in wrote.stdout
    assert page.read_text().startswith(render.HEADER) and "| 1,000 |" in page.read_text()
    fresh = _render("--check", *files)
    assert (fresh.returncode, fresh.stderr) == (0, "")
    _write(data, [_physics("2026-12-01T00:00:00Z", 1000.0), _physics("2026-12-02T00:00:00Z", 1500.0)])
    again = _render("--check", *files)
    assert again.returncode == 1 and f"stale: {readme}" in again.stderr


def test_committed_tables_are_current() -> None:
    out = _render("--check", "--results", BENCH / "results.jsonl")
    assert (out.returncode, out.stderr) == (0, ""), "run `hatch run bench-render` and commit the result"


def test_every_committed_row_has_a_table() -> None:
    rows = render.load(BENCH / "results.jsonl")
    assert len(rows) > 400
    assert all(r["bench"] in results.BENCHES and set(results.META) <= set(r) for r in rows)
    unshown = [r for r in rows if not any(t.holds(r) for t in render.TABLES)]
    assert unshown == []
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", r["utc"]) for r in rows)


def test_train_record_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                           capsys: pytest.CaptureFixture[str]) -> None:
    real_run = subprocess.run

    def fake_run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        if cmd[0] == "git":  # results.commit() asks git
            return real_run(cmd, **kwargs)
        impl = cmd[cmd.index("--one") + 2]
        reward = 10.0 if impl == "brax" else 12.0
        run = {"agent": "ppo", "impl": impl, "env": "ant", "wall_s": 9.0, "compile_s": 1.0,
               "env_steps_per_s": 5.0, "final_reward": reward, "curve": [[0, 0.0, 1.0], [100, reward, 9.0]]}
        return subprocess.CompletedProcess(cmd, 0, json.dumps(run) + "\n", "")

    target = tmp_path / "train.jsonl"
    monkeypatch.setenv(results.ENV_VAR, str(target))
    monkeypatch.setattr(subprocess, "run", fake_run)
    monkeypatch.setattr(sys, "argv", ["train.py", "--agents", "ppo", "--envs", "ant", "--record"])
    train.main()
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    recorded = [json.loads(line) for line in target.read_text().splitlines()]
    assert [p.get("impl") for p in printed] == ["brax", "ours", None]  # two runs, then the summary
    assert [{k: v for k, v in r.items() if k not in results.META} for r in recorded] == printed
    assert {r["bench"] for r in recorded} == {"train"}
    assert recorded[2]["summary"] is True and recorded[2]["ratio"] == 1.0
    monkeypatch.setattr(sys, "argv", ["train.py", "--agents", "ppo", "--envs", "ant"])
    train.main()
    assert len(target.read_text().splitlines()) == 3  # without --record nothing more is written
