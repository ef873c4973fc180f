"""The Newton solve at training budgets against MuJoCo C, on MuJoCo's own constraint problems.

At 1-4 Newton iterations the result is wherever the solver stops, so every rule counts: the warm
start's choice, one problem per island (each with its own line search, stopping tests and
iteration count, and qacc_smooth for trees without active rows), MuJoCo's line search with its
`ls_iterations` and `ls_tolerance`, and the Newton-decrement exit. Run in float64 on the rows
MuJoCo made (efc_J, D, R, aref), our solve must land on MuJoCo's qacc to roundoff.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from brax_physics._src import island, pipeline, solver
from brax_physics._src.loader import load_mjcf

C = mujoco.mjtConstraint

# Three trees: a box and a sphere resting on the floor (separate islands unless they touch) and a
# two-link arm with a joint limit and friction loss, swung into the floor.
SCENE = """<mujoco>
  <option cone="{cone}" iterations="{it}" ls_iterations="{ls}" impratio="5">{flags}</option>
  <worldbody>
    <geom type="plane" size="5 5 .1"/>
    <body pos="0 0 .1"><freejoint/><geom type="box" size=".1 .1 .1" mass="1"/></body>
    <body pos=".35 0 .12"><freejoint/><geom type="sphere" size=".12" mass="2"/></body>
    <body pos="1 0 .5"><joint type="hinge" axis="0 1 0" range="-10 10" frictionloss=".1"/>
      <geom type="capsule" fromto="0 0 0 0 0 -.35" size=".05"/>
      <body pos="0 0 -.35"><joint type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 .3 0 0" size=".05"/></body>
    </body>
  </worldbody>
