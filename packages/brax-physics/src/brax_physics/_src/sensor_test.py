"""Sensors vs MuJoCo C (the oracle): `State.sensordata` after `init` and after every `step`."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import brax_physics as bp

# One model per stage. Each sensor type appears with several object types, with and without a
# reference frame; cutoffs are low enough to clamp. Geoms collide only in ACC (contacts for touch,
# force and torque).
POS = """
<mujoco model="pos_sensors">
  <option timestep="0.005" integrator="RK4" magnetic="0.1 -0.4 0.3"/>
  <default><geom contype="0" conaffinity="0"/></default>
  <worldbody>
    <site name="world_site" pos="0.1 0.2 0.3"/>
    <body name="arm" pos="0 0 1">
      <joint name="shoulder" axis="0 1 0"/>
      <geom name="upper" type="capsule" fromto="0 0 0 0.3 0 0" size="0.04"/>
      <site name="elbow_site" pos="0.2 0.01 0.02" quat="0.9 0.1 0.3 0.2"/>
      <body name="forearm" pos="0.3 0 0" quat="0.95 0 0.3 0">
        <joint name="slide" type="slide" axis="1 0 0"/>
        <joint name="twist" axis="0 0 1" range="-30 12" margin="0.1"/>
        <geom name="lower" type="box" size="0.1 0.05 0.04" pos="0.05 0 0" euler="0 10 20"/>
        <site name="wrist" pos="0.05 0.02 0" quat="0.8 0.3 0 0.2"/>
        <body name="hand" pos="0.2 0 0">
          <joint name="wrist_ball" type="ball"/>
          <geom name="palm" type="sphere" size="0.05" pos="0.05 0.02 0"/>
          <site name="finger" pos="0.05 0 0"/>
        </body>
      </body>
    </body>
    <body name="drone" pos="1 0 2">
      <freejoint/>
      <geom type="ellipsoid" size="0.1 0.2 0.15"/>
      <site name="imu" pos="0.01 0.02 0.03" euler="10 20 30"/>
    </body>
  </worldbody>
  <actuator>
    <motor name="shoulder_motor" joint="shoulder" gear="2"/>
    <position name="slide_servo" joint="slide" kp="10" gear="1.5"/>
  </actuator>
  <sensor>
    <jointpos name="shoulder_angle" joint="shoulder"/>
    <jointpos name="slide_clamped" joint="slide" cutoff="0.01"/>
    <actuatorpos actuator="slide_servo"/>
    <framepos objtype="site" objname="wrist"/>
    <framepos objtype="body" objname="hand" reftype="site" refname="elbow_site"/>
    <framepos objtype="xbody" objname="drone" reftype="body" refname="forearm" cutoff="0.3"/>
    <framequat objtype="geom" objname="lower"/>
    <framequat objtype="site" objname="finger" reftype="xbody" refname="arm"/>
    <framequat objtype="body" objname="forearm" reftype="geom" refname="palm"/>
    <framexaxis objtype="xbody" objname="forearm"/>
    <framexaxis objtype="geom" objname="palm" reftype="site" refname="imu"/>
    <frameyaxis objtype="site" objname="imu" reftype="geom" refname="upper"/>
    <framezaxis objtype="body" objname="drone"/>
    <framezaxis objtype="site" objname="world_site" reftype="xbody" refname="hand"/>
    <subtreecom body="arm"/>
    <subtreecom body="world"/>
    <ballquat joint="wrist_ball"/>
    <magnetometer site="wrist"/>
    <magnetometer site="imu"/>
    <clock/>
    <jointlimitpos joint="twist"/>
  </sensor>
</mujoco>
"""

VEL = POS.replace('integrator="RK4"', 'integrator="Euler"').split("<sensor>")[0] + """
  <sensor>
    <jointvel joint="twist"/>
    <jointvel joint="shoulder" cutoff="0.3"/>
    <actuatorvel actuator="shoulder_motor"/>
    <actuatorvel actuator="slide_servo"/>
    <velocimeter site="wrist"/>
    <velocimeter name="still" site="world_site"/>
    <gyro site="imu"/>
    <gyro name="clamped_gyro" site="elbow_site" cutoff="0.5"/>
    <framelinvel objtype="site" objname="finger"/>
    <framelinvel objtype="geom" objname="palm" reftype="xbody" refname="drone"/>
    <framelinvel objtype="body" objname="drone" reftype="site" refname="wrist"/>
    <frameangvel objtype="body" objname="hand" reftype="site" refname="elbow_site"/>
    <frameangvel objtype="xbody" objname="drone"/>
    <subtreelinvel body="forearm"/>
    <subtreelinvel body="world"/>
    <subtreeangmom body="arm"/>
    <subtreeangmom body="drone"/>
    <subtreeangmom body="world"/>
    <ballangvel joint="wrist_ball"/>
    <jointlimitvel joint="twist"/>
  </sensor>
