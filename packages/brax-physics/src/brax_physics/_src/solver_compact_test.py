"""Row compaction: the solve on the active units of a budget tier equals the solve on every row.

Reference: the same problems solved with `Config.compact` empty (every row, as before compaction),
batched (plain vmapped loop and work queue) and one at a time; and a rollout of a model with many
contact slots, pyramidal and elliptic, against the uncompacted pipeline.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brax_physics as bp
from brax_physics._src import pipeline, solver
from brax_physics._src.lowering import newton, settings
from brax_physics._src.lowering.settings import Lowering

NV, NHEAD, NUNIT = 5, 4, 40
_DEFAULT_BUDGETS = newton.tier_budgets  # before the fixture patches it


def _two_tiers(s: Lowering, nunit: int) -> list[tuple[int, int]]:
    """Budgets of a tenth and two fifths of a group (4 and 16 of 40), where at most half of it, at
    every batch size."""
    del s
    return [(b, 1) for b in (max(4, nunit // 10), max(16, nunit * 2 // 5)) if 2 * b <= nunit]


@pytest.fixture(autouse=True)
def _small_tiers(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Two tiers, 4 and 16 units of a 40-unit group (the default is one tier of at least 32), so that
    tier selection is tested too."""
    monkeypatch.setattr(newton, "tier_budgets", _two_tiers)
    solver._compaction.cache_clear()
    solver._compact_newton_fn.cache_clear()
    yield
    solver._compaction.cache_clear()
    solver._compact_newton_fn.cache_clear()


def _cfg(compact: bool, cone: int = 1) -> solver.Config:
    """Head: 2 friction-loss rows and 2 unilateral rows; then NUNIT units of `cone` rows each
    (elliptic cones when `cone` > 1)."""
    units = tuple(tuple(range(NHEAD + k * cone, NHEAD + (k + 1) * cone)) for k in range(NUNIT))
    nefc = NHEAD + NUNIT * cone
    return solver.Config(is_floss=(True, True) + (False,) * (nefc - 2), tolerance=1e-8, warmstart=True,
                         cones=units if cone > 1 else (), compact=(units,) if compact else ())


B = solver.budget()  # MuJoCo's default budget


def _problems(active: list[int], seed: int, cone: int = 1) -> solver.Problem:
    """One random problem per entry of `active`, with that many active units (scattered)."""
    rng = np.random.default_rng(seed)
    b, nefc = len(active), NHEAD + NUNIT * cone
    a = rng.normal(size=(b, NV, NV))
    m = a @ np.swapaxes(a, 1, 2) + NV * np.eye(NV)
    j = rng.normal(size=(b, nefc, NV))
    d = rng.uniform(5.0, 50.0, size=(b, nefc))
    aref = rng.normal(size=(b, nefc)) * 3.0
    for i, n in enumerate(active):
        off = np.ones(NUNIT, bool)
        off[rng.choice(NUNIT, n, replace=False)] = False
        rows = NHEAD + np.flatnonzero(np.repeat(off, cone))
        d[i, rows] = 0.0
        aref[i, rows] = 0.0
    floss = np.zeros((b, nefc))
    floss[:, :2] = rng.uniform(0.1, 1.0, size=(b, 2))
    qfrc = rng.normal(size=(b, NV)) * 5.0
    mu = None
    if cone > 1:
        mu = np.zeros((b, nefc))
        mu[:, NHEAD:] = rng.uniform(0.3, 1.0, size=(b, NUNIT * cone))

    def f32(x: np.ndarray) -> jax.Array:
        return jnp.asarray(x, jnp.float32)

    qacc_smooth = np.linalg.solve(m, qfrc[..., None])[..., 0]
    return solver.Problem(M=f32(m), qfrc_smooth=f32(qfrc), qacc_smooth=f32(qacc_smooth), J=f32(j), D=f32(d),
                          R=f32(1.0 / np.maximum(d, 1e-3)), aref=f32(aref), floss=f32(floss),
                          mu=None if mu is None else f32(mu))


def test_default_budget_rule() -> None:
    """A tier of 1/8 of a group, at least 32 units, at most 256 + 1/64 of it (past 2,341 units), only
    where that is at most half the group; from 128 problems on, a second of a third of the group
    where that is a quarter larger and at most half the group."""
    sizes = (24, 63, 64, 100, 140, 294, 1194, 2341, 40488)
    budgets = [_DEFAULT_BUDGETS(settings.DEFAULT, n) for n in sizes]
    assert budgets == [[], [], [(32, 1)], [(32, 1)], [(32, 1), (47, 128)], [(37, 1), (98, 128)],
                       [(150, 1), (398, 128)], [(293, 1), (781, 128)], [(889, 1), (13496, 128)]]


def test_active_units_come_first_in_order() -> None:
    """The gather's order is numpy's stable argsort of the inactive flags, batched or not."""
    a = np.random.default_rng(0).uniform(size=(6, 37)) < np.linspace(0.0, 1.0, 6)[:, None]
    got = np.asarray(jax.jit(jax.vmap(solver._active_first))(jnp.asarray(a)))
    want = np.stack([np.argsort(~row, kind="stable") for row in a])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.asarray(solver._active_first(jnp.asarray(a[3]))), want[3])


