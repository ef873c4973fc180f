"""MuJoCo options at load: each is honoured, refused, irrelevant or named by an `OptionWarning`.

PGS and CG models run our Newton solver and still follow MuJoCo C running its own PGS / CG. Every
warning family names its option, and what each warning (or "irrelevant" entry) claims about MuJoCo
is checked against MuJoCo C.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import brax_physics as bp
from brax_physics._src import models_testutil as tm
from brax_physics._src.options_check import DISABLE_FLAGS, ENABLE_FLAGS, OPTIONS, option_warnings
from brax_physics._src.pipeline import solver_config
from brax_physics._src.pipeline_test import _rollout

# A box sliding and spinning to rest on a floor with friction (sliding, then sticking contacts)
# and an arm swinging into its joint limit: 100 timesteps of 0.004 s.
_SCENE = """
<mujoco>
  <option timestep="0.004" {opt}/>
  <worldbody>
    <geom name="floor" type="plane" size="0 0 1" friction="0.6"/>
    <body name="box" pos="0 0 0.05"><freejoint/><geom type="box" size=".1 .08 .05"/></body>
    <body name="arm" pos="2 0 1">
      <joint name="hinge" type="hinge" axis="0 1 0" range="-30 30" damping="0.01"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
</mujoco>
"""
_QVEL0 = np.array([1.5, 0.3, 0.0, 0.0, 0.0, 2.0, 3.0])
_STEPS = 100
_HINGE_Q = 7

# MuJoCo's PGS and CG stop on their own criteria: on this scene their trajectories differ from
# its Newton's by up to 4e-7 in qpos and 7e-5 in qvel (the spin of the resting box), and ours
# (float32 Newton) from each of them by about as much.
_QPOS_ATOL = 1e-5
_QVEL_ATOL = 5e-4


def _scene(opt: str = "") -> Any:
    return mujoco.MjModel.from_xml_string(_SCENE.format(opt=opt))


def _mujoco_rollout(m: Any, n: int = _STEPS) -> tuple[np.ndarray, np.ndarray]:
    """(n, nq) qpos and (n, nv) qvel of MuJoCo C stepping the scene from _QVEL0."""
    d = mujoco.MjData(m)
    d.qvel[:] = _QVEL0
    qs, vs = [], []
    for _ in range(n):
        mujoco.mj_step(m, d)
        qs.append(d.qpos.copy())
        vs.append(d.qvel.copy())
    return np.array(qs), np.array(vs)


def _load_warns(m: Any, option: str) -> bp.System:
    """Load `m`, checking that it warns naming `option` (attributed to this file, the caller)."""
    with pytest.warns(bp.OptionWarning, match=re.escape(option)) as record:
        sys = bp.from_mjmodel(m)
    assert all(w.filename == __file__ for w in record)
    return sys


def _load_silently(m: Any) -> bp.System:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return bp.from_mjmodel(m)


@jax.jit
def _run(sys: bp.System, qd: jax.Array) -> tuple[jax.Array, jax.Array]:
    _, (q, qds, _, _) = _rollout(sys, bp.init(sys, None, qd), jnp.zeros(sys.nu, qd.dtype), _STEPS)
    return q, qds


@pytest.fixture(scope="module")
def ours() -> dict[str, Any]:
    """The System of the solver="PGS" scene and our trajectory of it."""
    sys = _load_warns(_scene('solver="PGS"'), 'solver="PGS"')
    q, qd = _run(sys, jnp.asarray(_QVEL0, jnp.float32))
    return {"sys": sys, "q": np.asarray(q, np.float64), "qd": np.asarray(qd, np.float64)}


def test_survey_covers_every_mujoco_option() -> None:
    fields = {a for a in dir(_scene().opt) if not a.startswith("_")}
    assert set(OPTIONS) == fields
    for table, enum, prefix in ((DISABLE_FLAGS, mujoco.mjtDisableBit, "mjDSBL_"),
                                (ENABLE_FLAGS, mujoco.mjtEnableBit, "mjENBL_")):
        assert set(table) == {n[len(prefix):].lower() for n in enum.__members__ if n.startswith(prefix)}
    for status, where in [*OPTIONS.values(), *DISABLE_FLAGS.values(), *ENABLE_FLAGS.values()]:
        assert status in ("honoured", "refused", "irrelevant", "warned") and where


def test_pgs_runs_newton_and_matches_mujocos_own_solver(ours: dict[str, Any]) -> None:
    m = _scene('solver="PGS"')
    sys = ours["sys"]
    assert solver_config(sys).newton  # PGS is swapped for Newton, and says so
    mj_q, mj_qd = _mujoco_rollout(m)
    assert mj_q[-1, 0] > 0.1 and np.max(np.abs(mj_qd[-1, :6])) < 1e-3  # the box slid, then stopped
    assert mj_q[-1, _HINGE_Q] > np.deg2rad(30)  # the arm pushes into its soft limit
    np.testing.assert_allclose(ours["q"], mj_q, atol=_QPOS_ATOL)
    np.testing.assert_allclose(ours["qd"], mj_qd, atol=_QVEL_ATOL)


@pytest.mark.parametrize("opt", ['solver="CG"', 'solver="CG" iterations="2" ls_iterations="3"',
                                 'iterations="1" ls_iterations="3"', 'iterations="2" ls_tolerance="0.3"'])
def test_solver_and_budgets_are_honoured(opt: str) -> None:
    """CG and low iteration and line-search budgets load silently and follow MuJoCo C's trajectory,
    which they change. At these budgets the scene is chaotic in MuJoCo C itself (1e-6 on the
    initial velocity moves qpos by 1e-2 within 100 steps): the first 10 steps are compared there
    (`solver_budget_test` compares the solve itself, in float64)."""
    m = _scene(opt)
    sys = _load_silently(m)
    assert solver_config(sys).newton == ("CG" not in opt)
    q, qd = _run(sys, jnp.asarray(_QVEL0, jnp.float32))
    mj_q, mj_qd = _mujoco_rollout(m)
    n = 10 if "iterations" in opt else _STEPS
    np.testing.assert_allclose(np.asarray(q, np.float64)[:n], mj_q[:n], atol=2 * _QPOS_ATOL)
    np.testing.assert_allclose(np.asarray(qd, np.float64)[:n], mj_qd[:n], atol=2 * _QVEL_ATOL)
    if "iterations" in opt:
        _, default_qd = _mujoco_rollout(_scene())
        assert np.max(np.abs(default_qd[:n] - mj_qd[:n])) > 10 * _QVEL_ATOL


def test_option_warning_can_be_filtered() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=bp.OptionWarning)
        bp.load_mjcf(_SCENE.format(opt='solver="PGS"'))


def test_default_options_load_without_warnings() -> None:
    for xml in (_SCENE.format(opt=""), tm.CONTACT_SCENE):
        _load_silently(mujoco.MjModel.from_xml_string(xml))
    for xml in tm.ORACLE_MODELS.values():
        m = mujoco.MjModel.from_xml_string(xml)
        assert option_warnings(m) == []
        m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT  # some have pairs without a collider
        _load_silently(m)


# A non-default value of every option field the survey calls irrelevant.
_IRRELEVANT_VALUES: dict[str, Any] = {
    "sleep_tolerance": 1.0, "magnetic": [1.0, 2.0, 3.0],
    "o_margin": 0.5, "o_solref": [0.1, 0.5], "o_solimp": [0.5, 0.6, 0.01, 0.5, 2.0],
    "o_friction": [0.1, 0.1, 0.1, 0.1, 0.1], "jacobian": 1, "sdf_initpoints": 3,
    "sdf_iterations": 2,
}
_IRRELEVANT = (
    [pytest.param(k, v, id=k) for k, v in _IRRELEVANT_VALUES.items()]
    + [pytest.param("disableflags", int(mujoco.mjtDisableBit.__members__["mjDSBL_" + k.upper()]), id=k)
       for k, (status, _) in DISABLE_FLAGS.items() if status == "irrelevant"]
    + [pytest.param("enableflags", int(mujoco.mjtEnableBit.__members__["mjENBL_" + k.upper()]), id=k)
       for k, (status, _) in ENABLE_FLAGS.items() if status == "irrelevant"]
)


def test_irrelevant_values_cover_the_survey() -> None:
    assert {k for k, (s, _) in OPTIONS.items() if s == "irrelevant"} == set(_IRRELEVANT_VALUES)


@pytest.mark.parametrize(("field", "value"), _IRRELEVANT)
def test_irrelevant_options_load_silently_and_leave_mujoco_unchanged(field: str, value: Any) -> None:
    m = _scene()
    want_q, want_qd = _mujoco_rollout(m)
    if isinstance(value, list):
        getattr(m.opt, field)[:] = value
    else:
        setattr(m.opt, field, value)
    _load_silently(m)
    q, qd = _mujoco_rollout(m)
    np.testing.assert_allclose(q, want_q, atol=1e-9, rtol=0)
    np.testing.assert_allclose(qd, want_qd, atol=1e-8, rtol=0)


# An arm spinning in a dense, viscous medium; no springs, dampers or actuators.
_FLUID = """<mujoco><option density="1000" viscosity="0.1" {opt}>{flags}</option><worldbody>
<body pos="0 0 1"><joint type="hinge" axis="0 0 1"/><geom type="capsule" fromto="0 0 0 1 0 0" size=".1"/>
</body></worldbody></mujoco>"""


def _fluid_passive(opt: str = "", flags: str = "") -> tuple[Any, float]:
    """The fluid model with `opt` attributes and `flags`, and MuJoCo's qfrc_passive of its arm."""
    m = mujoco.MjModel.from_xml_string(_FLUID.format(opt=opt, flags=flags))
    d = mujoco.MjData(m)
    d.qvel[:] = 3.0
    mujoco.mj_forward(m, d)
    return m, float(d.qfrc_passive[0])


