"""Passive forces vs MuJoCo C: gravity compensation, ball and free joint springs (mj_passive)."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import brax_physics as bp
from brax_physics._src import dynamics, pipeline

# A hinge + ball arm and a floating box, each with gravcomp (below, at and above 1) and springs:
# the shoulder's hinge spring, the wrist's ball spring, the box's free-joint spring (linear and
# rotational, towards its initial pose). The ball spring's rest orientation is turned below.
MODEL = """
<mujoco>
  <option timestep="0.004"><flag contact="disable"/></option>
  <worldbody>
    <body name="upper" pos="0 0 1" gravcomp="0.6">
      <joint name="shoulder" type="hinge" axis="0 1 0" stiffness="0.5" springref="20"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      <body name="lower" pos="0.3 0 0" gravcomp="1.5">
        <joint name="wrist" type="ball" stiffness="0.8" damping="0.02"/>
        <geom type="capsule" fromto="0 0 0 0 0.1 -0.25" size="0.025"/>
      </body>
    </body>
    <body name="floater" pos="1 0 1" euler="10 20 30" gravcomp="0.5">
      <joint name="float" type="free" stiffness="3" damping="0.1"/>
      <geom type="box" size="0.1 0.07 0.05"/>
    </body>
  </worldbody>
</mujoco>
"""

_WRIST_REST = np.array([0.9, 0.3, -0.2, 0.1]) / np.linalg.norm([0.9, 0.3, -0.2, 0.1])


@functools.cache
def _model(flags: int = 0) -> tuple[bp.System, Any]:
    m = mujoco.MjModel.from_xml_string(MODEL)
    m.opt.disableflags |= flags
    m.qpos_spring[1:5] = _WRIST_REST
    return bp.from_mjmodel(m), m


def _inputs(m: Any, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    q = m.qpos0 + 0.5 * rng.standard_normal(m.nq)
    q[1:5] = -rng.standard_normal(4)  # any sign: the spring takes the short way round
    q[1:5] *= 1.7 / np.linalg.norm(q[1:5])  # unnormalized: both normalize it
    q[8:12] /= np.linalg.norm(q[8:12])
    return q, rng.standard_normal(m.nv)


_stages = jax.jit(lambda sys, q, qd: (dynamics.passive(sys, q, qd), pipeline.init(sys, q, qd)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_passive_forces_match_mujoco(seed: int) -> None:
    sys, m = _model()
    assert (sys.ngravcomp, sys.jnt_hasstiffness) == (3, (True, True, True))
    q, qd = _inputs(m, seed)
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = q, qd
    mujoco.mj_forward(m, d)
    assert np.abs(d.qfrc_spring[1:4]).max() > 0.1 and np.abs(d.qfrc_gravcomp).max() > 0.1
    springdamper, s = _stages(sys, jnp.asarray(q, jnp.float32), jnp.asarray(qd, jnp.float32))
    np.testing.assert_allclose(springdamper, d.qfrc_spring + d.qfrc_damper, rtol=1e-5, atol=1e-5)
    gravcomp = jax.jit(dynamics.gravcomp)(sys, s.xipos, s.subtree_com, s.cdof)
    np.testing.assert_allclose(gravcomp, d.qfrc_gravcomp, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(s.qfrc_passive, d.qfrc_passive, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(s.qacc, d.qacc, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "flags",
    [mujoco.mjtDisableBit.mjDSBL_GRAVITY, mujoco.mjtDisableBit.mjDSBL_SPRING,
     mujoco.mjtDisableBit.mjDSBL_SPRING | mujoco.mjtDisableBit.mjDSBL_DAMPER],
)
def test_disable_flags_as_mujoco(flags: int) -> None:
    sys, m = _model(int(flags))
    q, qd = _inputs(m, 5)
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = q, qd
    mujoco.mj_forward(m, d)
    _, s = _stages(sys, jnp.asarray(q, jnp.float32), jnp.asarray(qd, jnp.float32))
    np.testing.assert_allclose(s.qfrc_passive, d.qfrc_passive, rtol=1e-5, atol=1e-5)


def test_trajectory_matches_mujoco() -> None:
    sys, m = _model()
    q, qd = _inputs(m, 7)
    q[1:5] /= np.linalg.norm(q[1:5])
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = q, qd
    qs = []
    for _ in range(50):
        mujoco.mj_step(m, d)
        qs.append(d.qpos.copy())

    def body(s: bp.State, _: None) -> tuple[bp.State, jax.Array]:
        s = bp.step(sys, s, jnp.zeros(0))
        return s, s.q

    s0 = pipeline.init(sys, jnp.asarray(q, jnp.float32), jnp.asarray(qd, jnp.float32))
    ours = jax.jit(lambda s: jax.lax.scan(body, s, None, length=50)[1])(s0)
    got, want = np.asarray(ours, np.float64), np.stack(qs)
    sign = np.sign(got[:, [1, 8]] * want[:, [1, 8]])  # quaternions up to sign
    got[:, 1:5] *= sign[:, :1]
    got[:, 8:12] *= sign[:, 1:]
    np.testing.assert_allclose(got, want, atol=2e-4)
    assert np.abs(want[-1] - q).max() > 0.1  # it moved
