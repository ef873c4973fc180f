"""Pipeline vs MuJoCo C (the oracle): forward quantities, one step, 200-step trajectories."""

from __future__ import annotations

import functools
import re
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import brax_physics as bp
from brax_physics._src import models_testutil as tm

RTOL = 1e-4


@functools.cache
def _model(xml: str) -> tuple[bp.System, Any]:
    m = mujoco.MjModel.from_xml_string(xml)
    # smooth dynamics only (contacts are tested in constraint_test); same flags on both sides
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    return bp.from_mjmodel(m), m


Trace = tuple[jax.Array, ...]


def _rollout(sys: bp.System, state: bp.State, act: jax.Array, n: int) -> tuple[bp.State, Trace]:
    def body(s: bp.State, _: None) -> tuple[bp.State, Trace]:
        s = bp.step(sys, s, act)
        return s, (s.q, s.qd, s.qacc, s.x.pos)

    return jax.lax.scan(body, state, None, length=n)


# One jitted function per entry point, shared by all tests: jit specializes per model treedef.
init_jit = jax.jit(bp.init)
rollout_jit = jax.jit(_rollout, static_argnums=3)


def _random_inputs(m: Any, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """qpos near qpos0 (unit quaternions), random qvel, ctrl beyond ctrlrange."""
    rng = np.random.default_rng(seed)
    q = m.qpos0 + 0.4 * rng.standard_normal(m.nq)
    for j in range(m.njnt):
        adr = m.jnt_qposadr[j]
        if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_BALL:
            q[adr : adr + 4] /= np.linalg.norm(q[adr : adr + 4])
        elif m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE:
            q[adr + 3 : adr + 7] /= np.linalg.norm(q[adr + 3 : adr + 7])
    qd = rng.standard_normal(m.nv)
    ctrl = 2.0 * rng.standard_normal(m.nu)
    return q, qd, ctrl


def _rel(a: Any, b: np.ndarray) -> float:
    """Max abs error relative to the largest reference magnitude (floored for near-zero fields)."""
    a = np.asarray(a, dtype=np.float64)
    return float(np.max(np.abs(a - b), initial=0.0) / max(np.max(np.abs(b), initial=0.0), 1e-3))


def _canon(q: np.ndarray) -> np.ndarray:
    return q * np.where(q[..., :1] < 0, -1.0, 1.0)


@pytest.mark.parametrize("name", sorted(tm.ORACLE_MODELS))
def test_forward_matches_mujoco(name: str) -> None:
    sys, m = _model(tm.ORACLE_MODELS[name])
    d = mujoco.MjData(m)
    q, qd, ctrl = _random_inputs(m, seed=1)
    d.qpos[:], d.qvel[:], d.ctrl[:] = q, qd, ctrl
    mujoco.mj_forward(m, d)
    s = init_jit(sys, q.astype(np.float32), qd.astype(np.float32), ctrl.astype(np.float32))

    full_m = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, full_m)
    checks = {
        "mass_matrix": (s.mass_matrix, full_m),
        "qfrc_bias": (s.qfrc_bias, d.qfrc_bias),
        "qfrc_passive": (s.qfrc_passive, d.qfrc_passive),
        "actuator_force": (s.actuator_force, d.actuator_force),
        "qfrc_actuator": (s.qfrc_actuator, d.qfrc_actuator),
        "xpos": (s.x.pos, d.xpos),
        "xquat": (_canon(np.asarray(s.x.rot)), _canon(d.xquat)),
        "xipos": (s.xipos, d.xipos),
        "ximat": (s.ximat, d.ximat.reshape(-1, 3, 3)),
        "xanchor": (s.xanchor, d.xanchor),
        "geom_xpos": (s.geom_xpos, d.geom_xpos),
        "geom_xmat": (s.geom_xmat, d.geom_xmat.reshape(-1, 3, 3)),
        "subtree_com": (s.subtree_com, d.subtree_com),
        "cinert": (s.cinert, d.cinert),
        "cdof": (s.cdof, d.cdof),
        "qacc_smooth": (s.qacc_smooth, d.qacc_smooth),
        "body angular velocity": (s.xd.ang, d.cvel[:, :3]),
    }
    errors = {k: _rel(a, b) for k, (a, b) in checks.items()}
    bad = {k: e for k, e in errors.items() if e > RTOL}
    assert not bad, bad