def test_fluid_with_spring_and_damper_disabled_is_dropped_as_in_mujoco() -> None:
    """mj_passive returns early when springs and dampers are both off: no fluid forces either."""
    both, one = '<flag spring="disable" damper="disable"/>', '<flag spring="disable"/>'
    for flags, mj_zero in ((both, True), (one, False)):
        m, passive = _fluid_passive(flags=flags)
        assert (passive == 0.0) == mj_zero
        sys = _load_silently(m)
        ours = float(bp.init(sys, qd=jnp.full(sys.nv, 3.0)).qfrc_passive[0])
        assert ours == pytest.approx(passive, rel=1e-4, abs=1e-6)


def test_fluid_under_implicitfast_is_refused() -> None:
    m, _ = _fluid_passive('integrator="implicitfast"')
    d = mujoco.MjData(m)
    d.qvel[:] = 3.0
    mujoco.mj_step(m, d)
    assert d.qDeriv[0] < -1.0  # no damping or actuator: MuJoCo's implicit term is the fluid's
    with pytest.raises(ValueError, match="implicitfast with density/viscosity"):
        bp.from_mjmodel(m)
    for integrator in ("Euler", "RK4"):
        _load_silently(_fluid_passive(f'integrator="{integrator}"')[0])


def test_diagexact_is_refused() -> None:
    m = _scene()
    m.opt.enableflags |= mujoco.mjtEnableBit.mjENBL_DIAGEXACT
    with pytest.raises(ValueError, match="flag diagexact=enable is not supported"):
        bp.from_mjmodel(m)
    efc_r = []
    for model in (m, _scene()):
        d = mujoco.MjData(model)
        d.qpos[2] = 0.049  # the box 1 mm into the floor
        mujoco.mj_forward(model, d)
        efc_r.append(d.efc_R.copy())
    assert efc_r[0].shape == efc_r[1].shape == (16,)  # 4 corners, 4 pyramid edges each
    assert np.max(np.abs(efc_r[0] / efc_r[1] - 1)) > 1e-2  # MuJoCo's impedances change


