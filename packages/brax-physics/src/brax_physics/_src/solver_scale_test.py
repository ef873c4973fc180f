"""The Newton solver's stopping scale vs MuJoCo C: 1/trace(M) of the mass matrix at the current pose.

MuJoCo saves each iteration's cost improvement and gradient norm already scaled (`d.solver`):
the saved gradient over the gradient norm recomputed from its solution is its scale. The model is
a three-link arm folded onto the floor, whose mass-matrix trace is about half of that at qpos0, so
the run-time trace and the load-time `stat.meaninertia · nv` are told apart. The solver runs on
MuJoCo's own constraint rows (efc_J, D, R, aref), so only the stopping rules are compared.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from brax_physics._src import solver

ARM_XML = """<mujoco><option jacobian="dense" tolerance="{tol}"/><worldbody>
  <geom type="plane" size="5 5 .1"/>
  <body pos="0 0 .5"><joint type="hinge" axis="0 1 0" armature="{arm}"/>
    <geom type="capsule" fromto="0 0 0 .4 0 0" size=".04" mass="2"/>
    <body pos=".4 0 0"><joint type="hinge" axis="0 1 0" armature="{arm}" range="-150 150"/>
      <geom type="capsule" fromto="0 0 0 .4 0 0" size=".04" mass="1.5"/>
      <body pos=".4 0 0"><joint type="hinge" axis="0 1 0" armature="{arm}" range="-20 150"/>
        <geom type="capsule" fromto="0 0 0 .4 0 0" size=".04" mass="1"/>
        <geom type="box" pos=".4 0 0" size=".06 .1 .06" mass=".5"/></body></body></body>
  </worldbody></mujoco>"""
ARMATURES = (0.0, 0.03, 0.1, 0.3, 1.0, 3.0)
NO_WARMSTART = int(mujoco.mjtDisableBit.mjDSBL_WARMSTART)
NO_ISLAND = int(mujoco.mjtDisableBit.mjDSBL_ISLAND)


def _model(arm: float, tol: float = 1e-8) -> Any:
    return mujoco.MjModel.from_xml_string(ARM_XML.format(arm=arm, tol=tol))


@functools.cache
def _pose() -> tuple[np.ndarray, np.ndarray]:
    """(qpos, qvel) of the arm after it fell onto the floor: 24 pyramidal contact rows."""
    m = _model(0.0)
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = (0.6, 1.7, 1.4), (1.0, -2.0, 3.0)
    for _ in range(120):
        mujoco.mj_step(m, d)
    return d.qpos.copy(), d.qvel.copy()


def _forward(m: Any, warm: np.ndarray | None = None) -> Any:
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = _pose()
    if warm is not None:
        d.qacc_warmstart[:] = warm
    mujoco.mj_forward(m, d)
    return d


def _mass(m: Any, d: Any) -> np.ndarray:
    out = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, out)
    return out


def _jac(m: Any, d: Any) -> np.ndarray:
    return np.asarray(d.efc_J).reshape(d.nefc, m.nv)


def _problem(m: Any, d: Any) -> tuple[solver.Config, solver.Problem]:
    """MuJoCo's constraint problem at `d`, in float32 (with the budget of `m`), and the solver
    settings of `m`."""
    def f32(x: np.ndarray) -> jax.Array:
        return jnp.asarray(x, jnp.float32)

    floss = (mujoco.mjtConstraint.mjCNSTR_FRICTION_DOF, mujoco.mjtConstraint.mjCNSTR_FRICTION_TENDON)
    cfg = solver.Config(is_floss=tuple(int(t) in floss for t in d.efc_type), tolerance=float(m.opt.tolerance),
                        warmstart=not m.opt.disableflags & NO_WARMSTART)
    p = solver.Problem(M=f32(_mass(m, d)), qfrc_smooth=f32(d.qfrc_smooth), qacc_smooth=f32(d.qacc_smooth),
                       J=f32(_jac(m, d)), D=f32(d.efc_D), R=f32(d.efc_R), aref=f32(d.efc_aref),
                       floss=f32(d.efc_frictionloss),
                       budget=solver.budget(int(m.opt.iterations), int(m.opt.ls_iterations)))
    return cfg, p


@functools.partial(jax.jit, static_argnums=0)
def _iterations(cfg: solver.Config, p: solver.Problem, warm: jax.Array) -> jax.Array:
    """Newton iterations the solver takes on `p` from `warm` (the loop of `solver.solve`)."""
    s = jax.lax.while_loop(solver._running, lambda s: solver._iterate(cfg, p, s),
                           solver._start(cfg, p, warm))
    return s.it[0]  # one island


@pytest.mark.parametrize("islands", [True, False])
@pytest.mark.parametrize("arm", ARMATURES)
def test_scale_is_inverse_trace_of_mass_matrix(islands: bool, arm: float) -> None:
    """MuJoCo's scale is 1/trace(M) at the current pose, islands on (one island) or off; ours too."""
    def mujoco_scale(meaninertia_factor: float) -> tuple[float, Any, Any]:
        m = _model(arm)
        m.opt.disableflags |= NO_WARMSTART | (0 if islands else NO_ISLAND)
        m.opt.iterations = 1  # one step from qacc_smooth leaves a large gradient to measure
        m.stat.meaninertia *= meaninertia_factor
        d = _forward(m)
        grad = _mass(m, d) @ d.qacc - d.qfrc_smooth - d.qfrc_constraint
        assert d.solver_niter[0] == 1 and np.linalg.norm(grad) > 1.0
        return float(d.solver.gradient[0] / np.linalg.norm(grad)), m, d

    scale, m, d = mujoco_scale(1.0)
    if islands:  # one island holds every dof: its trace is the whole trace
        assert d.nisland == 1 and np.all(d.dof_island == 0)
    trace = np.trace(_mass(m, d))
    np.testing.assert_allclose(scale * trace, 1.0, rtol=1e-12)
    assert scale * m.stat.meaninertia * m.nv > 1.15  # not the load-time statistic ...
    assert mujoco_scale(1e6)[0] == scale  # ... which MuJoCo does not read at all
    np.testing.assert_allclose(1.0 / float(solver.scale_tol(_problem(m, d)[1])), scale, rtol=1e-6)