def test_a_batch_compiles_the_tiers_it_is_large_enough_for() -> None:
    """Tiers for batches of 128 and more: a smaller batch (or one problem) skips to the next tier."""
    def adds(k: int) -> Callable[[Any, jax.Array], jax.Array]:
        return lambda p, w: w + k

    solves = [adds(k) for k in range(3)]  # two tiers and the full solve
    cases = ((1, [0, 2], [0, 1, 1]), (127, [0, 2], [0, 1, 1]), (128, [0, 1, 2], [0, 1, 2]))
    for batch, kept, branch in cases:
        got, table = newton._for_batch(solves, (1, 128), batch)
        assert [int(f(None, jnp.zeros(()))) for f in got] == kept
        assert np.asarray(table).tolist() == branch


def test_tiers_of_a_group() -> None:
    """40 units: budgets 4 and 16; the tier is the smallest that holds the count (2: all rows)."""
    plan = solver._compaction(_cfg(True))
    assert plan is not None
    assert plan.budgets == ((4,), (16,))
    assert [len(c.is_floss) for c in plan.configs] == [NHEAD + 4, NHEAD + 16]
    p = _problems([0, 4, 5, 16, 17, 40], seed=0)
    tiers = jax.vmap(lambda q: solver._tier(plan, q))(p)
    assert np.asarray(tiers).tolist() == [0, 0, 1, 1, 2, 2]


@pytest.mark.parametrize(("active", "batch"), [((3, 1, 0, 4), 4), ((3, 12, 0, 9), 4), ((3, 30, 1, 7), 4),
                                                ((2, 4, 0, 3), settings.DEFAULT.queue_min_batch)])
def test_compact_solve_matches_all_rows(active: tuple[int, ...], batch: int) -> None:
    """Batches landing in tier 0, tier 1 and the full solve; the last one on the work queue."""
    p = _problems([active[i % len(active)] for i in range(batch)], seed=batch + sum(active))
    warm = p.qacc_smooth.at[::2].add(0.3)

    def solve(cfg: solver.Config) -> np.ndarray:
        return np.asarray(jax.jit(jax.vmap(lambda q, w: solver.solve(cfg, q, w, B)))(p, warm))

    want, got = solve(_cfg(False)), solve(_cfg(True))
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4)
    # one at a time (the unbatched switch), each problem in its own tier
    compact = _cfg(True)
    one = jax.jit(lambda p, w: jax.lax.map(lambda a: solver.solve(compact, a[0], a[1], B), (p, w)))(p, warm)
    np.testing.assert_allclose(np.asarray(one), want, rtol=2e-4, atol=2e-4)
    assert np.abs(want).max() > 0.1  # the constraints act


def test_compact_elliptic_cones_match_all_rows() -> None:
    """Units of 3 rows (elliptic cones, with their `mu` scales) gathered whole."""
    p = _problems([2, 3, 10, 0], seed=7, cone=3)
    warm = p.qacc_smooth

    def solve(cfg: solver.Config) -> np.ndarray:
        return np.asarray(jax.jit(jax.vmap(lambda q, w: solver.solve(cfg, q, w, B)))(p, warm))

    np.testing.assert_allclose(solve(_cfg(True, cone=3)), solve(_cfg(False, cone=3)), rtol=2e-4, atol=2e-4)


def test_compact_rejects_bad_groups() -> None:
    """Friction-loss rows, and multi-row units that are not cones, cannot be compacted."""
    cfg = _cfg(False)
    with pytest.raises(ValueError, match="friction-loss and equality rows"):
        solver._compaction(cfg._replace(compact=(tuple((r,) for r in range(0, 40)),)))
    with pytest.raises(ValueError, match="is not a cone"):
        solver._compaction(cfg._replace(compact=(tuple((r, r + 1) for r in range(4, 44, 2)),)))


# Six capsules dropped in a pile on a plane: 21 capsule pairs and 6 capsule-plane pairs, 2 slots each.
_PILE = """
<mujoco>
  <option timestep="0.005" cone="{cone}"/>
  <worldbody>
    <geom type="plane" size="2 2 0.1"/>
    {bodies}
  </worldbody>
</mujoco>
"""


def _pile(cone: str) -> bp.System:
    condim = 3 if cone == "pyramidal" else 4
    bodies = "\n".join(
        f'<body pos="{0.05 * i} {0.04 * (i % 2)} {0.15 + 0.12 * i}" euler="0 {30 * i} {50 * i}">'
        f'<freejoint/><geom type="capsule" size="0.05 0.15" condim="{condim}"/></body>'
        for i in range(6))
    return bp.load_mjcf(_PILE.format(cone=cone, bodies=bodies))


@pytest.mark.parametrize("cone", ["pyramidal", "elliptic"])
def test_pile_rollout_matches_uncompacted(cone: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A capsule pile settling (contacts come and go): the compacted pipeline stays on the full one."""
    sys = _pile(cone)
    plan = solver._compaction(pipeline.solver_config(sys))
    assert plan is not None and plan.budgets[0][0] < plan.units[0].shape[0]

    def rollout() -> tuple[np.ndarray, np.ndarray]:
        def body(st: bp.State, _: None) -> tuple[bp.State, jax.Array]:
            st = bp.step(sys, st, jnp.zeros(0))
            return st, jnp.sum(st.contact.active)
        st, n = jax.jit(lambda st: jax.lax.scan(body, st, None, length=150))(bp.init(sys))
        return np.asarray(st.q), np.asarray(n)

    q, ncon = rollout()
    assert ncon.max() >= 6  # the pile touches the floor and itself
    full_cfg = pipeline.solver_config

    def no_compact(s: bp.System) -> solver.Config:
        return full_cfg(s)._replace(compact=())

    monkeypatch.setattr(pipeline, "solver_config", no_compact)
    q_full, ncon_full = rollout()
    np.testing.assert_array_equal(ncon, ncon_full)
    np.testing.assert_allclose(q, q_full, atol=2e-4)
