"""Loading MJCF: supported-subset errors, file includes, System as a pytree."""

from __future__ import annotations

import pathlib
import pickle
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import brax_physics as bp
from brax_physics._src import models_testutil as tm


@pytest.mark.parametrize(
    ("xml", "match"),
    [
        (tm.WITH_TENDON, r"tendon 't1' \(<fixed>\): actuatorfrcrange is not supported"),
        (tm.WITH_FLEX_EQUALITY, r"equality #0 \(<flex>\): flex equality constraints are not supported"),
        (tm.WITH_USER_ACTUATOR, r"actuator 'a_user': dyntype=user is not supported"),
        (tm.WITH_BODY_ACTUATOR, r"actuator 'a_body': trntype=body is not supported"),
        (tm.WITH_BALL_SERVO, r"actuator 'a_servo': a servo on a rotational .* wraps its setpoint"),
        (tm.PENDULUM.replace('<option timestep="0.01"/>', '<option integrator="implicit"/>'),
         r"integrator=implicit is not supported"),
        (tm.PENDULUM.replace('name="rod"', 'name="rod" fluidshape="ellipsoid"').replace(
            '<option timestep="0.01"/>', '<option density="1.2"/>'), r"geom 'rod': fluidshape=ellipsoid"),
        (tm.PENDULUM.replace('name="pole"', 'name="pole" gravcomp="1"').replace(
            'type="hinge"', 'type="hinge" actuatorgravcomp="true"'), r"joint 'hinge': actuatorgravcomp=true"),
    ],
)
def test_unsupported_features_raise_naming_the_element(xml: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        bp.load_mjcf(xml)


@pytest.mark.parametrize(
    "xml",
    [
        tm.WITH_BALL_LIMIT,
        tm.PENDULUM.replace('name="pole"', 'name="pole" gravcomp="1"'),
        tm.FREE_BODY.replace("<freejoint", '<joint type="free" stiffness="1"'),
        tm.PENDULUM.replace('<body name="pole"', '<body name="target" mocap="true"/><body name="pole"'),
    ],
    ids=["ball_limit", "gravcomp", "free_stiffness", "mocap"],
)
def test_features_that_mujoco_mjx_has_load(xml: str) -> None:
    assert bp.load_mjcf(xml).nbody > 1


def test_load_from_path_resolves_includes(tmp_path: pathlib.Path) -> None:
    sub = tmp_path / "parts"
    sub.mkdir()
    (sub / "arm.xml").write_text(
        '<mujoco><body name="link" pos="0 0 1"><joint name="hinge" axis="0 1 0"/>'
        '<geom type="sphere" size="0.1" pos="0.3 0 0"/></body></mujoco>'
    )
    (tmp_path / "model.xml").write_text(
        '<mujoco><worldbody><include file="parts/arm.xml"/></worldbody></mujoco>'
    )
    for path in (tmp_path / "model.xml", str(tmp_path / "model.xml")):
        sys = bp.load_mjcf(path)
        assert (sys.nbody, sys.nq, sys.body_names) == (2, 1, ("world", "link"))


def test_from_mjmodel_mirrors_mujoco_fields() -> None:
    m = mujoco.MjModel.from_xml_string(tm.CHAIN7)
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT  # its capsule-cylinder pair has no collider
    sys = bp.from_mjmodel(m)
    assert (sys.nq, sys.nv, sys.nbody, sys.njnt, sys.ngeom) == (m.nq, m.nv, m.nbody, m.njnt, m.ngeom)
    assert sys.jnt_type == tuple(m.jnt_type.tolist())
    assert sys.dof_parentid == tuple(m.dof_parentid.tolist())
    np.testing.assert_allclose(np.asarray(sys.qpos0), m.qpos0, rtol=1e-6)  # ref angles in radians
    np.testing.assert_allclose(np.asarray(sys.qpos_spring), m.qpos_spring, rtol=1e-6)
    assert float(sys.dt) == pytest.approx(0.002)
    assert all(leaf.dtype == jnp.float32 for leaf in jax.tree.leaves(sys))


# its cylinder base and capsule links would form a pair without a collider
_ARM = tm.ACTUATED_ARM.replace('<option timestep="0.004"/>',
                               '<option timestep="0.004"><flag contact="disable"/></option>')


def test_system_is_a_pytree_with_static_structure() -> None:
    sys = bp.load_mjcf(_ARM)
    leaves, treedef_ = jax.tree.flatten(sys)
    treedef: Any = treedef_  # PyTreeDef's stub lacks __eq__
    again = jax.tree.unflatten(treedef, leaves)
    assert jax.tree.structure(again) == treedef
    heavier = sys.replace(body_mass=sys.body_mass * 2.0)
    assert jax.tree.structure(heavier) == treedef  # same compiled program serves both
    assert hash(treedef) == hash(jax.tree.structure(bp.load_mjcf(_ARM)))
    # collision pairs compare by value: one compile per model, whichever load it came from
    contact: Any = jax.tree.structure(bp.load_mjcf(tm.CONTACT_SCENE))
    assert contact == jax.tree.structure(bp.load_mjcf(tm.CONTACT_SCENE))
    assert sys.actuator_ctrllimited == (True, True, False, True)
    restored = pickle.loads(pickle.dumps(sys))
    assert jax.tree.structure(restored) == treedef


def test_forward_kinematics_matches_mujoco() -> None:
    m = mujoco.MjModel.from_xml_string(tm.TWO_ROOTS)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(0)
    d.qpos[:] = m.qpos0 + 0.5 * rng.standard_normal(m.nq)
    d.qpos[5:9] /= np.linalg.norm(d.qpos[5:9])
    mujoco.mj_kinematics(m, d)
    x = jax.jit(bp.forward_kinematics)(bp.from_mjmodel(m), jnp.asarray(d.qpos, jnp.float32))
    np.testing.assert_allclose(np.asarray(x.pos), d.xpos, atol=1e-5)
    sign = np.sign(np.asarray(x.rot)[:, :1] * d.xquat[:, :1])
    np.testing.assert_allclose(np.asarray(x.rot) * sign, d.xquat, atol=1e-5)
