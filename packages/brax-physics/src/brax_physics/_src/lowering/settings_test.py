"""The lowering settings: one frozen value on the System, no module-level mutable setting left."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brax_physics as bp
from brax_physics._src import models_testutil
from brax_physics._src.lowering import settings

_PACKAGE = Path(bp.__file__).resolve().parent


def _modules() -> list[Path]:
    return sorted(p for p in _PACKAGE.rglob("*.py") if not p.name.endswith(("_test.py", "_testutil.py")))


def _is_final(annotation: ast.expr) -> bool:
    if isinstance(annotation, ast.Subscript):
        annotation = annotation.value
    return (isinstance(annotation, ast.Name) and annotation.id == "Final") or (
        isinstance(annotation, ast.Attribute) and annotation.attr == "Final")


def _is_type_variable(value: ast.expr) -> bool:
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in (
        "TypeVar", "ParamSpec")


def test_no_module_level_mutable_setting() -> None:
    """Every module-level UPPER_CASE name is `Final` (a constant, not a knob), and no module rebinds a
    module global (`global`): lowering choices are `Lowering` fields."""
    bad = []
    for path in _modules():
        tree = ast.parse(path.read_text(), str(path))
        where = path.relative_to(_PACKAGE)
        for node in tree.body:
            if isinstance(node, ast.Assign) and not _is_type_variable(node.value):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
                bad += [f"{where}:{node.lineno} {n} (not Final)" for n in names if n.lstrip("_").isupper()]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                name = node.target.id
                if name.lstrip("_").isupper() and not _is_final(node.annotation):
                    bad.append(f"{where}:{node.lineno} {name} (not Final)")
        rebinds = [n for n in ast.walk(tree) if isinstance(n, ast.Global)]
        bad += [f"{where}:{n.lineno} global {', '.join(n.names)}" for n in rebinds]
    assert not bad, "module-level settings left:\n" + "\n".join(bad)


def test_lowering_is_frozen_hashable_and_static_on_the_system() -> None:
    low = bp.Lowering()
    assert low == settings.DEFAULT and hash(low) == hash(bp.Lowering())
    with pytest.raises(dataclasses.FrozenInstanceError):
        low.queue_min_batch = 1  # type: ignore[misc]
    sys = bp.load_mjcf(models_testutil.PENDULUM)
    assert sys.lowering == settings.DEFAULT
    changed = sys.replace(lowering=low.replace(queue_platforms=()))
    assert changed.lowering.queue_platforms == ()
    # static: part of the treedef, so jit compiles a new program for it
    assert len({jax.tree.structure(changed), jax.tree.structure(sys)}) == 2
    with pytest.raises(ValueError, match=r"lowering must be a brax_physics\.Lowering"):
        sys.replace(lowering={"queue_platforms": ()})


def test_entry_points_trace_under_their_systems_settings() -> None:
    seen = []
    sys = bp.load_mjcf(models_testutil.PENDULUM).replace(lowering=bp.Lowering(search_chunk=3))

    @settings.lowered
    def entry(s: bp.System) -> None:
        seen.append(settings.current())

    entry(sys)
    assert seen == [sys.lowering] and settings.current() == settings.DEFAULT


def _rollout(sys: bp.System, batch: int) -> tuple[str, np.ndarray]:
    """The lowered program of a jitted vmapped rollout of `batch` perturbed starts, and its positions."""
    q0 = sys.qpos0[None] + 0.3 * jax.random.normal(jax.random.PRNGKey(0), (batch, sys.nq))
    st = jax.vmap(lambda q: bp.init(sys, q))(q0)
    act = jnp.zeros((batch, sys.nu))

    def roll(s: bp.State) -> jax.Array:
        def body(c: bp.State, _: None) -> tuple[bp.State, None]:
            return jax.vmap(lambda x, u: bp.step(sys, x, u))(c, act), None

        out: jax.Array = jax.lax.scan(body, s, None, length=5)[0].q
        return out

    lowered = jax.jit(roll).lower(st)
    return lowered.as_text(), np.asarray(lowered.compile()(st))


def test_a_changed_field_changes_the_program_not_the_results() -> None:
    """The Newton work queue on and off (a field of the system's settings, no global patched, no
    cache cleared): another program, the same positions to float32 roundoff."""
    sys = bp.load_mjcf(models_testutil.WITH_LIMIT)
    off = sys.replace(lowering=sys.lowering.replace(queue_platforms=()))
    batch = settings.DEFAULT.queue_min_batch
    (queued, q_queued), (plain, q_plain) = _rollout(sys, batch), _rollout(off, batch)
    assert queued.count("stablehlo.sort") > plain.count("stablehlo.sort")  # the queue sorts its problems
    np.testing.assert_allclose(q_queued, q_plain, atol=1e-5)
