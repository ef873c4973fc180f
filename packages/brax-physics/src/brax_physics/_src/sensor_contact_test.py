"""Contact sensors vs MuJoCo C: matching, reductions, data fields and the flipped frame."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import brax_physics as bp

# A tilted box (with a lid welded on top) dropped on the floor, corners at distinct depths, and a
# ball dropped on the lid. The
# sensors match by geom pair in the reverse of MuJoCo's contact order (the plane is geom1: normal and
# tangent flip, force and torque z negate), by nothing, by body against a subtree, and by subtree.
MODEL = """
<mujoco>
  <option timestep="0.004"/>
  <worldbody>
    <geom name="floor" type="plane" size="0 0 1"/>
    <body name="box" pos="0 0 0.12" euler="6 4 0">
      <freejoint/>
      <geom name="box" type="box" size="0.1 0.08 0.05"/>
      <body name="lid" pos="0 0 0.06"><geom name="lid" type="box" size="0.03 0.03 0.01"/></body>
    </body>
    <body name="ball" pos="0.02 0.01 0.35"><freejoint/><geom name="ball" size="0.04"/></body>
  </worldbody>
  <sensor>
    <contact name="box_floor" geom1="box" geom2="floor" num="3" reduce="mindist"
             data="found force torque dist pos normal tangent"/>
    <contact name="any" num="6" reduce="maxforce" data="found force dist"/>
    <contact name="ball_on" body1="ball" subtree2="box" num="1" reduce="mindist" data="found force normal"/>
    <contact name="box_tree" subtree1="box" num="2" reduce="maxforce" data="force pos"/>
  </sensor>
</mujoco>
"""
STEPS = 60


@functools.cache
def _model() -> tuple[bp.System, Any]:
    m = mujoco.MjModel.from_xml_string(MODEL)
    return bp.from_mjmodel(m), m


def _rollout(sys: bp.System, s: bp.State) -> jax.Array:
    def body(s: bp.State, _: None) -> tuple[bp.State, jax.Array]:
        s = bp.step(sys, s, jnp.zeros(0))
        return s, s.sensordata

    return jax.lax.scan(body, s, None, length=STEPS)[1]


def test_contact_sensors_match_mujoco() -> None:
    sys, m = _model()
    d = mujoco.MjData(m)
    want = []
    for _ in range(STEPS):
        mujoco.mj_step(m, d)
        want.append(d.sensordata.copy())
    mj = np.stack(want)
    got = np.asarray(jax.jit(_rollout)(sys, jax.jit(bp.init)(sys)), np.float64)
    adr = {mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_SENSOR, i): m.sensor_adr[i] for i in range(m.nsensor)}
    a = adr["box_floor"]
    assert mj[-1, a] == 4 and mj[-1, a + 11 : a + 14] @ [0, 0, 1] < 0  # 4 corners; normal flipped down
    a = adr["ball_on"]
    assert mj[-1, a] == 1  # the ball rests on the lid, in the box's subtree
    # the first contacts land on different steps by float32 rounding: compare after both have landed
    landed = np.flatnonzero(mj[:, 0] == 4)[0] + 3
    assert landed < STEPS - 20
    scale = np.max(np.abs(mj), axis=0)
    err = np.abs(got[landed:] - mj[landed:]) / np.maximum(scale, 1e-3)
    assert err.max() < 1e-3, (np.unravel_index(err.argmax(), err.shape), err.max())


@pytest.mark.parametrize(
    ("attrs", "match"),
    [('site="s"', r"matching by site"), ('geom1="box" reduce="netforce"', r"reduce=netforce"),
     ('geom1="box"', r"reduce=none"), ('geom1="box" reduce="mindist" data="found linvel"', r"linvel")],
)
def test_unsupported_contact_sensors_are_refused(attrs: str, match: str) -> None:
    xml = MODEL.replace('<geom name="box"', '<site name="s" size="0.2"/><geom name="box"').replace(
        "<sensor>", f"<sensor><contact {attrs}/>")
    with pytest.raises(ValueError, match=match):
        bp.load_mjcf(xml)
