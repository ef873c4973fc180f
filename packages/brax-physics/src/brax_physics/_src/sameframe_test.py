"""Frames MuJoCo's compiler marks as coinciding are copied, not read, exactly as MuJoCo's kinematics."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

import brax_physics as bp

# One body per mjtSameFrame case: a sphere at its body frame (BODY), a capsule whose inertia comes
# from the geom (INERTIA: the geom sits on the inertial frame), a rotated-only geom (BODYROT) and a
# body with an explicit inertial frame offset from, but aligned with, the body (inertial BODYROT).
XML = """<mujoco><worldbody>
  <body name="a" pos="0 0 1"><freejoint/><geom name="sphere" type="sphere" size=".1"/></body>
  <body name="b" pos="1 0 1" euler="0 30 0"><freejoint/>
    <geom name="capsule" type="capsule" fromto="0 0 0 .3 0 0" size=".05"/></body>
  <body name="c" pos="2 0 1"><freejoint/><geom name="offset" type="box" size=".1 .1 .1" pos=".1 0 0"/>
    <geom name="turned" type="box" size=".1 .1 .1" euler="0 0 30"/></body>
  <body name="d" pos="3 0 1"><freejoint/><inertial pos=".1 0 0" mass="1" diaginertia=".01 .02 .03"/>
    <geom type="sphere" size=".05" contype="0" conaffinity="0"/></body>
</worldbody></mujoco>"""


def test_sameframe_flags_cover_every_case() -> None:
    m = mujoco.MjModel.from_xml_string(XML)
    frame = mujoco.mjtSameFrame
    cases = {int(frame.mjSAMEFRAME_NONE), int(frame.mjSAMEFRAME_BODY), int(frame.mjSAMEFRAME_INERTIA)}
    assert set(np.asarray(m.geom_sameframe).tolist()) >= cases
    assert int(frame.mjSAMEFRAME_BODYROT) in np.asarray(m.body_sameframe).tolist()


def test_changes_to_coinciding_frames_act_as_in_mujoco() -> None:
    """geom_pos/geom_quat/body_ipos/body_iquat perturbed on every element: frames equal MuJoCo's."""
    m0 = mujoco.MjModel.from_xml_string(XML)
    sys = bp.from_mjmodel(m0)
    rng = np.random.default_rng(0)
    m = mujoco.MjModel.from_xml_string(XML)
    m.geom_pos[:] += rng.uniform(-0.05, 0.05, m.geom_pos.shape)
    m.body_ipos[1:] += rng.uniform(-0.05, 0.05, (m.nbody - 1, 3))
    for arr in (m.geom_quat, m.body_iquat[1:]):
        q = arr + rng.uniform(-0.2, 0.2, arr.shape)
        arr[:] = q / np.linalg.norm(q, axis=1, keepdims=True)
    d = mujoco.MjData(m)
    mujoco.mj_kinematics(m, d)
    changed = sys.replace(**{f: jnp.asarray(np.asarray(getattr(m, f)), jnp.float32)
                             for f in ("geom_pos", "geom_quat", "body_ipos", "body_iquat")})
    s = jax.jit(bp.init)(changed)
    np.testing.assert_allclose(s.geom_xpos, d.geom_xpos, atol=1e-6)
    np.testing.assert_allclose(s.geom_xmat, d.geom_xmat.reshape(-1, 3, 3), atol=1e-6)
    np.testing.assert_allclose(s.xipos, d.xipos, atol=1e-6)
    np.testing.assert_allclose(s.ximat, d.ximat.reshape(-1, 3, 3), atol=1e-6)
    # MuJoCo ignored the sphere's new geom_pos and moved the capsule with its body_ipos.
    d0 = mujoco.MjData(m0)
    mujoco.mj_kinematics(m0, d0)
    sphere, capsule = (mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, n) for n in ("sphere", "capsule"))
    np.testing.assert_array_equal(d.geom_xpos[sphere], d0.geom_xpos[sphere])
    np.testing.assert_allclose(d.geom_xpos[capsule], d.xipos[2])
    assert np.abs(d.geom_xpos[capsule] - d0.geom_xpos[capsule]).max() > 1e-3
