"""Tendons vs MuJoCo C: lengths, Jacobians, velocities, passive forces, constraint rows, trajectories."""

from __future__ import annotations

import functools
import importlib.util
import os
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import brax_physics as bp
from brax_physics._src import constraint, pipeline, tendon

# Fixed tendons over hinge and slide joints; spatial tendons through sites on a chain, a ball-jointed
# body and a free body, one with a pulley (two branches, the second divided by 2).
TENDONS = """
<mujoco model="tendons">
  <option timestep="0.005"/>
  <worldbody>
    <site name="anchor" pos="0 0 1.5"/>
    <site name="anchor2" pos="0.5 0.2 1.2"/>
    <body name="upper" pos="0 0 1">
      <joint name="shoulder" type="hinge" axis="0 1 0" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.04"/>
      <site name="s_upper" pos="0.2 0 0.05"/>
      <body name="lower" pos="0.4 0 0">
        <joint name="elbow" type="hinge" axis="0 1 0"/>
        <joint name="extend" type="slide" axis="1 0 0"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
        <site name="s_lower" pos="0.15 0.02 -0.04"/>
        <body name="hand" pos="0.3 0 0">
          <joint name="wrist" type="ball"/>
          <geom type="box" size="0.05 0.03 0.02" pos="0.05 0 0"/>
          <site name="s_hand" pos="0.1 0.02 0"/>
        </body>
      </body>
    </body>
    <body name="ball" pos="0.6 0.3 0.8">
      <freejoint/>
      <geom type="sphere" size="0.05"/>
      <site name="s_ball" pos="0.03 0 0.04"/>
    </body>
  </worldbody>
  <tendon>
    <fixed name="coupling">
      <joint joint="shoulder" coef="1.5"/>
      <joint joint="elbow" coef="-0.7"/>
      <joint joint="extend" coef="2"/>
    </fixed>
    <spatial name="arm">
      <site site="anchor"/>
      <site site="s_upper"/>
      <site site="s_lower"/>
      <site site="s_hand"/>
    </spatial>
    <spatial name="rope">
      <site site="anchor2"/>
      <site site="s_ball"/>
      <pulley divisor="2"/>
      <site site="s_hand"/>
      <site site="s_ball"/>
    </spatial>
  </tendon>
</mujoco>
"""


def _dense_ten_J(m: Any, d: Any) -> np.ndarray:
    out = np.zeros((m.ntendon, m.nv))
    mujoco.mju_sparse2dense(out, d.ten_J, m.ten_J_rownnz, m.ten_J_rowadr, m.ten_J_colind)
    return out


