"""tools/bench/ab.py: the in-process A/B of a brax-physics setting (a `Lowering` field, or code) on the
whole step."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools/bench"))
import ab
from brax_physics._src.lowering import settings


def test_ab_times_both_values_of_a_lowering_field(capsys: pytest.CaptureFixture[str]) -> None:
    out = ab.run("reacher", 2, "queue_slot_fraction", [4, 8], steps=2, rounds=1)
    assert settings.current() == settings.DEFAULT  # nothing global changed
    assert [r["value"] for r in out["runs"]] == ["4", "8"]
    assert all(r["compile_s"] > 0 and r["us_per_step"] > 0 for r in out["runs"])
    a, b = (r["us_per_step"] for r in out["runs"])
    assert out["b_over_a"] == pytest.approx(b / a, rel=0.01)
    fa, fb = (r["min_us_per_step"] for r in out["runs"])
    assert 0 < fa <= a and 0 < fb <= b  # the fastest run is no slower than the median
    assert out["b_over_a_min"] == pytest.approx(fb / fa, rel=0.01)
    assert out["max_abs_dq"] == 0.0  # the slot count never changes results
    assert out["same_program"] == [True]  # 2 envs never reach the work queue
    assert all(r["buffer_bytes"] > 0 for r in out["runs"])
    with pytest.raises(SystemExit, match="has no attribute 'NOPE'"):
        ab.run("reacher", 2, "brax_physics._src.solver:NOPE", [1, 2], steps=1, rounds=1)
    with pytest.raises(SystemExit, match=r"no field 'queue_slot_fractio' \(did you mean"):
        ab.run("reacher", 2, "queue_slot_fractio", [1, 2], steps=1, rounds=1)
    with pytest.raises(SystemExit, match=r"now the field 'queue_slot_fraction' of brax_physics\.Lowering"):
        ab.run("reacher", 2, "brax_physics._src.solver:QUEUE_SLOT_FRACTION", [1, 2], steps=1, rounds=1)


def test_ab_warmup_starts_the_timed_rollouts_later() -> None:
    """`warmup` steps (the loaded code) come before the timed rollouts, which all start there."""
    import brax_physics as bp
    import jax
    import jax.numpy as jnp
    from models import MODELS

    sys_ = bp.load_mjcf(MODELS["reacher"])
    state = jax.vmap(lambda _: bp.init(sys_))(jnp.arange(2))
    after = jax.jit(ab._advance(sys_, 3))(state, jnp.zeros((2, sys_.nu)))
    assert float(after.time[0]) == pytest.approx(3 * float(sys_.opt.timestep))
    out = ab.run("reacher", 2, "queue_slot_fraction", [4, 8], steps=2, rounds=1, warmup=3)
    assert out["warmup"] == 3 and out["max_abs_dq"] == 0.0


def test_ab_sets_several_settings_together() -> None:
    setting = "unroll_max_n,unroll_min_batch"
    out = ab.run("reacher", 2, setting, [(16, 128), (4, 2)], steps=2, rounds=1)
    assert [r["value"] for r in out["runs"]] == ["(16, 128)", "(4, 2)"]
    with pytest.raises(SystemExit, match="2 settings take tuples of 2 values each"):
        ab.run("reacher", 2, setting, [16, 24], steps=1, rounds=1)


def test_ab_sets_several_functions_at_one_revision() -> None:
    """With several settings, a lone `@REV` is each of them at that revision."""
    from brax_physics._src import constraint

    before = (constraint.impedance, constraint.contact_jacobian)
    setting = "brax_physics._src.constraint:impedance,brax_physics._src.constraint:contact_jacobian"
    targets = ab._targets(setting, [ab.Revision(""), ab.Revision("HEAD")])
    assert [per_run[0] for _, _, per_run in targets] == list(before)  # "@": as loaded
    assert [per_run[1].__module__ for _, _, per_run in targets] == ["brax_physics._src.constraint@HEAD"] * 2
    out = ab.run("reacher", 2, setting, [ab.Revision(""), ab.Revision("HEAD")], steps=2, rounds=1)
    assert [r["value"] for r in out["runs"]] == ["@", "@HEAD"]
    assert (constraint.impedance, constraint.contact_jacobian) == before  # both restored


def test_ab_times_more_than_two_values_against_the_first() -> None:
    out = ab.run("reacher", 2, "queue_slot_fraction", [4, 8, 16], steps=2, rounds=2)
    assert [r["value"] for r in out["runs"]] == ["4", "8", "16"]
    first = out["runs"][0]["min_us_per_step"]
    assert out["runs"][0]["over_a_min"] == 1.0
    for r in out["runs"]:
        assert r["over_a_min"] == pytest.approx(r["min_us_per_step"] / first, rel=0.01)
    assert out["max_abs_dq"] == 0.0
    with pytest.raises(SystemExit):
        ab.main(["--model", "reacher", "--batch", "2", "--setting",
                 "queue_slot_fraction", "--values", "4"])


def test_ab_times_a_function_as_a_git_revision_defines_it() -> None:
    """`@REV` runs the attribute from its module's source at that revision, in every module that
    holds it (`from x import f` copies), and restores them all; `@` is the loaded one."""
    import brax_math
    import brax_math.spatial as spatial
    import jax.numpy as jnp
    import numpy as np
    from brax_physics._src import com

    before = spatial.com_inertia
    out = ab.run("reacher", 2, "brax_math.spatial:com_inertia", [ab.Revision(""), ab.Revision("HEAD")],
                 steps=2, rounds=1)
    assert [r["value"] for r in out["runs"]] == ["@", "@HEAD"]
    assert out["patched"] == ["brax_math", "brax_math.spatial", "brax_physics._src.com"]
    assert all(vars(m)["com_inertia"] is before for m in (spatial, com, brax_math))  # restored
    old = ab._at_revision(spatial, "com_inertia", "HEAD")
    assert old is not before and old.__module__ == "brax_math.spatial@HEAD"
    rng = np.random.default_rng(0)
    args = [jnp.asarray(a, jnp.float32) for a in (rng.uniform(1, 2, 4), rng.uniform(0.1, 1, (4, 3)),
                                                  rng.normal(size=(4, 3, 3)), rng.normal(size=(4, 3)))]
    np.testing.assert_allclose(np.asarray(old(*args)), np.asarray(before(*args)), rtol=1e-5, atol=1e-6)
    with pytest.raises(SystemExit, match=r"git cannot show .*spatial\.py at no-such-rev"):
        ab.run("reacher", 2, "brax_math.spatial:com_inertia", [ab.Revision(""), ab.Revision("no-such-rev")],
               steps=1, rounds=1)


def test_ab_twice_computes_a_stage_twice_with_the_same_result() -> None:
    """`2x`: the function runs twice per call (neither merged nor dropped by XLA), returning what
    one call returns; the step's positions are unchanged up to float32 rounding."""
    import jax
    import jax.numpy as jnp
    from brax_physics._src import dynamics

    twice = ab._twice(jnp.sin)
    x = jnp.linspace(0.0, 1.0, 5)
    assert bool(jnp.all(jax.jit(twice)(x) == jnp.sin(x)))
    hlo = str(jax.jit(twice).lower(x).compile().as_text())
    assert hlo.count(" sine(") == 2, hlo
    before = dynamics.rne
    out = ab.run("reacher", 2, "brax_physics._src.dynamics:rne", [ab.Revision(""), ab.Twice()], steps=2,
                 rounds=1)
    assert [r["value"] for r in out["runs"]] == ["@", "2x"]
    assert out["max_abs_dq"] < 1e-5 and dynamics.rne is before  # float32 rounding at most


def test_ab_reports_whether_the_programs_differ() -> None:
    """A setting that changes the compiled program shows in `same_program`, in either order (a field
    of the system's static settings: no cache to clear between values)."""
    values = [settings.DEFAULT.dot_min_work, 1]  # 1: every product of the tree a dot, not a fused sum
    out = ab.run("reacher", 2, "dot_min_work", values, steps=2, rounds=1)
    assert out["same_program"] == [False]
    again = ab.run("reacher", 2, "dot_min_work", values[::-1], steps=2, rounds=1)
    assert again["same_program"] == [False]
    assert out["max_abs_dq"] < 1e-5 and again["max_abs_dq"] < 1e-5  # the same products either way