</mujoco>
"""

# Contacts: the crate on the floor (plane is geom1: the normal points up, into the crate), the ball
# on the crate (sphere is geom1: the normal points down, into the crate), the leg's foot on the floor.
# Touch zones contain the contact points, or lie along the force's ray beyond them (ball_under,
# crate_above), or off it (ball_top: reads 0).
ACC = """
<mujoco model="acc_sensors">
  <option timestep="0.002"/>
  <worldbody>
    <geom name="floor" type="plane" size="0 0 1"/>
    <site name="ground" pos="0.3 0 0.2"/>
    <body name="crate" pos="0 0 0.049">
      <freejoint/>
      <geom name="crate" type="box" size="0.2 0.15 0.05"/>
      <site name="crate_bottom" type="box" pos="0 0 -0.05" size="0.22 0.17 0.02"/>
      <site name="crate_above" type="ellipsoid" pos="0.02 0 0.2" size="0.08 0.08 0.04"/>
      <site name="crate_imu" pos="0.02 0.01 0.03" euler="10 0 20"/>
    </body>
    <body name="ball" pos="0.03 0.02 0.144">
      <freejoint/>
      <geom type="sphere" size="0.05"/>
      <site name="ball_zone" type="cylinder" size="0.06 0.06"/>
      <site name="ball_under" type="box" pos="0 0 -0.2" size="0.03 0.03 0.02"/>
      <site name="ball_top" type="sphere" pos="0 0 0.05" size="0.02"/>
    </body>
    <body name="thigh" pos="1 0 0.41">
      <joint name="hip" axis="0 1 0" damping="0.1" range="-15 -1"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.03"/>
      <site name="hip_ft" pos="0 0.01 -0.05" euler="0 30 0"/>
      <body name="shin" pos="0 0 -0.2">
        <joint name="knee" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.05 0 -0.19" size="0.03"/>
        <site name="knee_ft" pos="0.01 0 -0.02"/>
        <site name="sole" type="capsule" fromto="-0.05 0 -0.22 0.15 0 -0.22" size="0.04"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="hip_motor" joint="hip" gear="3" forcerange="-1 1"/>
    <velocity name="knee_damper" joint="knee" kv="0.5"/>
  </actuator>
  <sensor>
    <touch site="crate_bottom"/>
    <touch site="crate_above"/>
    <touch site="ball_zone"/>
    <touch site="ball_under"/>
    <touch name="ball_top" site="ball_top"/>
    <touch name="sole_touch" site="sole" cutoff="2"/>
    <accelerometer site="crate_imu"/>
    <accelerometer site="ground"/>
    <accelerometer site="knee_ft"/>
    <force site="hip_ft"/>
    <force site="knee_ft"/>
    <force name="free_body_force" site="crate_imu"/>
    <torque site="hip_ft"/>
    <torque site="knee_ft"/>
    <framelinacc objtype="geom" objname="crate"/>
    <framelinacc objtype="site" objname="sole"/>
    <frameangacc objtype="xbody" objname="shin"/>
    <frameangacc objtype="body" objname="ball"/>
    <actuatorfrc actuator="hip_motor"/>
    <actuatorfrc actuator="knee_damper"/>
    <jointactuatorfrc joint="knee"/>
    <jointlimitfrc joint="hip"/>
  </sensor>
</mujoco>
"""

MODELS = {"pos": POS, "vel": VEL, "acc": ACC}
# Sensors that read zero by design: a zone off the force's ray, a site on the world, a free body's
# force from its (absent) parent.
READ_ZERO = ("ball_top", "still", "free_body_force")
JITTER = {"pos": 0.4, "vel": 0.4, "acc": 0.0005}  # ACC's bodies start in contact and must stay so
STEPS = 6
RTOL = 1e-4


@functools.cache
def _model(name: str) -> tuple[bp.System, Any]:
    m = mujoco.MjModel.from_xml_string(MODELS[name])
    return bp.from_mjmodel(m), m


def _start(m: Any, seed: int, scale: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A nonzero state: qpos0 jittered by `scale`, qvel of that order over 0.1 s, and ctrl."""
    rng = np.random.default_rng(seed)
    d = mujoco.MjData(m)
    d.qpos[:] = m.qpos0 + scale * rng.standard_normal(m.nq)
    mujoco.mj_normalizeQuat(m, d.qpos)
    return d.qpos.copy(), 10 * scale * rng.standard_normal(m.nv), rng.standard_normal(m.nu)


