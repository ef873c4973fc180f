"""Arrays handed in by users are checked where they come in; degenerate models run."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import brax_physics as bp

PENDULUM = """<mujoco><worldbody><body><joint name="hinge" type="hinge" axis="0 1 0"/>
  <geom type="capsule" fromto="0 0 0 0 0 -.5" size=".05"/></body></worldbody>
  <actuator><motor joint="hinge"/></actuator></mujoco>"""


@functools.cache
def _pendulum() -> bp.System:
    return bp.load_mjcf(PENDULUM)


def test_init_rejects_wrong_lengths() -> None:
    sys = _pendulum()
    with pytest.raises(ValueError, match=r"init: q has shape \(2,\), expected \(1,\) \(sys.nq\)"):
        bp.init(sys, jnp.zeros(2))
    with pytest.raises(ValueError, match=r"init: qd has shape \(\), expected \(1,\) \(sys.nv\)"):
        bp.init(sys, qd=jnp.zeros(()))
    with pytest.raises(ValueError, match=r"init: act has shape \(3,\), expected \(1,\) \(sys.nu\)"):
        jax.jit(bp.init)(sys, act=jnp.zeros(3))
    with pytest.raises(ValueError, match=r"init: q must be floating point, got dtype int32"):
        bp.init(sys, jnp.zeros(1, jnp.int32))


def test_init_outside_jit_is_one_compiled_program() -> None:
    """Outside jit, init and forward_kinematics run one cached program per model structure, shared by
    equal loads."""
    from brax_physics._src import pipeline

    init_fn: Any = pipeline._init_compiled  # jax.jit's wrapper; its cache methods are untyped
    fk_fn: Any = pipeline._forward_kinematics_compiled
    init_fn.clear_cache()
    fk_fn.clear_cache()
    first, again = bp.load_mjcf(PENDULUM), bp.load_mjcf(PENDULUM)
    q: Any = np.asarray([0.3])
    as_list: Any = [0.3]  # a list, as before: a float array
    eager = [bp.init(first, q), bp.init(again, q), bp.init(first, as_list)]
    assert init_fn._cache_size() == 1
    inside = jax.jit(lambda q: bp.init(first, q))(jnp.asarray(q, jnp.float32))
    for s in eager:
        for a, b in zip(jax.tree.leaves(s), jax.tree.leaves(inside), strict=True):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert float(eager[0].q[0]) == pytest.approx(0.3)
    frames = [bp.forward_kinematics(first, q), bp.forward_kinematics(again, as_list)]
    assert fk_fn._cache_size() == 1
    for x in frames:
        np.testing.assert_array_equal(np.asarray(x.pos), np.asarray(inside.x.pos))
        np.testing.assert_array_equal(np.asarray(x.rot), np.asarray(inside.x.rot))


def test_step_rejects_wrong_action_under_jit_and_vmap() -> None:
    sys = _pendulum()
    state = bp.init(sys)
    with pytest.raises(ValueError, match=r"step: act has shape \(2,\), expected \(1,\) \(sys.nu\)"):
        jax.jit(bp.step)(sys, state, jnp.zeros(2))
    batch = jax.tree.map(lambda x: jnp.stack([x, x]), state)
    with pytest.raises(ValueError, match=r"step: act has shape \(\), expected \(1,\)"):
        jax.vmap(bp.step, in_axes=(None, 0, 0))(sys, batch, jnp.zeros(2))
    # The right shapes pass, batched or not.
    out = jax.vmap(bp.step, in_axes=(None, 0, 0))(sys, batch, jnp.ones((2, 1)))
    assert out.q.shape == (2, 1)


def test_replace_checks_leaves_and_refuses_static_fields() -> None:
    sys = _pendulum()
    with pytest.raises(ValueError, match=r"body_mass has shape \(3,\), expected \(2,\)"):
        sys.replace(body_mass=jnp.ones(3))
    with pytest.raises(ValueError, match=r"geom_friction must be a floating-point array, got dtype int32"):
        sys.replace(geom_friction=jnp.ones((1, 3), jnp.int32))
    with pytest.raises(ValueError, match=r"no field 'body_mas' \(did you mean 'body_mass'\?\)"):
        sys.replace(body_mas=jnp.ones(2))
    for name, value in (("nq", 3), ("geom_condim", (1,)), ("contact_pairs", sys.contact_pairs),
                        ("jnt_limited", (True,))):
        with pytest.raises(ValueError, match=rf"{name} is static: .*load_mjcf"):
            sys.replace(**{name: value})
    with pytest.raises(ValueError, match=r"sys.opt.replace: gravity has shape \(2,\), expected \(3,\)"):
        sys.opt.replace(gravity=jnp.zeros(2))
    # Leading batch axes (for vmap), Python numbers for scalar leaves and static options are accepted.
    assert sys.replace(body_mass=jnp.ones((4, 2))).body_mass.shape == (4, 2)
    opt = sys.opt.replace(timestep=0.01, iterations=3)
    assert opt.iterations == 3 and opt.iterations.dtype == jnp.float32  # the leaf's dtype, not a weak int
    with pytest.raises(ValueError, match=r"sys.opt.replace: iterations must be a whole number, got 2.5"):
        sys.opt.replace(iterations=2.5)
    # Inside vmap each member has the leaf's own shape.
    masses = jax.vmap(lambda m: sys.replace(body_mass=m).body_mass)(jnp.ones((5, 2)))
    assert masses.shape == (5, 2)


@pytest.mark.parametrize("xml", [
    """<mujoco><worldbody><geom type="plane" size="1 1 .1"/>
      <body pos="0 0 .05"><geom type="box" size=".1 .1 .1"/></body></worldbody></mujoco>""",
    """<mujoco><worldbody><geom type="sphere" size=".1"/></worldbody></mujoco>""",
])
def test_model_without_degrees_of_freedom_initializes_and_steps(xml: str) -> None:
    """A static scene (nv = 0) steps like MuJoCo: time advances, frames stay where MuJoCo puts them."""
    sys = bp.load_mjcf(xml)
    assert sys.nv == 0
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    steps: Any = jax.jit(lambda s: jax.lax.scan(lambda c, _: (bp.step(sys, c, jnp.zeros(0)), None), s, None,
                                                length=3)[0])
    state = steps(bp.init(sys))
    for _ in range(3):
        mujoco.mj_step(m, d)
    assert float(state.time) == pytest.approx(d.time)
    np.testing.assert_allclose(state.x.pos, d.xpos, atol=1e-7)
    batched = jax.vmap(lambda _: steps(bp.init(sys)))(jnp.arange(2))
    assert batched.q.shape == (2, 0)


def test_replace_builds_vmap_axis_trees() -> None:
    """The in_axes idiom of Brax and Playground: a System of None with 0 on the randomized leaves."""
    sys = _pendulum()
    axes = jax.tree.map(lambda _: None, sys).replace(body_mass=0, geom_friction=0)
    assert axes.body_mass == 0 and axes.geom_friction == 0 and axes.dof_damping is None
