"""Noslip sweeps vs MuJoCo C: efc_force and qacc after one step, and a short trajectory, for both cones.

A three-legged body rests on a 12° incline (legs of condim 3, 4 and 6: every pyramid width and every
QCQP size); the main solver's soft contacts let it creep, the noslip sweeps stop that. A second body
hangs on a hinge and a slide with friction loss (the box rows) and touches the incline with a
capsule. MuJoCo's CG and PGS run as Newton here (the same optimum; option_warnings says so).
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import brax_physics as bp
from brax_physics._src import constraint

_XML = """<mujoco>
  <option cone="{cone}" solver="{solver}" noslip_iterations="{nsi}"/>
  <worldbody>
    <geom name="incline" type="plane" size="5 5 .1" euler="0 12 0" friction="0.6 0.02 0.01"/>
    <body pos="0 0 0.05" euler="0 12 0">
      <freejoint/>
      <geom type="sphere" size=".03" pos=".1 .08 -.03" mass=".3" condim="3"/>
      <geom type="sphere" size=".03" pos=".1 -.08 -.03" mass=".3" condim="4"/>
      <geom type="sphere" size=".03" pos="-.1 0 -.03" mass=".4" condim="6"/>
    </body>
    <body pos="0.5 0 0.045">
      <joint type="hinge" axis="0 1 0" frictionloss="0.05"/>
      <joint type="slide" axis="1 0 0" frictionloss="0.1"/>
      <geom type="capsule" size=".03" fromto="0 0 -.07 0 0 -.13" condim="3"/>
    </body>
  </worldbody>
</mujoco>"""
_SETTLE = 100  # MuJoCo steps (with noslip) before the comparison: the legs are on the incline
_STEPS = 40

CASES = [("pyramidal", "Newton"), ("pyramidal", "CG"), ("elliptic", "PGS"), ("elliptic", "Newton")]


def _model(cone: str, solver: str, nsi: int) -> Any:
    return mujoco.MjModel.from_xml_string(_XML.format(cone=cone, solver=solver, nsi=nsi))


@functools.cache
def _case(cone: str, solver: str) -> tuple[Any, Any, bp.System, bp.State]:
    m = _model(cone, solver, 4)
    d = mujoco.MjData(m)
    for _ in range(_SETTLE):
        mujoco.mj_step(m, d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bp.OptionWarning)  # PGS runs as Newton
        sys = bp.from_mjmodel(m)
    state = bp.init(sys, jnp.asarray(d.qpos, jnp.float32), jnp.asarray(d.qvel, jnp.float32))
    state = state.replace(qacc_warmstart=jnp.asarray(d.qacc_warmstart, jnp.float32))
    return m, d, sys, state


@jax.jit
def _rollout(sys: bp.System, state: bp.State) -> tuple[bp.State, jax.Array]:
    def body(s: bp.State, _: None) -> tuple[bp.State, jax.Array]:
        s = bp.step(sys, s, jnp.zeros(0))
        return s, s.q

    first = bp.step(sys, state, jnp.zeros(0))
    return first, jax.lax.scan(body, state, None, length=_STEPS)[1]


def _copy(m: Any, d: Any) -> Any:
    out = mujoco.MjData(m)
    out.qpos[:], out.qvel[:], out.qacc_warmstart[:] = d.qpos, d.qvel, d.qacc_warmstart
    return out


def _our_rows(sys: bp.System, state: bp.State, d: Any) -> np.ndarray:
    """Our efc row of each of MuJoCo's rows (friction loss, then contacts matched by geom2)."""
    lay = constraint.layout(sys)
    order = list(range(lay.neq, lay.limit_start))
    first = lay.contact_start
    geom2 = np.asarray(state.contact.geom2)
    active = np.asarray(state.contact.active)
    for i in range(d.ncon):
        slot = int(np.flatnonzero((geom2 == d.contact[i].geom[1]) & active)[0])
        order += list(first + np.flatnonzero(lay.row_con == slot))
    return np.asarray(order)


@pytest.mark.parametrize(("cone", "solver"), CASES)
def test_one_step_and_trajectory_match_mujoco(cone: str, solver: str) -> None:
    m, d, sys, state = _case(cone, solver)
    first, q = _rollout(sys, state)

    want = _copy(m, d)
    mujoco.mj_forward(m, want)
    plain_m = _model(cone, solver, 0)
    plain = _copy(plain_m, d)
    mujoco.mj_forward(plain_m, plain)
    assert want.nf == 2 and want.ncon == 4 and want.nefc == first.efc_force.shape[0] - np.sum(
        ~np.asarray(first.contact.active)[constraint.layout(sys).row_con])

    # the sweeps matter: they move qacc by far more than our tolerance
    scale = np.max(np.abs(want.qacc)) + 1.0
    assert np.max(np.abs(want.qacc - plain.qacc)) > 100 * 1e-3 * scale
    np.testing.assert_allclose(np.asarray(first.qacc), want.qacc, atol=1e-3 * scale)
    idx = _our_rows(sys, state, want)
    f = np.asarray(first.efc_force)
    np.testing.assert_allclose(f[idx], want.efc_force, atol=2e-4 * np.max(np.abs(want.efc_force)))
    inactive = np.setdiff1d(np.arange(f.size), idx)
    assert np.all(f[inactive] == 0)

    qs = []
    for _ in range(_STEPS):
        mujoco.mj_step(m, want)
        qs.append(want.qpos.copy())
    np.testing.assert_allclose(np.asarray(q), np.stack(qs), atol=1e-4)


def test_gradients_are_finite() -> None:
    _, _, sys, state = _case("elliptic", "Newton")

    def loss(qd: jax.Array, mass: jax.Array) -> jax.Array:
        changed = sys.replace(body_mass=mass)  # init: the state holds its position stage
        s = bp.step(changed, bp.init(changed, state.q, qd).replace(qacc_warmstart=state.qacc_warmstart),
                    jnp.zeros(0))
        return jnp.sum(s.qd**2) + jnp.sum(s.efc_force)

    g = jax.jit(jax.grad(loss, argnums=(0, 1)))(state.qd, sys.body_mass)
    assert all(bool(jnp.all(jnp.isfinite(x))) for x in g)
    assert all(float(jnp.max(jnp.abs(x))) > 0 for x in g)
