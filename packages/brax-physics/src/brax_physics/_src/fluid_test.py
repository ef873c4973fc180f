"""Inertia-box fluid forces against MuJoCo's qfrc_fluid."""

from __future__ import annotations

import copy

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import brax_physics as bp
from brax_physics._src import com
from brax_physics._src.fluid import fluid, inertia_box

# A swimmer-like planar chain plus a free-floating box, in a dense viscous medium with wind.
_XML = """
<mujoco>
  <option timestep="0.01" density="{density}" viscosity="{viscosity}" wind="{wind}" gravity="0 0 0"/>
  <default><geom contype="0" conaffinity="0"/></default>
  <worldbody>
    <body name="torso">
      <joint name="sx" type="slide" axis="1 0 0"/><joint name="sy" type="slide" axis="0 1 0"/>
      <joint name="rz" type="hinge" axis="0 0 1"/>
      <geom type="capsule" fromto="1.5 0 0 0.5 0 0" size="0.1"/>
      <body name="mid" pos="0.5 0 0">
        <joint name="m1" type="hinge" axis="0 0 1"/>
        <geom type="capsule" fromto="0 0 0 -1 0 0" size="0.1"/>
        <body name="tail" pos="-1 0 0">
          <joint name="m2" type="hinge" axis="0 1 0"/>
          <geom type="capsule" fromto="0 0 0 -1 0 0" size="0.1"/>
        </body>
      </body>
    </body>
    <body name="box" pos="0 2 1" quat="0.9 0.3 0.2 0.1">
      <freejoint/>
      <geom type="box" size="0.3 0.1 0.2" pos="0.05 0 0"/>
    </body>
  </worldbody>
</mujoco>
"""

CASES = {
    "viscous": dict(density=0, viscosity=0.1, wind="0 0 0"),
    "dense": dict(density=4000, viscosity=0, wind="0 0 0"),
    "both_with_wind": dict(density=1.2, viscosity=0.3, wind="0.5 -1 0.2"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_matches_mujoco_qfrc_fluid(case: str) -> None:
    opts = CASES[case]
    xml = _XML.format(**opts)
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(0)
    d.qpos[:5] = rng.normal(size=5) * 0.5
    d.qvel[:] = rng.normal(size=m.nv)
    mujoco.mj_forward(m, d)

    # The medium is passed explicitly, so the System is built from a copy without it.
    bare = copy.copy(m)
    bare.opt.density, bare.opt.viscosity, bare.opt.wind[:] = 0.0, 0.0, 0.0
    sys = bp.from_mjmodel(bare)
    state = bp.init(sys, jnp.asarray(d.qpos, jnp.float32), jnp.asarray(d.qvel, jnp.float32))
    cvel, _ = com.com_vel(sys, state.cdof, state.qd)
    got = fluid(sys, jnp.float32(m.opt.density), jnp.float32(m.opt.viscosity),
                jnp.asarray(m.opt.wind, jnp.float32), state.xipos, state.ximat, state.subtree_com, cvel,
                state.cdof)
    np.testing.assert_allclose(got, d.qfrc_fluid, rtol=1e-4, atol=1e-4 * np.abs(d.qfrc_fluid).max())


def test_inertia_box_of_a_box_is_its_half_size() -> None:
    # A solid box's principal inertia gives back its half-sizes exactly.
    mass = jnp.asarray([2.0, 0.0])
    a, b, c = 0.3, 0.1, 0.2
    m3 = mass[0] / 3
    inertia = jnp.asarray([[m3 * (b * b + c * c), m3 * (a * a + c * c), m3 * (a * a + b * b)],
                           [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(inertia_box(mass, inertia), np.array([[a, b, c], [0.0, 0.0, 0.0]]), rtol=1e-5)
    g = jax.grad(lambda i: jnp.sum(inertia_box(mass, i)))(inertia)
    assert bool(jnp.all(jnp.isfinite(g)))


def test_step_in_a_medium_tracks_mujoco() -> None:
    # The pipeline adds fluid forces to qfrc_passive: 100 steps of the chain and box in a dense
    # viscous medium with wind follow mj_step.
    xml = _XML.format(**CASES["both_with_wind"]).replace('density="1.2"', 'density="50"')
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    d.qvel[:] = np.random.default_rng(1).normal(size=m.nv)
    sys = bp.load_mjcf(xml)
    assert sys.opt.has_fluid
    state = bp.init(sys, jnp.asarray(d.qpos, jnp.float32), jnp.asarray(d.qvel, jnp.float32))
    mujoco.mj_forward(m, d)
    np.testing.assert_allclose(state.qfrc_passive, d.qfrc_passive, rtol=1e-4,
                               atol=1e-4 * np.abs(d.qfrc_passive).max())

    def body(s: bp.State, _: None) -> tuple[bp.State, jax.Array]:
        s = bp.step(sys, s, jnp.zeros(0, jnp.float32))
        return s, s.q

    _, qs = jax.jit(lambda s: jax.lax.scan(body, s, None, length=100))(state)
    mj_q = []
    for _ in range(100):
        mujoco.mj_step(m, d)
        mj_q.append(d.qpos.copy())
    np.testing.assert_allclose(np.asarray(qs), np.array(mj_q), atol=2e-3)