def _mujoco_trajectory(m: Any, q: np.ndarray, qd: np.ndarray, ctrl: np.ndarray, n: int) -> np.ndarray:
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:], d.ctrl[:] = q, qd, ctrl
    out = []
    for _ in range(n):
        mujoco.mj_step(m, d)
        out.append(d.qpos.copy())
    return np.stack(out)


@pytest.mark.parametrize("name", sorted(tm.ORACLE_MODELS))
def test_steps_match_mujoco(name: str) -> None:
    sys, m = _model(tm.ORACLE_MODELS[name])
    q, qd, ctrl = _random_inputs(m, seed=3)
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:], d.ctrl[:] = q, qd, ctrl
    mujoco.mj_forward(m, d)
    qacc = d.qacc.copy()
    full_m = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, full_m)
    mujoco.mj_step(m, d)
    mujoco.mj_kinematics(m, d)  # frames of the new qpos

    zero_ctrl = np.zeros(m.nu, np.float32)  # same signature as in test_forward: one compile
    s0 = init_jit(sys, q.astype(np.float32), qd.astype(np.float32), zero_ctrl)
    s200, (qs, qds, qaccs, xpos) = rollout_jit(sys, s0, jnp.asarray(ctrl, jnp.float32), 200)
    # first step: the acceleration used (compared as force M·qacc: with gyroscopic cancellation
    # qacc itself can be far smaller than the float32 roundoff of the terms it comes from), the new
    # velocity and position
    assert _rel(full_m @ np.asarray(qaccs[0], np.float64), full_m @ qacc) < RTOL
    assert _rel(qds[0], d.qvel) < RTOL
    np.testing.assert_allclose(np.asarray(qs[0]), d.qpos, atol=1e-5)
    # the new state's frames describe its new positions (not the ones the step started from)
    np.testing.assert_allclose(np.asarray(xpos[0]), d.xpos, atol=1e-5)
    assert float(s200.time) == pytest.approx(200 * m.opt.timestep, rel=1e-5)
    # 200 steps
    want = _mujoco_trajectory(m, q, qd, ctrl, 200)
    assert np.max(np.abs(np.asarray(qs) - want)) <= 2e-3


def _textbook_rk4(m: Any, q: np.ndarray, qd: np.ndarray, n: int) -> np.ndarray:
    """Float64 classic RK4 built from MuJoCo's own mj_forward and mj_integratePos."""
    d = mujoco.MjData(m)
    h = m.opt.timestep

    def acc(qq: np.ndarray, vv: np.ndarray) -> np.ndarray:
        d.qpos[:], d.qvel[:] = qq, vv
        mujoco.mj_forward(m, d)
        return np.array(d.qacc)

    def advance(qq: np.ndarray, vv: np.ndarray, dt: float) -> np.ndarray:
        out = qq.copy()
        mujoco.mj_integratePos(m, out, vv, dt)
        return out

    out = []
    for _ in range(n):
        a1 = acc(q, qd)
        v2 = qd + 0.5 * h * a1
        a2 = acc(advance(q, qd, 0.5 * h), v2)
        v3 = qd + 0.5 * h * a2
        a3 = acc(advance(q, v2, 0.5 * h), v3)
        v4 = qd + h * a3
        a4 = acc(advance(q, v3, h), v4)
        q = advance(q, (qd + 2 * v2 + 2 * v3 + v4) / 6, h)
        qd = qd + h * (a1 + 2 * a2 + 2 * a3 + a4) / 6
        out.append(q)
    return np.stack(out)


def test_rk4_quaternion_trajectory() -> None:
    # For quaternions MuJoCo 4.0.0's RK4 (mj_RungeKutta) combines qpos differently from the textbook
    # tableau, by O(h^3) per step. We implement the textbook tableau: it must match a float64
    # textbook RK4 built from MuJoCo's own functions to float32 level, and mj_step within the
    # trajectory tolerance (which covers that O(h^3) gap over 200 steps).
    sys, m = _model(tm.RK4_BALL)
    q, qd, _ = _random_inputs(m, seed=4)
    s0 = init_jit(sys, q.astype(np.float32), qd.astype(np.float32), np.zeros(0, np.float32))
    _, (got, *_) = rollout_jit(sys, s0, jnp.zeros(0, jnp.float32), 200)
    got = np.asarray(got)
    assert np.max(np.abs(got - _textbook_rk4(m, q, qd, 200))) <= 2e-5
    assert np.max(np.abs(got - _mujoco_trajectory(m, q, qd, np.zeros(0), 200))) <= 2e-3