</mujoco>"""


def _xml(cone: str, it: int, ls: int, flags: str = "") -> str:
    return SCENE.format(cone=cone, it=it, ls=ls, flags=flags)


def _states(m: Any, n: int) -> list[Any]:
    """`n` copies of mjData along a trajectory that starts sliding into contact (warm starts set)."""
    d = mujoco.MjData(m)
    d.qvel[:] = np.random.default_rng(0).normal(size=m.nv) * 0.5
    d.qpos[2] -= 0.003
    out = []
    for _ in range(n):
        mujoco.mj_forward(m, d)
        out.append(mujoco.MjData(m))
        mujoco.mj_copyData(out[-1], m, d)
        mujoco.mj_step(m, d)
    return out


_Rows = tuple[list[int], list[int], list[int]]  # MuJoCo rows: friction loss, limits, contacts


def _rows(m: Any, d: Any) -> _Rows:
    types = [int(t) for t in d.efc_type[:d.nefc]]
    floss = [r for r, t in enumerate(types) if t == int(C.mjCNSTR_FRICTION_DOF)]
    limit = [r for r, t in enumerate(types) if t == int(C.mjCNSTR_LIMIT_JOINT)]
    contact = [r for r, t in enumerate(types) if t >= int(C.mjCNSTR_CONTACT_FRICTIONLESS)]
    assert len(floss) + len(limit) + len(contact) == d.nefc
    return floss, limit, contact


def _problems(m: Any, states: list[Any]) -> tuple[solver.Config, solver.Problem, jax.Array, solver.Budget]:
    """MuJoCo's constraint problems at `states`, stacked in float64 with a common row layout
    (friction loss, limits, contacts, each padded with rows that are never active), the solver
    settings of `m`, the warm starts and the budget of `m`."""
    nv = m.nv
    layouts = [_rows(m, d) for d in states]
    nfl, nlim, ncon = (max(len(lay[k]) for lay in layouts) for k in range(3))
    elliptic = m.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC
    dim = 3  # every contact of the scene has condim 3
    nefc = nfl + nlim + ncon
    keys = ("M", "fs", "as", "J", "D", "R", "aref", "fl", "mu", "di", "ei", "w")
    cols: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    for d, lay in zip(states, layouts, strict=True):
        mass = np.zeros((nv, nv))
        mujoco.mj_fullM(m, d, mass)
        jac = np.asarray(d.efc_J).reshape(-1)[:d.nefc * nv].reshape(d.nefc, nv)
        sizes = (nfl, nlim, ncon)
        rows = [r for group, n in zip(lay, sizes, strict=True) for r in group + [-1] * (n - len(group))]
        pick = np.asarray(rows)
        pad = pick < 0

        def take(x: np.ndarray, fill: float, pick: np.ndarray = pick, pad: np.ndarray = pad) -> np.ndarray:
            return np.where(pad, fill, np.asarray(x)[np.maximum(pick, 0)])

        mu = np.ones(nefc)
        for r, src in enumerate(rows):
            if src >= 0 and int(d.efc_type[src]) == int(C.mjCNSTR_CONTACT_ELLIPTIC):
                con = d.contact[d.efc_id[src]]
                k = (r - nfl - nlim) % dim
                mu[r] = con.mu if k == 0 else con.friction[k - 1]
        isl = d.nisland > 0
        cols["M"].append(mass)
        cols["fs"].append(d.qfrc_smooth.copy())
        cols["as"].append(d.qacc_smooth.copy())
        cols["J"].append(np.where(pad[:, None], 0.0, jac[np.maximum(pick, 0)]))
        cols["D"].append(take(d.efc_D, 0.0))
        cols["R"].append(take(d.efc_R, 1.0))
        cols["aref"].append(take(d.efc_aref, 0.0))
        cols["fl"].append(take(d.efc_frictionloss, 0.0))
        cols["mu"].append(mu)
        cols["di"].append(np.asarray(d.dof_island) if isl else np.zeros(nv, np.int32))
        cols["ei"].append(take(d.efc_island, -1) if isl else np.zeros(nefc, np.int32))
        cols["w"].append(d.qacc_warmstart.copy())
    st = {k: np.stack(v) for k, v in cols.items()}
    f64 = np.float64
    first = nfl + nlim
    cones = tuple(tuple(range(first + k, first + k + dim)) for k in range(0, ncon, dim)) if elliptic else ()
    cfg = solver.Config(
        is_floss=(True,) * nfl + (False,) * (nlim + ncon), tolerance=float(m.opt.tolerance),
        ls_tolerance=float(m.opt.ls_tolerance),
        warmstart=not m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_WARMSTART, cones=cones,
        newton=m.opt.solver == mujoco.mjtSolver.mjSOL_NEWTON, nisland=int(m.ntree))
    p = solver.Problem(
        M=jnp.asarray(st["M"], f64), qfrc_smooth=jnp.asarray(st["fs"], f64),
        qacc_smooth=jnp.asarray(st["as"], f64),
        J=jnp.asarray(st["J"], f64), D=jnp.asarray(st["D"], f64), R=jnp.asarray(st["R"], f64),
        aref=jnp.asarray(st["aref"], f64), floss=jnp.asarray(st["fl"], f64),
        mu=jnp.asarray(st["mu"], f64) if elliptic else None, dof_island=jnp.asarray(st["di"], jnp.int32),
        efc_island=jnp.asarray(st["ei"], jnp.int32))
    return cfg, p, jnp.asarray(st["w"], f64), solver.budget(int(m.opt.iterations), int(m.opt.ls_iterations))


BUDGETS = [(1, 3), (2, 4), (4, 8), (100, 50)]
CASES = [("pyramidal", "", "Newton"), ("elliptic", "", "Newton"),
         ("pyramidal", '<flag warmstart="disable"/>', "Newton"),
         ("elliptic", '<flag island="disable"/>', "Newton"),
         ("pyramidal", "", "CG"), ("elliptic", "", "CG")]


@pytest.mark.parametrize(("cone", "flags", "method"), CASES)
def test_low_budget_solve_lands_on_mujocos_qacc(cone: str, flags: str, method: str) -> None:
    """At every budget, from MuJoCo's warm start, ours equals MuJoCo's qacc to float64 roundoff
    (a batch of states along a trajectory, solved under vmap)."""
    with jax.enable_x64(True):
        for it, ls in BUDGETS:
            m = mujoco.MjModel.from_xml_string(_xml(cone, it, ls, flags).replace(
                "<option ", f'<option solver="{method}" '))
            states = [d for d in _states(m, 10) if d.nefc]
            cfg, p, warm, budget = _problems(m, states)
            # the budget is data: one program for every budget
            got = np.asarray(jax.jit(jax.vmap(functools.partial(solver.solve, cfg), in_axes=(0, 0, None)))(
                p, warm, budget))
            want = np.stack([d.qacc for d in states])
            err = np.max(np.abs(got - want), axis=1) / (1.0 + np.max(np.abs(want), axis=1))
            assert np.all(err < 1e-8), (it, ls, err)


def test_islands_partition_as_mujoco() -> None:
    """Our island labels split dofs and active rows into MuJoCo's islands (labels may differ)."""
    m = mujoco.MjModel.from_xml_string(_xml("pyramidal", 1, 3))
    sys = load_mjcf(_xml("pyramidal", 1, 3))
    seen = set()
    for d in _states(m, 12):
        # our rows for the same qpos: only which trees hold active rows matters, contacts included
        state = pipeline.init(sys, jnp.asarray(d.qpos, jnp.float32), jnp.asarray(d.qvel, jnp.float32))
        active = _active_rows(sys, state)
        dof_ours, _ = island.islands(sys, active)
        ours, theirs = np.asarray(dof_ours), np.asarray(d.dof_island) if d.nisland else np.full(m.nv, -1)
        np.testing.assert_array_equal(ours < 0, theirs < 0)
        for a in range(m.nv):
            for b in range(m.nv):
                assert (ours[a] == ours[b]) == (theirs[a] == theirs[b]), (d.time, ours, theirs)
        seen.add(int(d.nisland))
    assert len(seen) >= 2, seen  # the trajectory changes the islands