def test_warm_start_exit_follows_armature() -> None:
    """Near the optimum MuJoCo takes no iteration iff ‖g‖ < tolerance·trace(M): armature decides it."""
    got, want, margin = [], [], []
    for arm in (0.0, 0.3, 1.0, 3.0, 10.0):
        m = _model(arm, tol=1e-12)
        m.opt.disableflags |= NO_WARMSTART
        warm = _forward(m).qacc + 0.003 * np.array([1.0, -1.0, 1.0])  # off the optimum by a fixed step
        m.opt.disableflags, m.opt.tolerance = 0, 1e-2
        d = _forward(m, warm)
        mass = _mass(m, d)
        jar = _jac(m, d) @ warm - d.efc_aref
        grad = mass @ warm - d.qfrc_smooth - _jac(m, d).T @ np.where(jar < 0, -d.efc_D * jar, 0.0)
        margin.append(np.linalg.norm(grad) / (m.opt.tolerance * np.trace(mass)))
        want.append(int(d.solver_niter[0]))
        cfg, p = _problem(m, d)
        got.append(int(_iterations(cfg, p, jnp.asarray(warm, jnp.float32))))
    assert want == [1, 1, 1, 0, 0], (want, margin)  # MuJoCo's count changes with armature ...
    assert all(abs(r - 1.0) > 0.15 for r in margin), margin  # ... away from the threshold
    assert got == want, (got, want)


def test_iteration_counts_match_mujoco() -> None:
    """From qacc_smooth (no warm start), ours takes MuJoCo's number of Newton iterations per armature."""
    got, want = [], []
    for arm in ARMATURES:
        m = _model(arm, tol=1e-3)
        m.opt.disableflags |= NO_WARMSTART
        d = _forward(m)
        n = int(d.solver_niter[0])
        # MuJoCo stopped on a rule ours has (improvement or gradient), not on its Newton decrement
        assert 0 < d.solver.improvement[n - 1] < m.opt.tolerance or d.solver.gradient[n - 1] < m.opt.tolerance
        want.append(n)
        cfg, p = _problem(m, d)
        got.append(int(_iterations(cfg, p, p.qacc_smooth)))
    assert len(set(want)) > 1, want  # armature changes MuJoCo's count
    assert got == want, (got, want)