def test_rk4_stages_share_one_forward_pass_in_the_program() -> None:
    """RK4's stages 2-4 run one forward pass in a three-trip loop: the step's program holds two forward
    passes (the first stage's and the loop's), under twice Euler's one, not four (3.8 times as many
    operations when the stages were written out)."""
    sys = bp.load_mjcf(tm.CONTACT_SCENE)
    rk4 = sys.replace(opt=sys.opt.replace(integrator=int(mujoco.mjtIntegrator.mjINT_RK4)))
    state = jax.eval_shape(bp.init, sys)
    ctrl = jnp.zeros(sys.nu, jnp.float32)
    ops = [jax.jit(bp.step).lower(s, state, ctrl).as_text().count("stablehlo.") for s in (sys, rk4)]
    assert ops[1] < 2 * ops[0], ops


# Every stage's `jax.named_scope` (nested ones as paths), as MuJoCo names the stage.
_STAGE_SCOPES = (
    "fwd_position/kinematics", "fwd_position/com_pos", "fwd_position/crb", "fwd_position/collision",
    "fwd_acceleration/factor_m", "fwd_velocity/com_vel", "fwd_velocity/rne", "fwd_velocity/passive",
    "fwd_actuation", "fwd_acceleration", "fwd_constraint/make_constraint", "fwd_constraint/solve",
    "fwd_constraint/constraint_force", "integrate", "body_velocity", "contact_force",
)


def test_stages_are_named_in_the_lowered_step() -> None:
    """Each stage of `step` runs under its named scope, so profiles and HLO dumps read like the pipeline."""
    sys = bp.load_mjcf(tm.CONTACT_SCENE)  # contacts, a joint limit, friction loss and a motor
    state = jax.eval_shape(bp.init, sys)
    lowered = jax.jit(bp.step).lower(sys, state, jnp.zeros(sys.nu, jnp.float32))
    # Op locations carry the scope path: loc("fwd_position/kinematics/add"), ... (inside the nested
    # program that `step` compiles; a caller's jit prefix, where there is one, is skipped)
    paths = set(re.findall(r'loc\("(?:jit\(_?step\)/)?([^"]*)"', lowered.as_text(debug_info=True)))
    missing = [s for s in _STAGE_SCOPES if not any(p.startswith(s + "/") for p in paths)]
    assert not missing, missing


def test_step_takes_contact_parameters_from_the_system_not_the_state() -> None:
    """The contacts' friction, solref, solimp and margin come from `sys` at every step: a state whose
    copies of them are stale steps as the fresh one does, and a change to `sys` acts at once."""
    import dataclasses

    sys = bp.load_mjcf(tm.CONTACT_SCENE)
    step = jax.jit(bp.step)
    state = bp.init(sys)
    act = jnp.zeros(sys.nu, jnp.float32)
    for _ in range(20):  # settle into contact
        state = step(sys, state, act)
    assert bool(np.any(np.asarray(state.contact.active)))
    fields = ("includemargin", "friction", "solref", "solreffriction", "solimp")
    stale = state.replace(contact=dataclasses.replace(
        state.contact, **{f: jnp.zeros_like(getattr(state.contact, f)) for f in fields}))
    want, got = step(sys, state, act), step(sys, stale, act)
    np.testing.assert_array_equal(np.asarray(got.qacc), np.asarray(want.qacc))
    np.testing.assert_array_equal(np.asarray(got.efc_force), np.asarray(want.efc_force))
    slippery = sys.replace(geom_friction=sys.geom_friction * 0.01)
    assert not np.allclose(np.asarray(step(slippery, state, act).efc_force), np.asarray(want.efc_force))


def test_model_without_dofs_steps_with_its_contact_rows() -> None:
    """An explicit <pair> of two world geoms gives contact rows that reach no dof: the step still
    builds its solver settings (no dof to put on the Hessian's diagonal) and runs."""
    sys = bp.load_mjcf("""<mujoco><worldbody><geom name="a" type="plane" size="1 1 .1"/>
      <geom name="b" type="sphere" size=".1" pos="0 0 .05"/></worldbody>
      <contact><pair geom1="a" geom2="b"/></contact></mujoco>""")
    assert sys.nv == 0
    state = jax.jit(bp.step)(sys, bp.init(sys), jnp.zeros(0, jnp.float32))
    assert state.q.shape == (0,)
    assert state.efc_force.shape == (4,)  # one condim-3 contact: four pyramid edges
    assert float(state.time) == pytest.approx(sys.opt.timestep)