def test_speculative_is_refused() -> None:
    xml = """<mujoco><option timestep="0.01"><flag speculative="{f}"/></option><worldbody>
    <geom type="plane" size="0 0 1"/><body pos="0 0 0.5"><freejoint/><geom size="0.02"/></body>
    </worldbody></mujoco>"""
    heights = {}
    for f in ("enable", "disable"):
        m = mujoco.MjModel.from_xml_string(xml.format(f=f))
        if f == "enable":
            with pytest.raises(ValueError, match="flag speculative=enable is not supported"):
                bp.from_mjmodel(m)
        d = mujoco.MjData(m)
        d.qvel[2] = -20.0  # 0.2 m per step, ten times the sphere's radius
        for _ in range(5):
            mujoco.mj_step(m, d)
        heights[f] = d.qpos[2]
    assert heights["enable"] > 0 > heights["disable"]  # MuJoCo stops it only with the flag


def test_ipc_is_refused_as_mujoco_refuses_to_step_it() -> None:
    m = _scene()
    m.opt.enableflags |= mujoco.mjtEnableBit.mjENBL_IPC
    with pytest.raises(ValueError, match=r'flag ipc=enable is not supported .*integrator="discrete"'):
        bp.from_mjmodel(m)
    with pytest.raises(mujoco.FatalError, match="ipc"):
        mujoco.mj_step(m, mujoco.MjData(m))


def test_unknown_flag_bits_are_refused() -> None:
    m = _scene()
    m.opt.disableflags |= 1 << 25
    m.opt.enableflags |= 1 << 20
    with pytest.raises(ValueError) as e:
        bp.from_mjmodel(m)
    for field, bit in (("disableflags", 25), ("enableflags", 20)):
        want = f"option: {field} bit 1<<{bit} is unknown to brax-physics and not supported (clear it)"
        assert want in str(e.value), str(e.value)


_MESH_PAIR = """<mujoco><asset><mesh name="m" vertex="-.1 -.1 -.1 .1 -.1 -.1 -.1 .1 -.1 .1 .1 -.1 -.1 -.1 .1
  .1 -.1 .1 -.1 .1 .1 .1 .1 .1"/></asset><worldbody><body><freejoint/>{g}</body>
  <body><freejoint/><geom type="mesh" mesh="m"/></body></worldbody></mujoco>"""


@pytest.mark.parametrize("g", [
    '<geom type="box" size=".1 .1 .1"/>',
    '<geom type="mesh" mesh="m"/>',
    '<geom type="box" size=".1 .1 .1" margin=".01"/>',
    '<geom type="cylinder" size=".1 .1"/>',
    '<geom type="capsule" size=".1 .1"/>',
])
def test_multiccd_is_honoured_for_every_mesh_pair(g: str) -> None:
    """multiccd (MuJoCo's default) gives several contacts to each of these pairs (collision.multicontact)."""
    m = mujoco.MjModel.from_xml_string(_MESH_PAIR.format(g=g))
    assert DISABLE_FLAGS["multiccd"][0] == "honoured"
    assert not [w for w in option_warnings(m) if "multiccd" in w]
