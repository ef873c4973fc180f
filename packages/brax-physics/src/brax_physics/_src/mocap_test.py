"""Mocap bodies vs MuJoCo C: State.mocap_pos/mocap_quat set between steps, as mjData's."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import brax_physics as bp

# A mocap paddle moved along a path (and turned, its quaternion left unnormalized) pushes a free
# box across the floor; a pendulum hangs from the paddle on a hinge, so the paddle's pose moves a
# jointed subtree. A second mocap body sits on the floor: mocap-floor and mocap-mocap pairs do not
# collide (MuJoCo skips pairs of dof-less bodies).
MODEL = """
<mujoco>
  <option timestep="0.004"/>
  <worldbody>
    <geom name="floor" type="plane" size="0 0 1"/>
    <body name="paddle" mocap="true" pos="-0.16 0 0.08">
      <geom type="box" size="0.05 0.15 0.05"/>
      <body name="bob" pos="0 0 0.2">
        <joint name="swing" type="hinge" axis="0 1 0" damping="0.01"/>
        <geom type="capsule" fromto="0 0 0 0.1 0 0.1" size="0.02" mass="2" contype="0" conaffinity="0"/>
      </body>
    </body>
    <body name="post" mocap="true" pos="1 1 0.05" quat="0.9 0 0 0.3">
      <geom type="box" size="0.05 0.05 0.1"/>
    </body>
    <body name="box" pos="0 0 0.1"><freejoint/><geom type="box" size="0.1 0.1 0.1"/></body>
  </worldbody>
</mujoco>
"""

STEPS = 60


def _path(t: float) -> tuple[np.ndarray, np.ndarray]:
    """Paddle pose at time t: 0.6 m/s along x, turning about z at 1 rad/s (quaternion scaled by 2)."""
    pos = np.array([-0.16 + 0.6 * t, 0.02 * np.sin(10 * t), 0.08])
    quat = 2 * np.array([np.cos(t / 2), 0, 0, np.sin(t / 2)])
    return pos, quat


@functools.cache
def _model() -> tuple[bp.System, Any]:
    m = mujoco.MjModel.from_xml_string(MODEL)
    return bp.from_mjmodel(m), m


def _rollout(sys: bp.System, state: bp.State, mpos: jax.Array, mquat: jax.Array) -> tuple[jax.Array, ...]:
    def body(s: bp.State, mocap: tuple[jax.Array, jax.Array]) -> tuple[bp.State, tuple[jax.Array, ...]]:
        s = bp.step(sys, s.replace(mocap_pos=s.mocap_pos.at[0].set(mocap[0]),
                                   mocap_quat=s.mocap_quat.at[0].set(mocap[1])), jnp.zeros(0))
        return s, (s.q, s.x.pos, s.mocap_pos)

    return jax.lax.scan(body, state, (mpos, mquat))[1]


def test_init_takes_mocap_from_the_model_and_reads_it() -> None:
    sys, m = _model()
    assert (sys.nmocap, sys.body_mocapid) == (2, (-1, 0, -1, 1, -1))
    d = mujoco.MjData(m)
    s = jax.jit(bp.init)(sys)
    np.testing.assert_allclose(s.mocap_pos, d.mocap_pos, atol=1e-7)
    np.testing.assert_allclose(s.mocap_quat, d.mocap_quat, atol=1e-7)
    # moved mocap bodies: the frames of their subtrees follow
    d.mocap_pos[1] = (0.3, -0.2, 0.4)
    d.mocap_quat[0] = (0.3, 0.1, 0.5, 0.2)  # unnormalized: both normalize it
    mujoco.mj_kinematics(m, d)
    x = jax.jit(bp.forward_kinematics)(sys, sys.qpos0, jnp.asarray(d.mocap_pos, jnp.float32),
                              jnp.asarray(d.mocap_quat, jnp.float32))
    np.testing.assert_allclose(x.pos, d.xpos, atol=1e-6)
    np.testing.assert_allclose(x.rot, d.xquat, atol=1e-6)


def test_mocap_path_pushes_a_box_as_in_mujoco() -> None:
    sys, m = _model()
    d = mujoco.MjData(m)
    d.qvel[0] = 1.0  # the pendulum starts swinging
    times = np.arange(STEPS) * m.opt.timestep
    path = [_path(float(t)) for t in times]
    qs, xpos = [], []
    for pos, quat in path:
        d.mocap_pos[0], d.mocap_quat[0] = pos, quat
        mujoco.mj_step(m, d)
        mujoco.mj_kinematics(m, d)  # frames of the new qpos, as the state's
        qs.append(d.qpos.copy())
        xpos.append(d.xpos.copy())
    assert d.ncon > 0 and np.any(d.contact.geom[:, 0] == 0)  # the paddle touches the box
    assert d.qpos[1] > 0.05  # the box was pushed

    s0 = jax.jit(bp.init)(sys, qd=jnp.asarray(np.eye(m.nv)[0], jnp.float32))
    q, x, mpos = jax.jit(_rollout)(sys, s0, jnp.asarray(np.stack([p for p, _ in path]), jnp.float32),
                                   jnp.asarray(np.stack([r for _, r in path]), jnp.float32))
    np.testing.assert_allclose(np.asarray(q)[:10], np.stack(qs)[:10], atol=2e-5)
    np.testing.assert_allclose(np.asarray(q), np.stack(qs), atol=2e-4)
    np.testing.assert_allclose(np.asarray(x), np.stack(xpos), atol=2e-4)
    # step carries mocap unchanged: the last state holds the last path point
    np.testing.assert_allclose(np.asarray(mpos)[-1], d.mocap_pos, atol=1e-6)


def test_contacts_at_a_pose_are_mujocos() -> None:
    sys, m = _model()
    d = mujoco.MjData(m)
    d.qpos[1:4] = (0.0, 0.0, 0.095)  # the box sinks 5 mm into the floor
    d.mocap_pos[0] = (0.1, 0.0, 0.08)  # the paddle moved into the box
    mujoco.mj_forward(m, d)
    c = jax.jit(bp.contacts)(sys, jnp.asarray(d.qpos, jnp.float32), jnp.asarray(d.mocap_pos, jnp.float32))
    active = np.asarray(c.active)
    assert active.sum() == d.ncon
    got = np.sort(np.asarray(c.dist)[active])
    np.testing.assert_allclose(got, np.sort(d.contact.dist[:d.ncon]), atol=1e-6)
    with pytest.raises(ValueError, match="contacts: q has shape"):
        bp.contacts(sys, jnp.zeros(3))
