"""implicitfast with free bodies against MuJoCo C: standalone free bodies get MuJoCo's local 6x6 solve
with their gyroscopic bias derivative (mjd_freeMhat), a free-floating base with children does not."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

import brax_physics as bp

# Two standalone free bodies tumbling (one lands on the floor), and a damped arm with a ball joint.
XML = """<mujoco><option integrator="implicitfast" cone="elliptic" iterations="{it}" ls_iterations="{ls}"/>
<worldbody><geom type="plane" size="5 5 .1"/>
  <body pos="0 0 .3"><freejoint/><geom type="box" size=".1 .05 .02" mass="1"/>
    <geom type="sphere" pos=".1 0 0" size=".03" mass=".3"/></body>
  <body pos="0 0 2"><freejoint/><geom type="capsule" fromto="0 0 0 .3 .1 0" size=".05"/></body>
  <body pos="1 0 .5"><joint type="hinge" axis="0 1 0" damping=".3"/>
    <geom type="capsule" fromto="0 0 0 0 0 -.35" size=".05"/>
    <body pos="0 0 -.35"><joint type="ball" damping=".1"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".05"/></body></body>
</worldbody></mujoco>"""
STEPS = 100


@jax.jit
def _rollout(sys: bp.System, state: bp.State) -> jax.Array:
    def body(s: bp.State, _: None) -> tuple[bp.State, jax.Array]:
        s = bp.step(sys, s, jnp.zeros(sys.nu))
        return s, s.q

    return jax.lax.scan(body, state, None, length=STEPS)[1]


def test_free_bodies_tumble_like_mujoco() -> None:
    for it, ls in ((1, 3), (100, 50)):
        xml = XML.format(it=it, ls=ls)
        m = mujoco.MjModel.from_xml_string(xml)
        d = mujoco.MjData(m)
        d.qvel[:] = np.random.default_rng(1).normal(size=m.nv) * 3
        sys = bp.load_mjcf(xml)
        assert sys.freebody_jnts == (0, 1)
        state = bp.init(sys, jnp.asarray(d.qpos, jnp.float32), jnp.asarray(d.qvel, jnp.float32))
        want = np.zeros((STEPS, m.nq))
        for i in range(STEPS):
            mujoco.mj_step(m, d)
            want[i] = d.qpos
        got = np.asarray(_rollout(sys, state))
        np.testing.assert_allclose(got, want, atol=5e-6)
        # the gyroscopic terms matter here: without the local solve ours leaves MuJoCo's trajectory
        plain = np.asarray(_rollout(dataclasses.replace(sys, freebody_jnts=()), state))
        assert np.abs(plain - want).max() > 1e-4


def test_free_base_with_children_needs_no_local_solve() -> None:
    """mj_isFreeBody: a free joint whose body has children (a robot's base) is integrated globally."""
    xml = """<mujoco><option integrator="implicitfast"/><worldbody>
      <body><freejoint/><geom size=".1"/>
        <body pos=".2 0 0"><joint type="hinge"/><geom size=".05"/></body></body>
      <body pos="1 0 0"><freejoint/><geom size=".1"/></body></worldbody></mujoco>"""
    assert bp.load_mjcf(xml).freebody_jnts == (2,)
