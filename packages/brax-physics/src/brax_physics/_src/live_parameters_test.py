"""Every parameter leaf of `System` is live, as the same change to MjModel is in MuJoCo C."""

from __future__ import annotations

import copy
import dataclasses
import functools
import typing
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import brax_physics as bp
from brax_physics._src.system import System

# The sweep walks the dataclass fields of `System` (recursing into `Options`), so a leaf added
# tomorrow fails here until it has a recipe. A recipe changes one MjModel element where the model
# below makes it matter; the same value goes into the System by `replace` (no mj_setConst, as MJX
# users do), and both engines roll out from qpos0. Ours must match MuJoCo after the change, and the
# change must move both trajectories by clearly more than that tolerance; visual leaves must move
# nothing. Only leaf values differ between the perturbed Systems, so one compiled rollout serves all.

# One model exercises every leaf; its free bodies touch only the floor (contype/conaffinity):
# - box: slides on the floor (vx0 = 2 m/s) with higher priority, so its own contact parameters
#   (friction, solref, solimp) are used; margins on box and floor are summed.
# - ball: dropped 1 cm and rolling; same priority as the floor, so solref/solimp are mixed by solmix.
# - pill: a capsule lying on its side, sliding along its axis; its floor contact is an explicit
#   <pair> (pair_* parameters).
# - arm: shoulder hinge with limit, spring, damping, armature, friction loss and a position servo
#   whose control is clamped by ctrlrange; it swings into its upper limit. The forearm's elbow is
#   passive, with an explicit inertial frame (anisotropic inertia, offset com).
# - slider: a horizontal slide joint whose friction loss (1 N) holds a motor clamped by its
#   forcerange at 0.5 N, so it creeps at a speed set by the friction-loss softness.
# - sensors: an accelerometer and a magnetometer on a site of the forearm (offset and turned, so
#   site_pos and site_quat matter), a touch sensor whose sphere zone on the ball holds its floor
#   contact, and the shoulder angle clamped by a cutoff. Sensors move nothing, so the sweep compares
#   sensordata too: the leaves only sensors read must change it.
# Fluid density, viscosity and wind are nonzero.
# MuJoCo's compiler flags frames that coincide (geom_sameframe, body_sameframe) and kinematics then
# skips their pos/quat, so changes to those are ignored (in ours too: sameframe_test.py): the
# pill's geom and the forearm's inertial frame are offset and turned so that geom_pos, geom_quat and
# body_iquat matter.
MODEL = """
<mujoco model="live_parameters">
  <option timestep="0.004" impratio="2" density="20" viscosity="0.05" wind="0.5 0.3 0"/>
  <default><geom contype="1" conaffinity="0"/></default>
  <worldbody>
    <geom name="floor" type="plane" size="0 0 1" contype="0" conaffinity="1" friction="0.8 0.005 0.0001"
          solref="0.03 1" solimp="0.85 0.95 0.002 0.5 2" margin="0.002"/>
    <body name="box" pos="0 0 0.053">
      <freejoint name="box"/>
      <geom name="box" type="box" size="0.1 0.08 0.05" priority="1" friction="0.5 0.005 0.0001"
            solref="0.015 1" solimp="0.9 0.95 0.001 0.5 2" margin="0.001"/>
    </body>
    <body name="ball" pos="1 0 0.07">
      <freejoint name="ball"/>
      <geom name="ball" type="sphere" size="0.06" friction="0.6 0.005 0.0001" solref="0.01 1"
            solimp="0.95 0.99 0.001 0.5 2" gap="0.03"/>
      <site name="ball_zone" type="sphere" size="0.07"/>
    </body>
    <body name="pill" pos="2 0 0.04">
      <freejoint name="pill"/>
      <inertial pos="0 0 0" mass="0.8" diaginertia="0.0008 0.004 0.004"/>
      <geom name="pill" type="capsule" size="0.04 0.1" pos="0.01 0 0" quat="0.70710678 0 0.70710678 0"/>
    </body>
    <body name="arm" pos="3 0 1">
      <joint name="shoulder" type="hinge" axis="0 1 0" range="-25 25" solreflimit="0.03 0.8"
             solimplimit="0.85 0.95 0.001 0.5 2" stiffness="2" springref="10" damping="0.3"
             armature="0.02" frictionloss="0.05"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" contype="0"/>
      <body name="forearm" pos="0.3 0 0">
        <joint name="elbow" type="hinge" axis="0 1 0" damping="0.1" armature="0.01"/>
        <inertial pos="0.12 0 0" quat="0.98480775 0.17364818 0 0" mass="0.5" diaginertia="0.002 0.004 0.005"/>
        <geom type="capsule" fromto="0 0 0 0.25 0 0" size="0.025" contype="0"/>
        <site name="imu" pos="0.2 0.01 0.02" quat="0.9 0.1 0.3 0.2"/>
      </body>
    </body>
    <body name="slider" pos="4 0 0.5">
      <joint name="slide" type="slide" axis="1 0 0" frictionloss="1" solreffriction="0.02 1"
             solimpfriction="0.9 0.95 0.001 0.5 2"/>
      <geom type="box" size="0.05 0.05 0.05" mass="0.1" contype="0"/>
    </body>
  </worldbody>
  <contact>
    <pair name="pill_floor" geom1="floor" geom2="pill" friction="0.6 0.6 0.005 0.0001 0.0001" solref="0.02 1"
          solimp="0.9 0.95 0.001 0.5 2" margin="0.001" gap="0.03"/>
  </contact>
  <actuator>
    <position name="servo" joint="shoulder" kp="8" kv="0.5" ctrlrange="-0.6 0.6"/>
    <motor name="push" joint="slide" forcerange="-0.5 0.5"/>
  </actuator>
  <sensor>
    <accelerometer name="imu_acc" site="imu"/>
    <magnetometer name="imu_mag" site="imu"/>
    <touch name="ball_touch" site="ball_zone"/>
    <jointpos name="shoulder_clamped" joint="shoulder" cutoff="0.3"/>
  </sensor>
</mujoco>
"""