def _active_rows(sys: Any, state: Any) -> jax.Array:
    """(nefc,) rows that `state`'s position stage instantiates."""
    from brax_physics._src import constraint

    pos = pipeline._state_position(state)
    rows = constraint.make_rows(sys, state.q, pos.cdof, pos.subtree_com, pos.contact, pos.ten_length,
                                pos.ten_J, None)
    out: jax.Array = rows.active
    return out


def test_budget_is_data_one_program_for_every_budget() -> None:
    """`opt.iterations` and `opt.ls_iterations` are leaves: one compiled step runs every budget, as
    MuJoCo C does at that budget, and a batch of systems may hold a different budget per member."""
    budgets = [(1, 3), (2, 4), (4, 8)]
    sys = load_mjcf(_xml("elliptic", 100, 50))
    traces = []

    @jax.jit
    def step(s: Any, q: jax.Array, qd: jax.Array, warm: jax.Array) -> jax.Array:
        traces.append(1)
        state = pipeline.init(s, q, qd).replace(qacc_warmstart=warm)
        out: jax.Array = pipeline.step(s, state, jnp.zeros(0, jnp.float32)).qd
        return out

    d0 = _states(mujoco.MjModel.from_xml_string(_xml("elliptic", 100, 50)), 4)[-1]
    d0.qacc_warmstart[:] = 0  # as after a reset: the budget decides more
    f32 = functools.partial(jnp.asarray, dtype=jnp.float32)
    q, qd, warm = f32(d0.qpos), f32(d0.qvel), f32(d0.qacc_warmstart)
    got = []
    for it, ls in budgets:
        m = mujoco.MjModel.from_xml_string(_xml("elliptic", it, ls))
        d = mujoco.MjData(m)
        mujoco.mj_copyData(d, m, d0)
        mujoco.mj_step(m, d)
        budget_sys = sys.replace(opt=sys.opt.replace(iterations=it, ls_iterations=ls))
        got.append(np.asarray(step(budget_sys, q, qd, warm)))
        np.testing.assert_allclose(got[-1], d.qvel, rtol=2e-5, atol=2e-5, err_msg=f"budget {it, ls}")
    assert len(traces) == 1, "another budget compiled the step again"
    assert np.abs(got[0] - got[-1]).max() > 1e-2  # the budgets give different steps
    opts = sys.opt.replace(iterations=jnp.asarray([b[0] for b in budgets], jnp.float32),
                           ls_iterations=jnp.asarray([b[1] for b in budgets], jnp.float32))
    axes = jax.tree.map(lambda _: None, sys).replace(opt=jax.tree.map(lambda _: None, sys.opt).replace(
        iterations=0, ls_iterations=0))
    batched = jax.jit(jax.vmap(step, in_axes=(axes, None, None, None)))(sys.replace(opt=opts), q, qd, warm)
    np.testing.assert_allclose(np.asarray(batched), np.stack(got), rtol=1e-5, atol=1e-5)
