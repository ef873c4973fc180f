"""Strict JAX settings shared by every test in the repository."""

import gc
import json
import os
import statistics
from collections.abc import Iterator
from pathlib import Path

# Two host devices let tests exercise sharding on a CPU-only machine; must be set before jax loads.
if "--xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
    ).strip()
# Tests are dominated by XLA compiles of small programs run for a few steps: LLVM's cheapest
# optimization level compiles a physics step about a third faster and runs it slower (several times
# for contact-rich models), a good trade for a short test and never for a user (so it is set here,
# not in the packages). Results differ from the optimized code only by float32 round-off; every
# oracle test has a tolerance, and the recorded PPO digest runs in a child process with its own
# XLA_FLAGS.
if "--xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] += " --xla_backend_optimization_level=0"
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# One persistent compilation cache for the whole test run: both xdist workers, the unit and the
# integration sessions, and the child processes (CLI, multi-host, digest) read and write it, so a
# program compiled by one of them (an env's step at a test's batch size, a PPO update) is loaded,
# not recompiled, by the others. Set through the environment so child processes inherit it; the key
# hashes the program, the compile options and XLA_FLAGS, so a stale entry is never read.
os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR", str(Path(__file__).parent / ".pytest_cache" / "jax")
)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.5")
os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(1 << 30))  # LRU beyond 1 GiB

import jax
import pytest

# Catch silent float64/int promotion and accidental broadcasting of mismatched ranks in our code.
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")
# Full float32 matmuls: tests compare against MuJoCo C and must not depend on a backend's default.
jax.config.update("jax_default_matmul_precision", "highest")

# Tracing a physics step allocates millions of short-lived objects: at Python's default thresholds
# the cyclic collector runs thousands of times per trace, each older pass walking every cached
# jaxpr. Rarer collections trace about a fifth faster; a test process has the memory to spare.
gc.set_threshold(100_000, 20, 20)
# Every XLA CPU executable holds memory mappings (a humanoid step about two thousand), and Linux
# allows a process 65530 (vm.max_map_count): a long-lived test worker that keeps every executable it
# compiled in JAX's caches reaches it, LLVM's next allocation fails and the worker aborts mid-compile.
# A worker drops its compiled programs between modules, and within a module once it nears the limit.
_MAPS_SOFT_LIMIT = 30000


def _memory_maps() -> int:
    """Number of memory mappings this process holds (0 where /proc is not there)."""
    maps = Path(f"/proc/{os.getpid()}/maps")
    if not maps.exists():
        return 0
    with maps.open("rb") as f:
        return sum(1 for _ in f)


def _drop_compiled() -> None:
    jax.clear_caches()
    gc.collect()


_ROOT = Path(__file__).parent.resolve()
_TRAINING = (_ROOT / "packages" / "brax-train", _ROOT / "tests-integration")
_NOT_TRAINING = _ROOT / "tests-integration" / "physics"  # the physics-only flows


def pytest_configure(config: pytest.Config) -> None:
    """XLA:CPU's older (non-MLIR) fusion emitters for sessions that run no training tests.

    They compile a physics step about 40% faster and, at the level above, also run it faster (at
    full optimization they run it slower: again only for tests). Training is another matter: with
    them, brax-train's resume tests (a resumed run against an uninterrupted one, bit for bit) differ
    in the last bit of some parameters, and the integration suite's learning bars (BC's student,
    APG's reacher) are missed. So a session that collects brax-train's or the integration tests
    keeps XLA's default; the physics, envs, math and io tests and the physics-only integration
    flows (tests-integration/physics: tolerances against MuJoCo C and analytic values) take the
    older emitters. Set here, before any backend starts, as the paths are only known now; child
    processes inherit it.
    """
    flags = os.environ["XLA_FLAGS"]
    paths = [Path(str(a).split("::")[0]).resolve() for a in config.args] or [_ROOT]

    def within(p: Path, d: Path) -> bool:
        return p == d or d in p.parents

    trains = any((within(p, t) or p in t.parents) and not within(p, _NOT_TRAINING)
                 for p in paths for t in _TRAINING)
    if not trains and "--xla_cpu_use_fusion_emitters" not in flags:
        os.environ["XLA_FLAGS"] = flags + " --xla_cpu_use_fusion_emitters=false"


@pytest.fixture(autouse=True, scope="module")
def _compiled_programs_per_module() -> Iterator[None]:
    yield
    _drop_compiled()


@pytest.fixture(autouse=True)
def _compiled_programs_per_test() -> Iterator[None]:
    yield
    if _memory_maps() > _MAPS_SOFT_LIMIT:
        _drop_compiled()


# Longest scopes first (LPT scheduling): xdist hands each worker the next whole file (or class) in
# queue order, so a heavy file that comes last runs alone while the other worker idles. Its own
# reorder ranks scopes by test count, which says little about compile time; the measured seconds
# per scope in tools/ci/test_durations.json do better. `--record-durations` refreshes them.
_DURATIONS = _ROOT / "tools" / "ci" / "test_durations.json"


def pytest_addoption(parser: pytest.Parser) -> None:
    """`--record-durations`: write this session's seconds per xdist scope into the durations file."""
    parser.addoption(
        "--record-durations", action="store_true",
        help=f"record each test scope's seconds (setup, call, teardown) into {_DURATIONS.relative_to(_ROOT)}",
    )


def _scope(config: pytest.Config, nodeid: str) -> str:
    """The xdist work unit `nodeid` belongs to: its file under loadfile, else its class or file."""
    if config.getoption("dist", "no") == "loadfile":
        return nodeid.split("::", 1)[0]
    return nodeid.rsplit("::", 1)[0]


def _recorded() -> dict[str, float]:
    return dict(json.loads(_DURATIONS.read_text())["seconds"]) if _DURATIONS.exists() else {}


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker, order whole scopes by recorded seconds, longest first (unknown: median)."""
    seconds = _recorded()
    if not hasattr(config, "workerinput") or not seconds:
        return
    default = statistics.median(seconds.values())
    rank: dict[str, tuple[float, int]] = {}
    for item in items:
        scope = _scope(config, item.nodeid)
        rank.setdefault(scope, (-seconds.get(scope, default), len(rank)))
    items.sort(key=lambda item: rank[_scope(config, item.nodeid)])


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Keep the workers' collection order in xdist's queue (its own reorder ranks by test count)."""
    config = session.config
    if _recorded() and hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
    if config.getoption("record_durations") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_Recorder(config), "brax-record-durations")


class _Recorder:
    """Sums each scope's setup, call and teardown seconds; the controller sees every worker's."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.spent: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        scope = _scope(self.config, report.nodeid)
        self.spent[scope] = self.spent.get(scope, 0.0) + report.duration

    def pytest_sessionfinish(self) -> None:
        """Merge this session's scopes into the durations file, keeping the other sessions' scopes."""
        seconds = {**_recorded(), **{k: round(v, 1) for k, v in self.spent.items()}}
        tmp = _DURATIONS.with_suffix(".tmp")
        tmp.write_text(json.dumps({"seconds": dict(sorted(seconds.items()))}, indent=0) + "\n")
        tmp.replace(_DURATIONS)