# Bounding-sphere radii below the geoms' true extent, as after randomizing geom_size without
# recomputing rbound: detection then hinges on margin + gap + rbound. Gap only adds inactive
# contacts, so this filter is how it can change the motion. The ball's and the pill's gaps (0.03)
# make up for it, so the unperturbed model still detects their floor contacts in time.
BASE_RBOUND = {"ball": 0.04, "pill": 0.02}

STEPS = 80
CHECKPOINTS = (9, 19, 39, 59, 79)
CTRL = (1.0, 3.0)  # beyond the servo's ctrlrange, and a push the slider's forcerange clamps
# Initial velocities by joint, from its first dof (free joints: world linear velocity first).
QVEL0 = {"box": (2.0,), "ball": (1.0,), "pill": (1.0, 0.3), "shoulder": (3.0,)}


class Sweep(NamedTuple):
    """A sweep model: its MJCF, initial velocities by joint, constant control, geom_rbound overrides."""

    xml: str
    qvel0: dict[str, tuple[float, ...]]
    ctrl: tuple[float, ...]
    rbound: dict[str, float]


# The sweep models by name. "main" holds the core leaves; a feature whose leaves need elements the
# main model lacks (tendons, equality constraints, actuator dynamics, ...) registers its own model
# below it and names it in its recipes, so each model compiles its rollout once.
SWEEPS: dict[str, Sweep] = {"main": Sweep(MODEL, QVEL0, CTRL, BASE_RBOUND)}


@functools.cache
def _base_mjmodel(sweep: str = "main") -> Any:
    m = mujoco.MjModel.from_xml_string(SWEEPS[sweep].xml)
    for name, r in SWEEPS[sweep].rbound.items():
        m.geom_rbound[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, name)] = r
    return m


@functools.cache
def _base_system(sweep: str = "main") -> bp.System:
    return bp.from_mjmodel(_base_mjmodel(sweep))


def _qvel0(m: Any, sweep: str = "main") -> np.ndarray:
    qd = np.zeros(m.nv)
    for name, v in SWEEPS[sweep].qvel0.items():
        adr = m.jnt_dofadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, name)]
        qd[adr : adr + len(v)] = v
    return qd


class Trajectory(NamedTuple):
    """qpos, qvel and sensordata at the checkpoints (float64)."""

    q: np.ndarray
    qd: np.ndarray
    sensordata: np.ndarray


# Python code in the rolled-out function runs only while jit traces it: this counts compilations.
traces = [0]