def _random_state(m: Any, seed: int, pos: float = 0.6, vel: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    q = m.qpos0.copy()
    qd = rng.normal(size=m.nv) * vel
    mujoco.mj_integratePos(m, q, rng.normal(size=m.nv) * pos, 1.0)
    return q, qd


@functools.cache
def _model(xml: str) -> tuple[bp.System, Any]:
    load = mujoco.MjModel.from_xml_string if xml.lstrip().startswith("<") else mujoco.MjModel.from_xml_path
    m = load(xml)
    # Gymnasium's humanoid asks for PGS, which we solve with Newton (same optimum): compare with
    # MuJoCo's Newton so trajectories agree to the solver tolerance.
    m.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    return bp.from_mjmodel(m), m


_init = jax.jit(bp.init)


def _compare_position(xml: str, seeds: tuple[int, ...]) -> None:
    sys, m = _model(xml)
    d = mujoco.MjData(m)
    for seed in seeds:
        q, qd = _random_state(m, seed)
        d.qpos[:], d.qvel[:] = q, qd
        mujoco.mj_forward(m, d)
        s = _init(sys, jnp.asarray(q, jnp.float32), jnp.asarray(qd, jnp.float32))
        scale = 1 + np.abs(d.ten_length)
        np.testing.assert_allclose(s.ten_length, d.ten_length, atol=2e-6 * scale.max())
        np.testing.assert_allclose(s.ten_J, _dense_ten_J(m, d), atol=1e-5)
        vscale = (1 + np.abs(d.ten_velocity)).max()
        np.testing.assert_allclose(s.ten_velocity, d.ten_velocity, atol=2e-5 * vscale)


def test_length_jacobian_velocity_match_mujoco() -> None:
    _compare_position(TENDONS, (0, 1, 2))


def _gym_humanoid() -> str:
    import gymnasium

    return os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets", "humanoid.xml")


def test_gym_humanoid_tendons_match_mujoco() -> None:
    _compare_position(_gym_humanoid(), (0, 1))


def _suite(name: str) -> str:
    spec = importlib.util.find_spec("dm_control")
    assert spec is not None and spec.origin is not None, "dm_control (a test oracle) is not installed"
    return os.path.join(os.path.dirname(spec.origin), "suite", f"{name}.xml")


def test_ball_in_cup_trajectory_matches_mujoco() -> None:
    """0.1 s with zero control from qpos0: the ball drops until the string's limit catches it.

    (Gymnasium's humanoid, the other tendon model nobody here wrote, runs in
    tests-integration/physics/mjcf_corpus_test.py with the same criterion.)
    """
    path = _suite("ball_in_cup")
    _, m = _model(path)
    steps = round(0.1 / m.opt.timestep)
    q, want_q, _, _ = _rollout(path, steps, pos=0.0, vel=0.0)
    assert np.max(np.abs(q - want_q)) < 5e-3
    d = mujoco.MjData(m)
    for _ in range(steps):
        mujoco.mj_step(m, d)
    assert mujoco.mjtConstraint.mjCNSTR_LIMIT_TENDON in d.efc_type


def test_models_without_tendons_have_empty_fields() -> None:
    sys = bp.load_mjcf('<mujoco><worldbody><body><joint/><geom size=".1"/></body></worldbody></mujoco>')
    s = bp.init(sys)
    assert s.ten_length.shape == (0,) and s.ten_J.shape == (0, 1) and s.ten_velocity.shape == (0,)


def test_step_stores_new_lengths_and_the_transitions_velocity() -> None:
    sys, m = _model(TENDONS)
    q, qd = _random_state(m, 3)
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = q, qd
    s = _init(sys, jnp.asarray(q, jnp.float32), jnp.asarray(qd, jnp.float32))
    s = jax.jit(bp.step)(sys, s, jnp.zeros(0))
    mujoco.mj_step(m, d)
    vel_before = d.ten_velocity.copy()  # mj_step's mj_forward ran at the step's start
    mujoco.mj_forward(m, d)
    np.testing.assert_allclose(s.ten_length, d.ten_length, atol=1e-5)
    np.testing.assert_allclose(s.ten_velocity, vel_before, atol=1e-4)


# Springs with dead bands (the fixed tendon's [0.1, 0.3], the rope's rest length), dampers and the
# fixed tendon's armature; the shoulder also has dof damping (Euler's implicit part).
PASSIVE = (
    TENDONS
    .replace('<fixed name="coupling">',
             '<fixed name="coupling" stiffness="3" springlength="0.1 0.3" damping="0.4" armature="0.05">')
    .replace('<spatial name="arm">', '<spatial name="arm" stiffness="20" damping="0.5">')
    .replace('<spatial name="rope">', '<spatial name="rope" stiffness="8" springlength="0.6" damping="1.2">')
)


def test_passive_forces_and_armature_match_mujoco() -> None:
    sys, m = _model(PASSIVE)
    d = mujoco.MjData(m)
    lengths = []
    inside = _random_state(m, 0)[0].copy()
    inside[:3] = (0.13, 0.0, 0.0)  # shoulder, elbow, extend: coupling length 0.195
    for q, qd in [_random_state(m, seed) for seed in (0, 1, 2)] + [(inside, _random_state(m, 4)[1])]:
        d.qpos[:], d.qvel[:] = q, qd
        mujoco.mj_forward(m, d)
        lengths.append(d.ten_length[0])
        s = _init(sys, jnp.asarray(q, jnp.float32), jnp.asarray(qd, jnp.float32))
        np.testing.assert_allclose(s.qfrc_passive, d.qfrc_passive, rtol=1e-4, atol=1e-4)
        full = np.zeros((m.nv, m.nv))
        mujoco.mj_fullM(m, d, full)
        np.testing.assert_allclose(s.mass_matrix, full, rtol=1e-5, atol=1e-6)
    # the fixed tendon's spring is seen below, inside and above its dead band
    assert min(lengths) < 0.1 and max(lengths) > 0.3 and any(0.1 < x < 0.3 for x in lengths)


def _rollout(xml: str, steps: int, seed: int = 5, pos: float = 0.6,
             vel: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Ours and MuJoCo's (qpos, sensordata) after each of `steps` steps from a random state."""
    sys, m = _model(xml)
    q, qd = _random_state(m, seed, pos, vel)
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = q, qd

    def body(s: bp.State, _: None) -> tuple[bp.State, tuple[jax.Array, jax.Array]]:
        s = bp.step(sys, s, jnp.zeros(sys.nu))
        return s, (s.q, s.sensordata)

    s0 = bp.init(sys, jnp.asarray(q, jnp.float32), jnp.asarray(qd, jnp.float32))
    _, (qs, data) = jax.jit(lambda s: jax.lax.scan(body, s, None, length=steps))(s0)
    want_q, want_data = [], []
    for _ in range(steps):
        mujoco.mj_step(m, d)
        want_q.append(d.qpos.copy())
        want_data.append(d.sensordata.copy())
    return np.asarray(qs), np.stack(want_q), np.asarray(data), np.stack(want_data)


def _rollout_error(xml: str, steps: int, seed: int = 5, pos: float = 0.6, vel: float = 1.0) -> float:
    q, want_q, _, _ = _rollout(xml, steps, seed, pos, vel)
    return float(np.max(np.abs(q - want_q)))


@pytest.mark.parametrize("integrator", ["Euler", "implicitfast"])
def test_passive_trajectory_matches_mujoco(integrator: str) -> None:
    xml = PASSIVE.replace('timestep="0.005"', f'timestep="0.005" integrator="{integrator}"')
    if integrator == "implicitfast":  # no free joints there: the ball slides in x and z instead
        slides = '<joint type="slide" axis="0 0 1"/><joint type="slide" axis="1 0 0"/>'
        xml = xml.replace("<freejoint/>", slides)
    assert _rollout_error(xml, 60) < 2e-4


# Armature on both spatial tendons (through the ball-jointed hand and the free ball, one with a
# pulley): MuJoCo adds armature·JᵀJ to M and armature·(J̇·qvel)·J to qfrc_bias (mj_tendonBias).
ARMATURE = (
    TENDONS
    .replace('<spatial name="arm">', '<spatial name="arm" armature="0.4">')
    .replace('<spatial name="rope">', '<spatial name="rope" armature="0.3">')
)


def test_spatial_tendon_armature_matches_mujoco() -> None:
    sys, m = _model(ARMATURE)
    assert sys.tendon_bias and not _model(TENDONS)[0].tendon_bias  # no armature: nothing traced
    plain = _model(TENDONS)[1]
    d, d0 = mujoco.MjData(m), mujoco.MjData(plain)
    for seed in (0, 1, 2):
        q, qd = _random_state(m, seed, vel=3.0)
        for mm_, dd in ((m, d), (plain, d0)):
            dd.qpos[:], dd.qvel[:] = q, qd
            mujoco.mj_forward(mm_, dd)
        s = _init(sys, jnp.asarray(q, jnp.float32), jnp.asarray(qd, jnp.float32))
        full = np.zeros((m.nv, m.nv))
        mujoco.mj_fullM(m, d, full)
        np.testing.assert_allclose(s.mass_matrix, full, rtol=1e-5, atol=1e-6)
        atol = 1e-4 * (1 + np.max(np.abs(d.qfrc_bias)))
        np.testing.assert_allclose(s.qfrc_bias, d.qfrc_bias, atol=atol)
        assert np.max(np.abs(d.qfrc_bias - d0.qfrc_bias)) > 100 * atol  # the armature's bias matters
    assert _rollout_error(ARMATURE, 60, vel=2.0) < 2e-4


# Rows of every kind in MuJoCo's order: dof friction (elbow), tendon friction (coupling, arm), joint
# limit (shoulder), tendon limits (coupling; rope with a margin and its own solref/solimp); no contacts.
ROWS = (
    TENDONS
    .replace('<option timestep="0.005"/>', '<option timestep="0.005"><flag contact="disable"/></option>')
    .replace('<joint name="shoulder" type="hinge" axis="0 1 0" damping="0.1"/>',
             '<joint name="shoulder" type="hinge" axis="0 1 0" damping="0.1" range="-40 40"/>')
    .replace('<joint name="elbow" type="hinge" axis="0 1 0"/>',
             '<joint name="elbow" type="hinge" axis="0 1 0" frictionloss="0.2"/>')
    .replace('<fixed name="coupling">', '<fixed name="coupling" range="-0.4 0.4" frictionloss="0.3">')
    .replace('<spatial name="arm">', '<spatial name="arm" frictionloss="0.1" solreffriction="0.05 1">')
    .replace('<spatial name="rope">', '<spatial name="rope" range="0.5 0.9" margin="0.05" '
             'solreflimit="0.03 0.8" solimplimit="0.8 0.9 0.02 0.4 3">')
    .replace("</tendon>", """</tendon>
  <sensor>
    <tendonpos tendon="rope"/>
    <tendonvel tendon="coupling"/>
    <tendonactuatorfrc tendon="rope"/>
    <tendonlimitpos tendon="coupling"/>
    <tendonlimitvel tendon="rope"/>
    <tendonlimitfrc tendon="rope"/>
    <tendonlimitfrc tendon="coupling"/>
  </sensor>""")
)


@jax.jit
def _rows(sys: bp.System, q: jax.Array, qd: jax.Array) -> tuple[constraint.Rows, jax.Array]:
    pos = pipeline._position(sys, q)
    rows = constraint.make_rows(sys, q, pos.cdof, pos.subtree_com, pos.contact, pos.ten_length, pos.ten_J)
    return rows, constraint.reference_acceleration(rows, qd)


def test_constraint_rows_match_mujoco() -> None:
    sys, m = _model(ROWS)
    lay = constraint.layout(sys)
    c = mujoco.mjtConstraint
    kinds = np.repeat(
        [c.mjCNSTR_FRICTION_DOF, c.mjCNSTR_FRICTION_TENDON, c.mjCNSTR_LIMIT_JOINT, c.mjCNSTR_LIMIT_TENDON],
        [lay.floss_dofs.size, lay.floss_tendons.size, lay.limit_jnts.size, lay.limit_tendons.size])
    assert lay.nefc == kinds.size == 6
    d = mujoco.MjData(m)
    seen = 0
    for seed in range(40):
        q, qd = _random_state(m, seed)
        d.qpos[:], d.qvel[:] = q, qd
        mujoco.mj_forward(m, d)
        rows, aref = _rows(sys, jnp.asarray(q, jnp.float32), jnp.asarray(qd, jnp.float32))
        act = np.asarray(rows.active)
        np.testing.assert_array_equal(kinds[act], d.efc_type)
        np.testing.assert_allclose(np.asarray(rows.J)[act], d.efc_J.reshape(d.nefc, m.nv), atol=2e-5)
        assert not np.any((np.asarray(rows.J) != 0) & ~constraint.row_dofs(sys))  # the static support holds
        np.testing.assert_allclose(np.asarray(rows.R)[act], d.efc_R, rtol=2e-4)
        np.testing.assert_allclose(np.asarray(rows.floss)[act], d.efc_frictionloss, rtol=1e-6)
        atol = 1e-3 * np.max(np.abs(d.efc_aref))
        np.testing.assert_allclose(np.asarray(aref)[act], d.efc_aref, rtol=2e-3, atol=atol)
        seen += int(np.sum(d.efc_type == c.mjCNSTR_LIMIT_TENDON) == 2)
    assert seen >= 2  # both tendon limits active at once, in several poses


def test_tendon_limit_trajectory_and_sensors_match_mujoco() -> None:
    q, want_q, data, want_data = _rollout(ROWS, 60, seed=3, pos=0.3, vel=0.3)
    assert np.max(np.abs(q - want_q)) < 2e-4
    np.testing.assert_allclose(data, want_data, rtol=1e-3, atol=1e-3 * np.max(np.abs(want_data)))
    # the limit sensors saw both limits engaged (and not engaged)
    limits = want_data[:, [3, 4, 5, 6]]
    assert np.all(np.any(limits != 0, axis=0)) and np.all(np.any(limits == 0, axis=0))


GRAD_ARM = """
<mujoco model="tendon_grad">
  <option timestep="0.005"/>
  <worldbody>
    <site name="anchor" pos="0.3 0 1.4"/>
    <body name="upper" pos="0 0 1">
      <joint name="shoulder" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.04"/>
      <site name="s_upper" pos="0.3 0 0"/>
      <body name="lower" pos="0.4 0 0">
        <joint name="elbow" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
        <site name="s_lower" pos="0.3 0.05 0"/>
      </body>
    </body>
  </worldbody>
  <tendon>
    <fixed name="couple" stiffness="5" damping="0.3" springlength="0 0">
      <joint joint="shoulder" coef="1"/>
      <joint joint="elbow" coef="-0.5"/>
    </fixed>
    <spatial name="cord" stiffness="30" springlength="0.3" damping="0.2">
      <site site="anchor"/>
      <site site="s_upper"/>
      <site site="s_lower"/>
    </spatial>
  </tendon>
</mujoco>
"""


def test_gradient_through_tendon_steps_matches_finite_differences() -> None:
    sys, _ = _model(GRAD_ARM)

    def final_q_sum(qd0: jax.Array, stiffness: jax.Array) -> jax.Array:
        s_ = sys.replace(tendon_stiffness=stiffness)
        s = bp.init(s_, qd=qd0)
        s, _ = jax.lax.scan(lambda st, _: (bp.step(s_, st, jnp.zeros(0)), None), s, None, length=20)
        return jnp.sum(s.q)

    qd0 = jnp.asarray([1.0, -2.0])
    k = sys.tendon_stiffness
    f = jax.jit(final_q_sum)
    g_qd, g_k = jax.jit(jax.grad(final_q_sum, argnums=(0, 1)))(qd0, k)
    assert np.all(np.isfinite(g_qd)) and np.all(np.isfinite(g_k))
    assert np.min(np.abs(g_k)) > 1e-4  # both springs matter
    for x, g, eps in ((qd0, g_qd, 1e-2), (k, g_k, 0.5)):
        for i in range(x.shape[0]):
            e = jnp.zeros_like(x).at[i].set(eps)
            args_p = (qd0 + e, k) if x is qd0 else (qd0, k + e)
            args_m = (qd0 - e, k) if x is qd0 else (qd0, k - e)
            fd = (float(f(*args_p)) - float(f(*args_m))) / (2 * eps)
            assert abs(float(g[i]) - fd) <= 2e-2 * abs(fd) + 1e-4, (i, float(g[i]), fd)


# Spatial tendons wrapping a sphere and a cylinder (axis along y), with and without side sites, and
# both in one tendon across a pulley.
WRAP = """
<mujoco model="wrap">
  <option><flag contact="disable"/></option>
  <worldbody>
    <site name="a" pos="-0.3 0 1.0"/>
    <body name="arm" pos="0 0 1">
      <joint name="j1" axis="0 1 0"/>
      <joint name="j2" axis="1 0 0"/>
      <geom name="sph" type="sphere" size="0.1" pos="0.2 0 0"/>
      <geom name="cyl" type="cylinder" size="0.08 0.1" pos="0.5 0 0" euler="90 0 0"/>
      <site name="side1" pos="0.2 0 0.3"/>
      <site name="side2" pos="0.5 0 -0.3"/>
      <body name="fore" pos="0.7 0 0">
        <joint name="j3" axis="0 1 0"/>
        <joint name="j4" type="slide" axis="0 0 1"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02"/>
        <site name="b" pos="0.3 0 0.02"/>
        <site name="c" pos="0.1 0.05 -0.2"/>
      </body>
    </body>
  </worldbody>
  <tendon>
    <spatial name="t_sph"><site site="a"/><geom geom="sph"/><site site="b"/></spatial>
    <spatial name="t_sph_side"><site site="a"/><geom geom="sph" sidesite="side1"/><site site="c"/></spatial>
    <spatial name="t_cyl"><site site="a"/><geom geom="cyl"/><site site="b"/></spatial>
    <spatial name="t_both">
      <site site="a"/><geom geom="cyl" sidesite="side2"/><site site="c"/>
      <pulley divisor="3"/>
      <site site="a"/><geom geom="sph"/><site site="c"/>
    </spatial>
  </tendon>
</mujoco>
"""


@jax.jit
def _length_grad(sys: bp.System, q: jax.Array) -> jax.Array:
    grad: jax.Array = jax.grad(lambda x: jnp.sum(pipeline._position(sys, x).ten_length))(q)
    return grad


def test_wrapping_matches_mujoco() -> None:
    """ten_length, ten_J and the tangent points (wrap_xpos) in poses that wrap and that miss."""
    sys, m = _model(WRAP)
    d = mujoco.MjData(m)
    wrapped, missed = 0, 0
    for seed in range(10):
        q, qd = _random_state(m, seed, 0.15 if seed < 5 else 0.5)
        d.qpos[:], d.qvel[:] = q, qd
        mujoco.mj_forward(m, d)
        s = _init(sys, jnp.asarray(q, jnp.float32), jnp.asarray(qd, jnp.float32))
        np.testing.assert_allclose(s.ten_length, d.ten_length, atol=2e-6)
        np.testing.assert_allclose(s.ten_J, _dense_ten_J(m, d), atol=2e-6)
        # wrapped lengths have finite gradients, wrapped or not
        grad = _length_grad(sys, jnp.asarray(q, jnp.float32))
        assert np.all(np.isfinite(grad)) and np.any(grad != 0)
        # tangent points of the three single-wrap tendons (site a -> geom -> site), from MuJoCo's frames
        x0 = np.repeat(d.site_xpos[:1], 3, axis=0)
        x1 = np.stack([d.site_xpos[m.wrap_objid[m.tendon_adr[k] + 2]] for k in range(3)])
        g = np.asarray([m.wrap_objid[m.tendon_adr[k] + 1] for k in range(3)])
        side = np.asarray([round(m.wrap_prm[m.tendon_adr[k] + 1]) for k in range(3)])
        f32 = functools.partial(jnp.asarray, dtype=jnp.float32)
        xmat = f32(d.geom_xmat[g].reshape(-1, 3, 3))
        wlen, w0, w1 = tendon.wrap(f32(x0), f32(x1), f32(d.geom_xpos[g]), xmat, f32(m.geom_size[g, 0]),
                                   np.asarray([False, False, True]), f32(d.site_xpos[np.maximum(side, 0)]),
                                   side >= 0)
        for k in range(3):
            adr, num = d.ten_wrapadr[k], d.ten_wrapnum[k]
            if num == 4:
                wrapped += 1
                want = d.wrap_xpos.reshape(-1, 3)[adr + 1 : adr + 3]
                np.testing.assert_allclose(np.stack([w0[k], w1[k]]), want, atol=2e-6)
            else:
                missed += 1
                assert float(wlen[k]) == -1.0
    assert wrapped >= 10 and missed >= 5


def test_side_site_inside_the_geom_is_refused() -> None:
    xml = WRAP.replace('<site name="side1" pos="0.2 0 0.3"/>', '<site name="side1" pos="0.2 0 0.05"/>')
    with pytest.raises(ValueError, match=r"tendon 't_sph_side' \(<spatial>\): a side site inside"):
        bp.load_mjcf(xml)