def _run(sys: bp.System, q: jax.Array, qd: jax.Array, ctrl: jax.Array) -> tuple[jax.Array, bp.State]:
    """(STEPS + 1, nsensordata) sensordata after init and after each step, and the last state."""
    s = bp.init(sys, q, qd, ctrl)

    def body(s: bp.State, _: None) -> tuple[bp.State, jax.Array]:
        s = bp.step(sys, s, ctrl)
        return s, s.sensordata

    last, data = jax.lax.scan(body, s, None, length=STEPS)
    return jnp.concatenate([s.sensordata[None], data]), last


run_jit = jax.jit(_run)


def _mujoco(m: Any, q: np.ndarray, qd: np.ndarray, ctrl: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:], d.ctrl[:] = q, qd, ctrl
    mujoco.mj_forward(m, d)
    first = d.sensordata.copy()
    data = []
    for _ in range(STEPS):
        mujoco.mj_step(m, d)
        data.append(d.sensordata.copy())
    return first, np.stack(data)


@functools.cache
def _rollout(name: str) -> tuple[np.ndarray, np.ndarray, bp.State]:
    """Ours and MuJoCo's sensordata (STEPS + 1, nsensordata) as float64, and our last state."""
    sys, m = _model(name)
    q, qd, ctrl = _start(m, seed=3, scale=JITTER[name])
    f32 = functools.partial(jnp.asarray, dtype=jnp.float32)
    data, last = run_jit(sys, f32(q), f32(qd), f32(ctrl))
    want0, want = _mujoco(m, q, qd, ctrl)
    return np.asarray(data, np.float64), np.concatenate([want0[None], want]), last