def _rollout(sys: bp.System, qd0: jax.Array, ctrl: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(q, qd, sensordata) at the checkpoints of a rollout from qpos0."""
    traces[0] += 1

    def body(s: bp.State, _: None) -> tuple[bp.State, tuple[jax.Array, jax.Array, jax.Array]]:
        s = bp.step(sys, s, ctrl)
        return s, (s.q, s.qd, s.sensordata)

    _, (q, qd, data) = jax.lax.scan(body, bp.init(sys, sys.qpos0, qd0, ctrl), None, length=STEPS)
    idx = np.asarray(CHECKPOINTS)
    return q[idx], qd[idx], data[idx]


# Every perturbed System has the base treedef, so this compiles once for the whole sweep.
rollout_jit = jax.jit(_rollout)

Rollout = Callable[[bp.System], Trajectory]


def ours(sys: bp.System, sweep: str = "main") -> Trajectory:
    """Our trajectory of `sys` (a System of sweep model `sweep`) at the checkpoints."""
    qd0 = jnp.asarray(_qvel0(_base_mjmodel(sweep), sweep), jnp.float32)
    q, qd, data = rollout_jit(sys, qd0, jnp.asarray(SWEEPS[sweep].ctrl, jnp.float32))
    return Trajectory(np.asarray(q, np.float64), np.asarray(qd, np.float64), np.asarray(data, np.float64))


def mujoco_rollout(m: Any, sweep: str = "main") -> Trajectory:
    """MuJoCo C's trajectory of MjModel `m` at the checkpoints (mj_resetData: qpos = qpos0)."""
    d = mujoco.MjData(m)
    mujoco.mj_resetData(m, d)
    d.qvel[:] = _qvel0(m, sweep)
    d.ctrl[:] = SWEEPS[sweep].ctrl
    qs, qds, data = [], [], []
    for i in range(STEPS):
        mujoco.mj_step(m, d)
        if i in CHECKPOINTS:
            qs.append(d.qpos.copy())
            qds.append(d.qvel.copy())
            data.append(d.sensordata.copy())
    return Trajectory(np.stack(qs), np.stack(qds), np.stack(data))


# Ours (float32) vs MuJoCo (float64) at every checkpoint: the unperturbed model matches to 6e-7 in
# qpos and 2e-6 in qvel; the worst perturbed ones to 1.2e-5 (the dropped pill's orientation) and
# 2.4e-4 (the sliding box's yaw rate in the changed wind). Sensordata (accelerations to ~40 m/s²,
# the ball's ~9 N touch) matches to 9e-6 unperturbed and 2.2e-4 at worst (touch with geom_gap).
Q_TOL = 1e-4
QD_TOL = 1e-3
SENSOR_TOL = 1e-3
# A perturbation must move the trajectory by this many tolerances, in both engines.
EFFECT = 10.0


def distance(a: Trajectory, b: Trajectory) -> float:
    """Largest difference of two trajectories at the checkpoints, in units of the tolerances."""
    return float(max(np.max(np.abs(a.q - b.q)) / Q_TOL, np.max(np.abs(a.qd - b.qd)) / QD_TOL,
                     np.max(np.abs(a.sensordata - b.sensordata)) / SENSOR_TOL))


def _set(*value: float) -> Callable[[np.ndarray], np.ndarray]:
    v = np.asarray(value[0] if len(value) == 1 else value, np.float64)
    return lambda old: np.broadcast_to(v, np.shape(old)).copy()


def _scale(factor: float) -> Callable[[np.ndarray], np.ndarray]:
    return lambda old: np.asarray(old, np.float64) * factor


def _quat(axis: tuple[float, float, float], degrees: float) -> Callable[[np.ndarray], np.ndarray]:
    """Set a unit quaternion: rotation by `degrees` about `axis` (relative to the frame's parent)."""
    half = np.deg2rad(degrees) / 2
    a = np.asarray(axis, np.float64) / np.linalg.norm(axis)
    return _set(np.cos(half), *(np.sin(half) * a))


def _unit(*v: float) -> Callable[[np.ndarray], np.ndarray]:
    return _set(*(np.asarray(v, np.float64) / np.linalg.norm(v)))


class Recipe(NamedTuple):
    """How to perturb one leaf: the MjModel row (`kind:name`), its columns, and the new value."""

    row: str | None
    """'geom:box', 'body:…', 'jnt:…', 'dof:…'/'qpos:…' (a joint's), 'actuator:…', 'pair:…', 'site:…',
    'sensor:…', 'eq:…', 'tendon:…', 'hfield:…'; None: no rows."""
    cols: int | slice | None
    """Columns of the row (None: the whole row)."""
    change: Callable[[np.ndarray], np.ndarray]
    """Old value (float64) -> new value."""
    why: str
    """Why this element matters in the model."""
    sweep: str = "main"
    """The sweep model (a key of `SWEEPS`) the row is in."""


RECIPES: dict[str, Recipe] = {
    "opt.timestep": Recipe(None, None, _set(0.003), "every stage integrates over it"),
    "opt.gravity": Recipe(None, 2, _set(-7.0), "weight: the box's friction, the arm's torques"),
    "opt.impratio": Recipe(None, None, _set(10.0), "pyramidal contact regularization"),
    "opt.density": Recipe(None, None, _set(200.0), "quadratic drag on the sliding box"),
    "opt.viscosity": Recipe(None, None, _set(0.5), "viscous drag on every moving body"),
    "opt.wind": Recipe(None, None, _set(-3.0, 2.0, 0.0), "drag is relative to the wind"),
    "opt.iterations": Recipe(None, None, _set(4), "four Newton steps leave the contacts unconverged"),
    "opt.ls_iterations": Recipe(None, None, _set(2), "line searches stop short of their minimum"),
    "body_pos": Recipe("body:forearm", None, _set(0.35, 0.0, 0.04), "where the forearm hangs"),
    "body_quat": Recipe("body:forearm", None, _quat((0, 1, 0), 30), "the forearm's rest angle"),
    "body_ipos": Recipe("body:forearm", None, _set(0.18, 0.0, 0.03), "the forearm's com"),
    "body_iquat": Recipe("body:forearm", None, _quat((1, 0, 0), 60),
                         "anisotropic inertia turned about x: inertia about the elbow axis"),
    "body_mass": Recipe("body:forearm", None, _set(1.0), "the swinging forearm"),
    "body_inertia": Recipe("body:forearm", 1, _set(0.006), "inertia about the elbow axis"),
    "body_invweight0": Recipe("body:box", 0, _scale(20.0), "the box's contact regularizer"),
    "jnt_pos": Recipe("jnt:elbow", None, _set(0.04, 0.0, 0.02), "the elbow's anchor"),
    "jnt_axis": Recipe("jnt:elbow", None, _unit(0.0, 1.0, 0.4), "the elbow swings out of plane"),
    "jnt_range": Recipe("jnt:shoulder", 1, _set(0.3), "the upper limit the arm swings into"),
    "jnt_stiffness": Recipe("jnt:shoulder", None, _set(20.0), "the shoulder's spring"),
    "jnt_margin": Recipe("jnt:shoulder", None, _set(0.1), "the limit engages earlier"),
    "jnt_solref": Recipe("jnt:shoulder", None, _set(0.08, 0.4), "softer, bouncier limit"),
    "jnt_solimp": Recipe("jnt:shoulder", None, _set(0.5, 0.7, 0.05, 0.5, 2.0), "softer limit"),
    "qpos0": Recipe("qpos:shoulder", None, _set(0.2),
                    "the start angle: spring, limit and servo see it, the pose (q - qpos0) does not"),
    "qpos_spring": Recipe("qpos:shoulder", None, _set(0.7), "the shoulder spring's rest angle"),
    "dof_damping": Recipe("dof:elbow", None, _set(1.0), "the swinging elbow"),
    "dof_armature": Recipe("dof:elbow", None, _set(0.05), "the swinging elbow"),
    "dof_frictionloss": Recipe("dof:slide", None, _set(0.3), "below the push: the slider slides"),
    "dof_solref": Recipe("dof:slide", None, _set(0.2, 1.0), "the stuck slider creeps faster"),
    "dof_solimp": Recipe("dof:slide", None, _set(0.3, 0.95, 0.001, 0.5, 2.0),
                         "dmin sets the friction row's softness: faster creep"),
    "dof_invweight0": Recipe("dof:slide", None, _scale(10.0), "the friction row's regularizer"),
    "geom_size": Recipe("geom:ball", 0, _set(0.05), "the ball's radius: it drops"),
    "geom_pos": Recipe("geom:pill", None, _set(0.01, 0.0, 0.015), "the capsule starts 1.5 cm up and drops"),
    "geom_quat": Recipe("geom:pill", None, _quat((1, 0, 0), -90),
                        "the capsule's axis turns across the motion: it rolls instead of sliding"),
    "geom_friction": Recipe("geom:box", 0, _set(0.8), "the sliding box has priority over the floor"),
    "geom_rgba": Recipe("geom:box", None, _set(1.0, 0.0, 0.0, 0.5), "visual only"),
    "geom_margin": Recipe("geom:box", None, _set(0.01), "the box floats on a thicker margin"),
    "geom_gap": Recipe("geom:ball", None, _set(0.005),
                       "with its small rbound the ball's contact is detected only below gap + rbound"),
    "geom_solref": Recipe("geom:box", None, _set(0.05, 0.3), "softer, bouncier box contact"),
    "geom_solimp": Recipe("geom:box", None, _set(0.6, 0.8, 0.01, 0.5, 2.0), "softer box contact"),
    "geom_solmix": Recipe("geom:ball", None, _set(10.0),
                          "ball and floor have equal priority and different solref/solimp"),
    "geom_rbound": Recipe("geom:ball", None, _set(0.025), "the bounding-sphere filter drops the contact"),
    "actuator_gear": Recipe("actuator:servo", 0, _set(1.5), "the servo's length and torque"),
    "actuator_gainprm": Recipe("actuator:servo", 0, _set(16.0), "the servo's kp"),
    "actuator_biasprm": Recipe("actuator:servo", 1, _set(-16.0), "the servo's -kp on length"),
    "actuator_ctrlrange": Recipe("actuator:servo", 1, _set(0.2), "the clamped target, now below the limit"),
    "actuator_forcerange": Recipe("actuator:push", 1, _set(1.5), "the clamped push now beats the friction"),
    "pair_friction": Recipe("pair:pill_floor", slice(0, 2), _set(1.0), "the pill slides on its pair"),
    "pair_solref": Recipe("pair:pill_floor", None, _set(0.06, 0.3), "softer, bouncier pill contact"),
    "pair_solimp": Recipe("pair:pill_floor", None, _set(0.6, 0.8, 0.01, 0.5, 2.0), "softer pill contact"),
    "pair_margin": Recipe("pair:pill_floor", None, _set(0.01), "the pill floats on a thicker margin"),
    "pair_gap": Recipe("pair:pill_floor", None, _set(0.01),
                       "with its small rbound the pill's contact is detected only below gap + rbound"),
    "opt.magnetic": Recipe(None, None, _set(0.3, 0.2, -0.1), "the field the imu's magnetometer reads"),
    "site_pos": Recipe("site:imu", None, _set(0.1, -0.02, 0.03), "where the imu rides on the forearm"),
    "site_quat": Recipe("site:imu", None, _quat((0, 0, 1), 60), "the imu's axes, in which it reads"),
    "site_size": Recipe("site:ball_zone", 0, _set(0.05), "the ball's floor contact leaves the touch zone"),
    "sensor_cutoff": Recipe("sensor:shoulder_clamped", None, _set(0.1), "the clamp of the shoulder angle"),
}


# ---- elliptic cones ----
# A box sliding (vx0 = 1.5 m/s) on the floor through an explicit <pair> with elliptic cones: its
# friction rows' damping comes from the pair's solreffriction (unset: its solref). A touch sensor
# reads the elliptic normal force.
SWEEPS["elliptic"] = Sweep(
    """<mujoco model="live_elliptic"><option cone="elliptic" impratio="2"/><worldbody>
    <geom name="floor" type="plane" size="0 0 1"/>
    <body pos="0 0 0.049"><freejoint name="box"/><geom name="box" type="box" size=".1 .08 .05"/>
    <site name="box_zone" size=".2"/></body>
    </worldbody><contact><pair name="box_floor" geom1="floor" geom2="box" condim="4"
    friction=".4 .4 .01 .0001 .0001" solreffriction=".02 1"/></contact>
    <sensor><touch name="box_touch" site="box_zone"/></sensor></mujoco>""",
    {"box": (1.5, 0.0, 0.0, 0.0, 0.0, 2.0)}, (), {},
)
RECIPES.update({
    "pair_solreffriction": Recipe("pair:box_floor", None, _set(0.3, 0.2),
                                  "slow, underdamped friction rows: the sliding box's friction lags",
                                  sweep="elliptic"),
})


# ---- gravity compensation ----
# An arm (hinge shoulder, ball wrist) and a floating box, all with gravcomp and springs (the ball and
# free joints' quaternion springs too); the wrist's gravcomp above 1 lifts it.
SWEEPS["gravcomp"] = Sweep("""
<mujoco model="gravcomp">
  <option timestep="0.004"><flag contact="disable"/></option>
  <worldbody>
    <body name="upper" pos="0 0 1" gravcomp="0.6">
      <joint name="shoulder" type="hinge" axis="0 1 0" stiffness="0.5" springref="20"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      <body name="lower" pos="0.3 0 0" gravcomp="1.5">
        <joint name="wrist" type="ball" stiffness="0.8" damping="0.02"/>
        <geom type="capsule" fromto="0 0 0 0 0.1 -0.25" size="0.025"/>
      </body>
    </body>
    <body name="floater" pos="1 0 1" euler="10 20 30" gravcomp="0.5">
      <joint name="float" type="free" stiffness="3" damping="0.1"/>
      <geom type="box" size="0.1 0.07 0.05"/>
    </body>
  </worldbody>
  <sensor><subtreecom body="upper"/></sensor>
</mujoco>
""", {"shoulder": (1.0,), "wrist": (0.5, -1.0, 0.3), "float": (0.2, 0.0, 0.1, 1.0, 0.0, -0.5)}, (), {})
RECIPES.update({
    "body_gravcomp": Recipe("body:lower", None, _set(0.3), "the lifted wrist now sags", sweep="gravcomp"),
})


# ---- equality constraints ----
# A four-bar closed by a connect, a free load welded to a swinging arm (its own solref/solimp), two
# hinges coupled by a joint equality's polycoef, two hinges whose fixed tendons are coupled by a tendon
# equality; one joint sensor (the sweep compares sensordata).
EQUALITY_MODEL = """
<mujoco model="equality_sweep">
  <option timestep="0.002"/>
  <default><geom contype="0" conaffinity="0"/><joint axis="0 1 0"/></default>
  <worldbody>
    <body name="crank" pos="0 0 1">
      <joint name="crank" damping="0.05"/>
      <geom type="capsule" fromto="0 0 0 0 0 .3" size=".02"/>
      <body name="coupler" pos="0 0 .3">
        <joint name="coupler"/>
        <geom type="capsule" fromto="0 0 0 1 0 0" size=".02"/>
      </body>
    </body>
    <body name="rocker" pos="1 0 1">
      <joint name="rocker"/>
      <geom type="capsule" fromto="0 0 0 0 0 .3" size=".02"/>
    </body>
    <body name="arm" pos="0 2 1">
      <joint name="arm" axis="1 0 0"/>
      <geom type="capsule" fromto="0 0 0 0 .4 0" size=".02"/>
    </body>
    <body name="load" pos="0 2.45 1">
      <freejoint name="load"/>
      <geom type="sphere" size=".05" pos=".02 0 0"/>
    </body>
    <body name="p1" pos="0 3 1">
      <joint name="p1"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".02"/>
    </body>
    <body name="p2" pos="0 3.5 1">
      <joint name="p2"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".02"/>
    </body>
    <body name="p3" pos="0 4 1">
      <joint name="p3"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".02"/>
    </body>
    <body name="p4" pos="0 4.5 1">
      <joint name="p4"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".02"/>
    </body>
  </worldbody>
  <tendon>
    <fixed name="t3"><joint joint="p3" coef="0.5"/></fixed>
    <fixed name="t4"><joint joint="p4" coef="2"/></fixed>
  </tendon>
  <equality>
    <connect name="fourbar" body1="coupler" body2="rocker" anchor="1 0 0"/>
    <weld name="arm_load" body1="arm" body2="load" solref="0.02 1" solimp="0.9 0.95 0.001 0.5 2"/>
    <joint name="couple" joint1="p2" joint2="p1" polycoef="0 0.8 0.3 0 0"/>
    <tendon name="t34" tendon1="t4" tendon2="t3" polycoef="0 -1.2 0 0 0"/>
  </equality>
  <sensor><jointpos joint="p2"/></sensor>
</mujoco>
"""
SWEEPS["equality"] = Sweep(EQUALITY_MODEL, {"crank": (2.0,), "arm": (1.5,), "p1": (-2.0,), "p3": (1.5,)},
                           (), {})
RECIPES.update({
    "eq_data": Recipe("eq:couple", 1, _set(-0.5), "the coupling's slope: p2 follows p1 the other way",
                      sweep="equality"),
    "eq_solref": Recipe("eq:arm_load", None, _set(0.1, 0.3), "a softer, bouncier weld: the load sags",
                        sweep="equality"),
    "eq_solimp": Recipe("eq:arm_load", None, _set(0.3, 0.6, 0.01, 0.5, 2.0), "a softer weld: the load sags",
                        sweep="equality"),
    "tendon_length0": Recipe("tendon:t3", None, _set(0.2), "the tendon coupling's reference: p4 turns",
                             sweep="equality"),
})


# ---- actuators ----
# A filter-driven shoulder, a rail driven through an integrator whose actrange holds it, a muscle on
# the elbow (force from scale / acc0, length normalized by its lengthrange), a slider-crank, and a
# wheel whose motor lends it damping and armature and whose total actuator force is clamped (its com
# is off its axis: MuJoCo's compiler bakes the inertia of a body that spins about its com, so
# armature changes would not reach its mass matrix).
ACTUATOR_MODEL = """
<mujoco model="live_actuators">
  <option timestep="0.004"/>
  <default><geom contype="0" conaffinity="0"/></default>
  <worldbody>
    <body name="upper" pos="0 0 1">
      <joint name="shoulder" type="hinge" axis="0 1 0" damping="0.05" range="-90 90"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      <body name="lower" pos="0.3 0 0">
        <joint name="elbow" type="hinge" axis="0 1 0" range="-100 100"/>
        <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.025"/>
      </body>
    </body>
    <body name="carriage" pos="1 0 1">
      <joint name="rail" type="slide" axis="1 0 0" damping="0.5"/>
      <geom type="box" size=".05 .05 .05"/>
      <site name="slider" euler="0 90 0"/>
    </body>
    <body name="crank" pos="1 1 1">
      <joint name="crank" type="hinge" axis="0 1 0" damping="0.01"/>
      <geom type="capsule" fromto="0 0 0 0.1 0 0" size="0.02"/>
      <site name="crankpin" pos="0.1 0 0"/>
    </body>
    <site name="crank_slider" pos="0.9 1 1" euler="0 90 0"/>
    <body name="wheel" pos="2 0 1">
      <joint name="wheel" type="hinge" axis="0 0 1" actuatorfrcrange="-0.4 0.4"/>
      <geom type="cylinder" size="0.1 0.02" pos="0.05 0 0"/>
    </body>
  </worldbody>
  <actuator>
    <general name="filter" joint="shoulder" dyntype="filter" dynprm="0.1" gainprm="3"/>
    <general name="integrator" joint="rail" dyntype="integrator" actlimited="true" actrange="-0.3 0.3"
             gainprm="20" biastype="affine" biasprm="0 -20 -2"/>
    <muscle name="muscle" joint="elbow" ctrlrange="0 1" scale="50"/>
    <general name="crank" cranksite="crankpin" slidersite="crank_slider" cranklength="0.15" gainprm="0.3"/>
    <motor name="wheel" joint="wheel" gear="2" damping="0.05" armature="0.01"/>
  </actuator>
  <sensor>
    <actuatorfrc actuator="muscle"/>
    <jointactuatorfrc joint="wheel"/>
  </sensor>
</mujoco>
"""
SWEEPS["actuator"] = Sweep(ACTUATOR_MODEL, {"crank": (2.0,)}, (1.0, 1.0, 0.8, 1.0, 1.0), {})
RECIPES.update({
    "actuator_dynprm": Recipe("actuator:filter", 0, _set(0.3), "the shoulder's filter time constant",
                              sweep="actuator"),
    "actuator_actrange": Recipe("actuator:integrator", 1, _set(0.1),
                                "the rail's setpoint, held at its actrange", sweep="actuator"),
    "actuator_lengthrange": Recipe("actuator:muscle", 1, _scale(1.5), "the muscle's normalized length",
                                   sweep="actuator"),
    "actuator_acc0": Recipe("actuator:muscle", None, _scale(2.0), "the muscle's peak force, scale / acc0",
                            sweep="actuator"),
    "actuator_cranklength": Recipe("actuator:crank", None, _set(0.25), "the crank's rod: its moment arm",
                                   sweep="actuator"),
    "actuator_damping": Recipe("actuator:wheel", None, _set(0.5), "damping the wheel inherits (by gear²)",
                               sweep="actuator"),
    "actuator_armature": Recipe("actuator:wheel", None, _set(0.1), "armature the wheel inherits (by gear²)",
                                sweep="actuator"),
    "jnt_actfrcrange": Recipe("jnt:wheel", None, _set(-1.0, 1.0), "the clamp of the wheel's motor torque",
                              sweep="actuator"),
})


# ---- tendons ----
# A two-link arm: a fixed tendon couples shoulder and elbow (spring with a dead band, damper,
# armature, friction loss); a spatial cord runs anchor -> upper arm, then, after a pulley (divisor
# 2), anchor -> forearm, with a spring, a damper and a length limit the swinging arm runs into.
SWEEPS["tendon"] = Sweep("""
<mujoco model="tendon_sweep">
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
        <site name="s_lower" pos="0.3 0 0"/>
      </body>
    </body>
  </worldbody>
  <tendon>
    <fixed name="couple" stiffness="5" damping="0.3" springlength="-0.1 0.1" armature="0.02"
           frictionloss="1">
      <joint joint="shoulder" coef="1"/>
      <joint joint="elbow" coef="-0.5"/>
    </fixed>
    <spatial name="cord" stiffness="30" springlength="0.3" damping="0.2" range="0 0.75">
      <site site="anchor"/>
      <site site="s_upper"/>
      <pulley divisor="2"/>
      <site site="anchor"/>
      <site site="s_lower"/>
    </spatial>
  </tendon>
  <sensor><jointpos joint="elbow"/></sensor>
</mujoco>
""", {"shoulder": (3.0,)}, (), {})
RECIPES.update({
    "wrap_prm": Recipe(None, 1, _set(-1.5), "the elbow's coefficient in the coupling", sweep="tendon"),
    "tendon_stiffness": Recipe("tendon:cord", None, _set(80.0), "the cord's spring", sweep="tendon"),
    "tendon_damping": Recipe("tendon:couple", None, _set(3.0), "the coupling's damper", sweep="tendon"),
    "tendon_lengthspring": Recipe("tendon:couple", None, _set(0.0, 0.0), "the coupling's dead band closes",
                                  sweep="tendon"),
    "tendon_armature": Recipe("tendon:couple", None, _set(0.5), "inertia along the coupling", sweep="tendon"),
    "tendon_range": Recipe("tendon:cord", 1, _set(0.72), "the cord's length limit", sweep="tendon"),
    "tendon_margin": Recipe("tendon:cord", None, _set(0.05), "the cord's limit engages earlier",
                            sweep="tendon"),
    "tendon_solref_lim": Recipe("tendon:cord", None, _set(0.08, 0.4), "softer, bouncier cord limit",
                                sweep="tendon"),
    "tendon_solimp_lim": Recipe("tendon:cord", None, _set(0.5, 0.7, 0.05, 0.5, 2.0), "softer cord limit",
                                sweep="tendon"),
    "tendon_frictionloss": Recipe("tendon:couple", None, _set(0.3), "dry friction along the coupling",
                                  sweep="tendon"),
    "tendon_solref_fri": Recipe("tendon:couple", None, _set(0.2, 1.0),
                                "the coupling's friction creeps faster", sweep="tendon"),
    "tendon_solimp_fri": Recipe("tendon:couple", None, _set(0.3, 0.95, 0.001, 0.5, 2.0),
                                "dmin sets the friction row's softness", sweep="tendon"),
    "tendon_invweight0": Recipe("tendon:cord", None, _scale(10.0), "the cord limit's regularizer",
                                sweep="tendon"),
})


# ---- convex meshes ----
# A mesh block (a box's 8 corners) slides on the floor (vx0 = 1.5 m/s) on MuJoCo's four plane-mesh
# contacts, and a mesh ball (14 vertices) drops and rolls. Scaling every vertex by 1.2 lifts the
# block (its contacts are its corners) and grows the ball; MuJoCo's polygon normals stay valid.
# (Mesh-mesh is left out: a polyhedron landing face-on on a face is a tie that float32 and float64
# break differently, see mesh_test for that pair.)
SWEEPS["mesh"] = Sweep("""
<mujoco model="mesh_sweep">
  <option timestep="0.004"><flag multiccd="disable"/></option>
  <asset>
    <mesh name="block" vertex="-.1 -.08 -.04  .1 -.08 -.04  -.1 .08 -.04  .1 .08 -.04
                               -.1 -.08 .04  .1 -.08 .04  -.1 .08 .04  .1 .08 .04"/>
    <mesh name="ball" vertex="0 0 .05  0 0 -.05  .05 0 0  -.05 0 0  0 .05 0  0 -.05 0
                              .03 .03 .03  -.03 .03 .03  .03 -.03 .03  -.03 -.03 .03
                              .03 .03 -.03  -.03 .03 -.03  .03 -.03 -.03  -.03 -.03 -.03"/>
  </asset>
  <worldbody>
    <geom name="floor" type="plane" size="0 0 1"/>
    <body name="block" pos="0 0 0.041"><freejoint name="block"/><geom type="mesh" mesh="block"/></body>
    <body name="ball" pos="1 0 0.07"><freejoint name="ball"/><geom type="mesh" mesh="ball"/></body>
  </worldbody>
  <sensor><framepos objtype="xbody" objname="ball"/></sensor>
</mujoco>
""", {"block": (1.5,), "ball": (0.0, 1.0)}, (), {})
RECIPES.update({
    "mesh_vert": Recipe(None, None, _scale(1.2), "the block's corners hold it up; the ball lands on it",
                        sweep="mesh"),
})


# ---- height fields ----
# A ball and a box thrown down onto a bumpy terrain, a rangefinder looking down at it from a rig:
# taller bumps meet the bodies earlier and shorten the range.
_HF_ELEV = " ".join(f"{v:.3f}" for v in np.random.default_rng(3).uniform(0, 1, 36))
SWEEPS["hfield"] = Sweep(f"""
<mujoco model="live_hfield">
  <asset><hfield name="terrain" nrow="6" ncol="6" size="0.6 0.6 0.25 0.1" elevation="{_HF_ELEV}"/></asset>
  <worldbody>
    <geom name="terrain" type="hfield" hfield="terrain" euler="0 0 15"/>
    <body name="rig"><site name="look" pos="0.2 -0.25 1" euler="180 0 0"/></body>
    <body pos="-0.2 0.1 0.42"><freejoint name="ball"/><geom name="ball" type="sphere" size="0.08"/></body>
    <body pos="0.25 0.2 0.4" euler="10 20 30"><freejoint name="box"/>
      <geom name="box" type="box" size="0.08 0.06 0.05" margin="0.001"/></body>
  </worldbody>
  <sensor><rangefinder site="look"/></sensor>
</mujoco>""", {"ball": (0.3, 0.0, -2.0), "box": (0.0, -0.2, -2.0)}, (), {})
RECIPES.update({
    "hfield_size": Recipe("hfield:terrain", 2, _scale(1.3), "taller bumps: earlier landings, a shorter range",
                          sweep="hfield"),
    "hfield_data": Recipe(None, None, _scale(0.7), "flatter terrain: later landings, a longer range",
                          sweep="hfield"),
})


# ---- noslip ----
# A four-link chain swinging down from horizontal, every hinge with friction loss: the noslip
# sweeps re-solve the coupled friction-loss rows without regularizer, and a loose tolerance stops
# them after the first sweep, far from converged.
SWEEPS["noslip"] = Sweep("""
<mujoco model="noslip_sweep">
  <option timestep="0.004" noslip_iterations="10"/>
  <default><joint type="hinge" axis="0 1 0" frictionloss="0.2"/><geom type="capsule" size=".02"/></default>
  <worldbody>
    <body pos="0 0 1"><joint name="j1"/><geom fromto="0 0 0 .2 0 0"/>
      <body pos=".2 0 0"><joint/><geom fromto="0 0 0 .2 0 0"/>
        <body pos=".2 0 0"><joint/><geom fromto="0 0 0 .2 0 0"/>
          <body pos=".2 0 0"><joint/><geom fromto="0 0 0 .2 0 0"/></body>
        </body>
      </body>
    </body>
  </worldbody>
  <sensor><jointpos joint="j1"/></sensor>
</mujoco>
""", {"j1": (2.0,)}, (), {})
RECIPES.update({
    "opt.noslip_tolerance": Recipe(None, None, _set(10.0), "one sweep instead of several", sweep="noslip"),
})


def _leaf_fields(cls: type = System, prefix: str = "") -> list[tuple[str, dataclasses.Field[Any]]]:
    """(path, field) of every non-static field, recursing into nested dataclasses ('opt.gravity')."""
    hints = typing.get_type_hints(cls)
    out: list[tuple[str, dataclasses.Field[Any]]] = []
    for f in dataclasses.fields(cls):
        if f.metadata.get("static"):
            continue
        t = hints[f.name]
        if isinstance(t, type) and dataclasses.is_dataclass(t):
            out += _leaf_fields(t, f"{prefix}{f.name}.")
        else:
            out.append((prefix + f.name, f))
    return out


LEAVES = [path for path, _ in _leaf_fields()]
VISUAL = {path for path, f in _leaf_fields() if f.metadata.get("visual")}


def _get_leaf(sys: Any, path: str) -> Any:
    for part in path.split("."):
        sys = getattr(sys, part)
    return sys


def _replace_leaf(sys: Any, path: str, value: Any) -> Any:
    head, _, rest = path.partition(".")
    return sys.replace(**{head: _replace_leaf(getattr(sys, head), rest, value) if rest else value})


def _mj_field(m: Any, path: str) -> tuple[Any, str]:
    """(owner, attribute) of the MjModel field a leaf mirrors ('opt.gravity': m.opt.gravity)."""
    owner, _, attr = path.rpartition(".")
    obj = _get_leaf(m, owner) if owner else m
    if hasattr(obj, attr):
        return obj, attr
    group, _, rest = attr.partition("_")
    if hasattr(obj, group) and hasattr(getattr(obj, group), rest):
        return getattr(obj, group), rest
    raise AssertionError(f"System leaf '{path}' has no MjModel field of the same name")


_OBJ = {"geom": mujoco.mjtObj.mjOBJ_GEOM, "body": mujoco.mjtObj.mjOBJ_BODY, "jnt": mujoco.mjtObj.mjOBJ_JOINT,
        "dof": mujoco.mjtObj.mjOBJ_JOINT, "qpos": mujoco.mjtObj.mjOBJ_JOINT,
        "actuator": mujoco.mjtObj.mjOBJ_ACTUATOR, "pair": mujoco.mjtObj.mjOBJ_PAIR,
        "site": mujoco.mjtObj.mjOBJ_SITE, "sensor": mujoco.mjtObj.mjOBJ_SENSOR,
        "eq": mujoco.mjtObj.mjOBJ_EQUALITY, "tendon": mujoco.mjtObj.mjOBJ_TENDON,
        "hfield": mujoco.mjtObj.mjOBJ_HFIELD}


def _index(m: Any, recipe: Recipe) -> tuple[Any, ...]:
    if recipe.row is None:
        return (Ellipsis,) if recipe.cols is None else (recipe.cols,)
    kind, _, name = recipe.row.partition(":")
    i = mujoco.mj_name2id(m, _OBJ[kind], name)
    assert i >= 0, f"no {kind} named '{name}' in the sweep model"
    if kind == "dof":
        i = int(m.jnt_dofadr[i])
    elif kind == "qpos":
        i = int(m.jnt_qposadr[i])
    return (i,) if recipe.cols is None else (i, recipe.cols)


def perturbed(path: str, recipe: Recipe) -> tuple[bp.System, Any]:
    """The base System and a copy of the base MjModel, both with the recipe's change."""
    m = copy.deepcopy(_base_mjmodel(recipe.sweep))
    owner, attr = _mj_field(m, path)
    field = getattr(owner, attr)
    value = np.array(field, np.float64)
    idx = _index(m, recipe)
    value[idx] = recipe.change(value[idx])
    assert not np.array_equal(value, np.asarray(field)), f"the recipe for '{path}' changes nothing"
    if np.ndim(field) == 0:
        setattr(owner, attr, type(field)(value))  # an int field (opt.iterations) stays an int
    else:
        field[...] = value
    sys = _base_system(recipe.sweep)
    old = _get_leaf(sys, path)
    new = jnp.asarray(value.reshape(old.shape).astype(old.dtype))
    return _replace_leaf(sys, path, new), m


@functools.cache
def _ours_base(sweep: str = "main") -> Trajectory:
    return ours(_base_system(sweep), sweep)


@functools.cache
def _mujoco_base(sweep: str = "main") -> Trajectory:
    return mujoco_rollout(_base_mjmodel(sweep), sweep)


class Measure(NamedTuple):
    """One leaf's sweep, in units of the tolerances."""

    error: float
    """Ours vs MuJoCo after the change."""
    effect_ours: float
    """Our perturbed vs unperturbed trajectory."""
    effect_mujoco: float
    """MuJoCo's perturbed vs unperturbed trajectory."""


def measure(path: str, recipe: Recipe, rollout: Rollout | None = None) -> Measure:
    """Apply the recipe in both engines and compare the trajectories (`rollout`: ours by default)."""
    sys, m = perturbed(path, recipe)
    got = ours(sys, recipe.sweep) if rollout is None else rollout(sys)
    want = mujoco_rollout(m, recipe.sweep)
    return Measure(distance(got, want), distance(got, _ours_base(recipe.sweep)),
                   distance(want, _mujoco_base(recipe.sweep)))


def problems(path: str, r: Measure, visual: bool) -> list[str]:
    """What is wrong with a leaf's sweep (empty if nothing)."""
    out = []
    if r.error > 1:
        out.append(f"'{path}': after the change ours differs from MuJoCo by {r.error:.3g} tolerances")
    if visual:
        if r.effect_ours or r.effect_mujoco:
            out.append(f"visual leaf '{path}' changes the motion (ours {r.effect_ours:.3g}, "
                       f"MuJoCo {r.effect_mujoco:.3g} tolerances)")
        return out
    if r.effect_mujoco < EFFECT:
        out.append(f"'{path}': MuJoCo shows no clear effect ({r.effect_mujoco:.3g} < {EFFECT} tolerances): "
                   "the recipe must change an element that matters (a leaf that cannot should be static)")
    if r.effect_ours < EFFECT:
        out.append(f"'{path}': no clear effect in ours ({r.effect_ours:.3g} < {EFFECT} tolerances, MuJoCo "
                   f"{r.effect_mujoco:.3g}): the leaf is not read, or read from a load-time copy")
    return out


@pytest.mark.parametrize("sweep", list(SWEEPS))
def test_unperturbed_model_matches_mujoco(sweep: str) -> None:
    assert distance(_ours_base(sweep), _mujoco_base(sweep)) <= 1
    _swept.add(sweep)  # its rollout is compiled now


@pytest.mark.parametrize("path", LEAVES)
def test_leaf_is_live(path: str) -> None:
    recipe = RECIPES.get(path)
    assert recipe is not None, (
        f"no sweep recipe for new System leaf '{path}': add one to RECIPES in live_parameters_test.py "
        "(an element of the sweep model where it matters, extending the model if needed)"
    )
    bad = problems(path, measure(path, recipe), path in VISUAL)
    assert not bad, "; ".join(bad)
    _swept.add(recipe.sweep)
    assert traces[0] <= len(_swept), "a perturbed System recompiled the rollout"


_swept: set[str] = set()  # sweep models measured so far in this process (one compile each)


def test_every_recipe_names_a_leaf() -> None:
    stale = sorted(set(RECIPES) - set(LEAVES))
    assert not stale, f"recipes for fields that are not System leaves (renamed or made static?): {stale}"


def test_sweep_catches_a_baked_leaf() -> None:
    # A rollout that reads geom_friction from the loaded model, as the load-time pair tables did.
    base = _base_system()

    def baked(sys: bp.System) -> Trajectory:
        return ours(sys.replace(geom_friction=base.geom_friction))

    r = measure("geom_friction", RECIPES["geom_friction"], baked)
    assert r.effect_ours == 0.0
    bad = problems("geom_friction", r, visual=False)
    assert any("no clear effect in ours" in b for b in bad), bad
    assert any("differs from MuJoCo" in b for b in bad), bad


@pytest.mark.parametrize(("field", "value"), [("nq", 3), ("geom_condim", (1,) * 7)])
def test_replacing_a_static_field_raises(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=field):
        _base_system().replace(**{field: value})