def _compare(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(ours, MuJoCo's) sensordata, (STEPS + 1, nsensordata), float64."""
    ours, want, _ = _rollout(name)
    return ours, want


def _errors(name: str) -> list[str]:
    """Sensors whose values differ from MuJoCo's by more than RTOL of their type's magnitude (floored at 1).

    Per type: a force sensor on a free body reads a difference of forces (zero in MuJoCo), whose
    float32 rounding is relative to the forces of the model, not to the difference.
    """
    _, m = _model(name)
    ours, want = _compare(name)
    bad = []
    for i in range(m.nsensor):
        sl = slice(m.sensor_adr[i], m.sensor_adr[i] + m.sensor_dim[i])
        err = np.max(np.abs(ours[:, sl] - want[:, sl]))
        same = [j for j in range(m.nsensor) if m.sensor_type[j] == m.sensor_type[i]]
        spans = [want[:, m.sensor_adr[j] : m.sensor_adr[j] + m.sensor_dim[j]] for j in same]
        scale = max([1.0] + [float(np.max(np.abs(x))) for x in spans])
        if err > RTOL * scale:
            kind = mujoco.mjtSensor(m.sensor_type[i]).name
            bad.append(f"sensor {i} ({kind}): error {err:.3g} at scale {scale:.3g}")
    return bad


@pytest.mark.parametrize("name", sorted(MODELS))
def test_sensordata_matches_mujoco_after_init_and_every_step(name: str) -> None:
    assert not _errors(name)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_models_exercise_what_they_claim(name: str) -> None:
    """Each sensor reads something nonzero at some step (but those meant to read zero)."""
    sys, m = _model(name)
    _, want = _compare(name)
    for i in range(m.nsensor):
        sl = slice(m.sensor_adr[i], m.sensor_adr[i] + m.sensor_dim[i])
        if sys.sensor_names[i] not in READ_ZERO and m.sensor_type[i] != mujoco.mjtSensor.mjSENS_CLOCK:
            assert np.any(np.abs(want[1:, sl]) > 1e-6), f"sensor {i} reads zero in MuJoCo"


@pytest.mark.parametrize(("name", "sensor"), [("pos", "slide_clamped"), ("vel", "clamped_gyro"),
                                              ("acc", "sole_touch")])
def test_cutoff_clamps(name: str, sensor: str) -> None:
    sys, m = _model(name)
    ours, want = _compare(name)
    i = sys.sensor_names.index(sensor)
    sl = slice(m.sensor_adr[i], m.sensor_adr[i] + m.sensor_dim[i])
    cut = m.sensor_cutoff[i]
    assert np.any(np.isclose(np.abs(want[:, sl]), cut)), "the cutoff never clamps in MuJoCo"
    assert np.all(np.abs(ours[:, sl]) <= cut * (1 + 1e-6))


def test_name_lookup_batched_and_unknown() -> None:
    sys, _ = _model("pos")
    _, _, last = _rollout("pos")
    got = bp.sensor(sys, last, "shoulder_angle")
    np.testing.assert_array_equal(np.asarray(got), np.asarray(last.sensordata[:1]))
    batch = jax.tree.map(lambda x: jnp.stack([x, x]), last)
    got = bp.sensor(sys, batch, "shoulder_angle")
    assert got.shape == (2, 1)
    np.testing.assert_array_equal(np.asarray(got[1]), np.asarray(last.sensordata[:1]))
    with pytest.raises(ValueError, match=r"no sensor named 'shoulder_angel' \(did you mean 'shoulder_angle'"):
        bp.sensor(sys, batch, "shoulder_angel")
    with pytest.raises(ValueError, match="no sensor named ''"):  # unnamed sensors have no name to look up
        bp.sensor(sys, batch, "")


@jax.jit
def _one_step(sys: bp.System, q: jax.Array) -> bp.State:
    """`init` at q (zero velocity and control), then one `step`."""
    return bp.step(sys, bp.init(sys, q), jnp.zeros(sys.nu, q.dtype))


def test_model_without_sensors_has_empty_sensordata() -> None:
    sys = bp.load_mjcf('<mujoco><worldbody><body><joint/><geom size="0.1" pos="0 0 -1"/></body></worldbody>'
                       "</mujoco>")
    assert (sys.nsensor, sys.nsensordata, sys.sensor_cutoff.shape) == (0, 0, (0,))
    assert _one_step(sys, jnp.zeros(1, jnp.float32)).sensordata.shape == (0,)


def test_disabled_sensors_keep_their_values() -> None:
    xml = ('<mujoco><option><flag sensor="disable"/></option><worldbody><body><joint name="j"/>'
           '<geom size="0.1" pos="0 0 -1"/></body></worldbody><sensor><jointpos joint="j"/></sensor>'
           "</mujoco>")
    m = mujoco.MjModel.from_xml_string(xml)
    sys = bp.from_mjmodel(m)
    s = _one_step(sys, jnp.ones(1, jnp.float32))
    d = mujoco.MjData(m)
    d.qpos[:] = 1.0
    mujoco.mj_step(m, d)
    np.testing.assert_array_equal(np.asarray(s.sensordata), d.sensordata)  # zeros in both


@pytest.mark.parametrize(
    ("sensor", "extra", "match"),
    [
        ('<rangefinder name="rf" camera="cam"/>', '<camera name="cam" resolution="4 3"/>',
         r"sensor 'rf' \(<rangefinder>\): rangefinders on a camera are not supported"),
        ('<framepos objtype="camera" objname="cam"/>', '<camera name="cam"/>',
         r"sensor #0 \(<framepos>\): objtype=camera is not supported"),
        ('<framequat name="fq" objtype="site" objname="s" reftype="camera" refname="cam"/>',
         '<camera name="cam"/>', r"sensor 'fq' \(<framequat>\): reftype=camera"),
        ('<camprojection name="cp" site="s" camera="cam"/>', '<camera name="cam" resolution="4 4"/>',
         r"sensor 'cp' \(<camprojection>\)"),
        ('<e_kinetic name="ek"/>', "", r"sensor 'ek' \(<e_kinetic>\)"),
        ('<jointpos name="late" joint="j" delay="0.01" nsample="3"/>', "",
         r"sensor 'late' \(<jointpos>\): sensor delay/interval/history is not supported"),
        ('<user name="u" dim="2"/>', "", r"sensor 'u' \(<user>\): user sensors"),
    ],
)
def test_unsupported_sensors_fail_at_load_naming_the_sensor(sensor: str, extra: str, match: str) -> None:
    xml = (f'<mujoco><worldbody>{extra}<body><joint name="j" range="-1 1"/><geom size="0.1"/><site name="s"/>'
           f"</body></worldbody><sensor>{sensor}</sensor></mujoco>")
    with pytest.raises(ValueError, match=match):
        bp.load_mjcf(xml)
