"""Ray casting (`ray.py`) and rangefinder sensors vs MuJoCo C's mj_ray and sensordata."""

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
from brax_physics._src import ray, sensor

# One geom of each primitive type, each in its own group (group = its index in `ray.PRIMITIVES`),
# so mj_ray's geomgroup mask can single out one type. Sizes and positions are dyadic (exact in
# float32); the orientations are arbitrary. The plane is finite (rays beyond 0.75 x 0.5 miss it).
GEOMS = """
<mujoco>
  <default><geom contype="0" conaffinity="0"/></default>
  <worldbody>
    <geom name="plane" type="plane" size="0.75 0.5 0.1" pos="0 0 -0.5" euler="10 -20 30" group="0"/>
    <body name="b" pos="0.25 -0.125 0.5" euler="15 25 -40">
      <joint type="ball"/>
      <geom name="sphere" type="sphere" size="0.25" pos="0.5 0 0" group="1"/>
      <geom name="capsule" type="capsule" size="0.125 0.25" pos="-0.5 0 0" euler="30 0 45" group="2"/>
      <geom name="ellipsoid" type="ellipsoid" size="0.125 0.25 0.375" pos="0 0.5 0" euler="0 60 10"
            group="3"/>
      <geom name="cylinder" type="cylinder" size="0.25 0.125" pos="0 -0.5 0" euler="-30 45 0" group="4"/>
      <geom name="box" type="box" size="0.125 0.25 0.0625" pos="0 0 0.5" euler="20 -10 70" group="5"/>
    </body>
  </worldbody>
</mujoco>
"""
GROUPS = {name: i for i, name in enumerate(("plane", "sphere", "capsule", "ellipsoid", "cylinder", "box"))}


@functools.cache
def _geoms() -> tuple[Any, Any]:
    m = mujoco.MjModel.from_xml_string(GEOMS)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    return m, d


def _rays(m: Any, d: Any, g: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n rays about geom g: aimed at points near it (hits, grazes, misses), some starting inside it."""
    rng = np.random.default_rng(seed)
    center = d.geom_xpos[g]
    extent = max(float(m.geom_rbound[g]), 0.75)
    start = center + rng.normal(size=(n, 3)) * extent * 1.5
    inside = rng.random(n) < 0.2
    start[inside] = center + rng.normal(size=(int(inside.sum()), 3)) * 0.03
    target = center + rng.normal(size=(n, 3)) * extent * 0.5
    vec = (target - start) * rng.uniform(0.3, 3.0, size=(n, 1))  # mj_ray does not normalize vec
    away = rng.random(n) < 0.15
    vec[away] = -vec[away]
    return start, vec


def _mj_ray(m: Any, d: Any, pnt: np.ndarray, vec: np.ndarray, group: np.ndarray | None,
            bodyexclude: int = -1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    dist, gid, normal = [], [], []
    for p, v in zip(pnt, vec, strict=True):
        g = np.zeros(1, np.int32)
        nrm = np.zeros(3)
        dist.append(mujoco.mj_ray(m, d, p, v, group, 1, bodyexclude, g, nrm))
        gid.append(int(g[0]))
        normal.append(nrm)
    return np.asarray(dist), np.asarray(gid), np.asarray(normal)


@pytest.mark.parametrize("name", list(GROUPS))
def test_ray_matches_mj_ray_on_each_geom_type_in_float64(name: str) -> None:
    # MuJoCo's own geom frames and sizes in float64, so hits, misses and grazes are decided alike.
    m, d = _geoms()
    sys = bp.from_mjmodel(m)
    g = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, name)
    pnt, vec = _rays(m, d, g, 400, seed=g)
    mask = np.zeros(ray.NGROUP, np.uint8)
    mask[GROUPS[name]] = 1
    want_d, want_g, want_n = _mj_ray(m, d, pnt, vec, mask)
    seen = np.broadcast_to(ray.candidates(sys, tuple(int(b) for b in mask)), (len(pnt), m.ngeom))
    with jax.enable_x64(True):
        sys64 = sys.replace(geom_size=jnp.asarray(m.geom_size, jnp.float64))
        hit = ray.cast(sys64, jnp.asarray(d.geom_xpos), jnp.asarray(d.geom_xmat.reshape(-1, 3, 3)),
                       jnp.asarray(pnt), jnp.asarray(vec), seen)
        got_d, got_g, got_n = np.asarray(hit.dist), np.asarray(hit.geomid), np.asarray(hit.normal)
    assert 0.2 < np.mean(want_d >= 0) < 0.9, "the rays should both hit and miss"
    np.testing.assert_array_equal(got_g, want_g)
    np.testing.assert_allclose(got_d, want_d, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got_n, want_n, atol=1e-10)


def test_nearest_geom_wins_in_float32() -> None:
    # Rays among all six geoms through our own kinematics (float32), as `bp.State` gives them.
    m, d = _geoms()
    sys = bp.from_mjmodel(m)
    state = jax.jit(bp.init)(sys)
    pnt, vec = [], []
    for g in range(m.ngeom):
        p, v = _rays(m, d, g, 60, seed=100 + g)
        pnt.append(p)
        vec.append(v)
    pnt_, vec_ = np.concatenate(pnt), np.concatenate(vec)
    want_d, want_g, want_n = _mj_ray(m, d, pnt_, vec_, None)
    cast = jax.jit(jax.vmap(lambda p, v: bp.ray(sys, state, p, v)))
    hit = cast(jnp.asarray(pnt_, jnp.float32), jnp.asarray(vec_, jnp.float32))
    got_d, got_g = np.asarray(hit.dist), np.asarray(hit.geomid)
    # float32 can flip a ray that grazes an edge or a silhouette: allow a few, compare the rest
    same = got_g == want_g
    assert np.mean(same) > 0.98, f"{np.sum(~same)} of {same.size} rays hit different geoms"
    assert len(set(want_g[want_g >= 0])) == m.ngeom, "every geom should be hit by some ray"
    np.testing.assert_allclose(got_d[same], want_d[same], rtol=2e-5, atol=2e-5)
    # normals where the ray does not graze the surface (there they turn fast along the ray)
    facing = np.abs(np.sum(want_n * vec_, axis=1)) > 0.2 * np.linalg.norm(vec_, axis=1)
    hit_ = same & (want_d >= 0) & facing
    np.testing.assert_allclose(np.asarray(hit.normal)[hit_], want_n[hit_], atol=2e-4)


# Degenerate rays: tangent to a sphere, an ellipsoid or a capsule's round side, along a capsule's
# or a cylinder's axis, parallel to box faces and to the plane, along a face, and from inside.
# (geom, point and direction in the geom's frame, exact: whether the hit is decided by more than
# rounding; tangents and rays along a face are not, so only their gradients are checked)
EDGE_CASES = [
    ("sphere", (0.25, 0.0, -1.0), (0.0, 0.0, 1.0), False),  # tangent
    ("sphere", (0.0, 0.0, 0.0), (0.3, -0.2, 0.1), True),  # from the center
    ("capsule", (0.0, 0.0, -2.0), (0.0, 0.0, 1.0), True),  # along the axis: only the caps
    ("capsule", (0.125, 0.0, -2.0), (0.0, 0.0, 1.0), False),  # tangent to the round side
    ("capsule", (0.0, 0.0, 0.0), (1.0, 0.0, 0.0), True),  # from inside
    ("cylinder", (0.0, 0.0, -2.0), (0.0, 0.0, 1.0), True),  # along the axis: the flat end
    ("cylinder", (0.5, 0.0, 0.0), (-1.0, 0.0, 0.0), True),  # perpendicular to the axis
    ("cylinder", (0.0, 0.0, 0.0), (0.0, 1.0, 0.0), True),  # from inside
    ("box", (-1.0, 0.0, 0.0), (1.0, 0.0, 0.0), True),  # parallel to four faces
    ("box", (-1.0, 0.25, 0.0), (1.0, 0.0, 0.0), False),  # along a face
    ("box", (0.0, 0.0, 0.0), (0.0, 0.0, -1.0), True),  # from inside
    ("ellipsoid", (0.0, 0.0, 0.0), (1.0, 1.0, 1.0), True),  # from inside
    ("ellipsoid", (0.125, 0.0, -1.0), (0.0, 0.0, 1.0), False),  # tangent
    ("plane", (0.0, 0.0, 1.0), (1.0, 0.0, 0.0), True),  # parallel
    ("plane", (0.0, 0.0, -1.0), (0.0, 0.0, 1.0), True),  # from behind
    ("plane", (0.0, 0.0, 1.0), (0.0, 0.0, -1.0), True),  # head on
]


@pytest.mark.parametrize(("name", "p", "v", "exact"), EDGE_CASES)
def test_degenerate_rays_match_mujoco_with_finite_gradients(name: str, p: tuple[float, ...],
                                                            v: tuple[float, ...], exact: bool) -> None:
    m, d = _geoms()
    sys = bp.from_mjmodel(m)
    g = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, name)
    mat = d.geom_xmat[g].reshape(3, 3)
    pnt = d.geom_xpos[g] + mat @ np.asarray(p)
    vec = mat @ np.asarray(v)
    mask = np.zeros(ray.NGROUP, np.uint8)
    mask[GROUPS[name]] = 1
    want_d, _, _ = _mj_ray(m, d, pnt[None], vec[None], mask)
    seen = ray.candidates(sys, tuple(int(b) for b in mask))[None, :]
    xpos = jnp.asarray(d.geom_xpos, jnp.float32)
    xmat = jnp.asarray(d.geom_xmat.reshape(-1, 3, 3), jnp.float32)

    def dist(size: jax.Array, pnt: jax.Array, vec: jax.Array) -> jax.Array:
        return ray.cast(sys.replace(geom_size=size), xpos, xmat, pnt[None], vec[None], seen).dist[0]

    args = (sys.geom_size, jnp.asarray(pnt, jnp.float32), jnp.asarray(vec, jnp.float32))
    if exact:
        np.testing.assert_allclose(float(dist(*args)), want_d[0], rtol=1e-5, atol=1e-5)
    grads = jax.grad(dist, argnums=(0, 1, 2))(*args)
    for gr in grads:
        assert np.all(np.isfinite(np.asarray(gr))), grads


def test_ray_respects_bodyexclude_static_visibility_and_groups() -> None:
    xml = """
    <mujoco>
      <asset><material name="ghost" rgba="1 1 1 0"/></asset>
      <default><geom contype="0" conaffinity="0"/></default>
      <worldbody>
        <geom name="floor" type="plane" size="0 0 1" group="2"/>
        <geom name="hidden" type="box" size="1 1 0.1" pos="0 0 0.5" rgba="1 0 0 0"/>
        <geom name="ghost" type="box" size="1 1 0.1" pos="0 0 0.75" material="ghost" rgba="1 0 0 1"/>
        <body name="lid" pos="0 0 1"><joint type="slide" axis="0 0 1"/>
          <inertial pos="0 0 0" mass="1" diaginertia="1 1 1"/>
          <geom name="lid" type="box" size="1 1 0.1" group="7"/>
        </body>
        <body name="fixed" pos="0 0 0.25"><geom name="fixed" type="box" size="1 1 0.05" group="1"/></body>
      </worldbody>
    </mujoco>
    """
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    sys = bp.from_mjmodel(m)
    state = jax.jit(bp.init)(sys)
    lid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "lid")
    pnt, vec = np.array([0.1, 0.2, 2.0]), np.array([0.0, 0.0, -1.0])
    cases = [(None, 1, -1), (None, 1, lid), (None, 0, lid), ((1, 1, 0, 0, 0, 1), 1, -1),
             ((1, 1, 0, 0, 0, 0), 1, -1), ((0, 0, 1, 0, 0, 0), 1, lid), ((0, 1, 0, 0, 0, 0), 0, -1)]
    seen_ids = set()
    for group, static, exclude in cases:
        mask = None if group is None else np.asarray(group, np.uint8)
        g = np.zeros(1, np.int32)
        want = mujoco.mj_ray(m, d, pnt, vec, mask, static, exclude, g, None)
        hit = bp.ray(sys, state, jnp.asarray(pnt, jnp.float32), jnp.asarray(vec, jnp.float32), group,
                      bool(static), exclude)
        assert int(hit.geomid) == int(g[0]), (group, static, exclude)
        np.testing.assert_allclose(float(hit.dist), want, rtol=1e-6)
        seen_ids.add(int(g[0]))
    assert len(seen_ids) >= 4, seen_ids  # lid, fixed, floor and a miss


# Rangefinders on a spinning arm and on a free body: rays sweep over geoms of every type (some on
# other moving bodies), skip their own body's geoms and invisible ones, and some find nothing (-1).
RANGE = """
<mujoco>
  <option timestep="0.01"/>
  <asset><material name="ghost" rgba="0 0 0 0"/></asset>
  <default><geom contype="0" conaffinity="0"/></default>
  <worldbody>
    <geom name="floor" type="plane" size="3 3 0.1"/>
    <geom name="wall" type="box" size="0.1 2 1" pos="2 0 1"/>
    <geom name="glass" type="box" size="0.1 2 1" pos="1.5 0 1" rgba="1 1 1 0"/>
    <geom name="veil" type="box" size="2 0.1 1" pos="0 1.2 1" material="ghost"/>
    <geom name="post" type="cylinder" size="0.2 1" pos="-1.5 0.5 1"/>
    <geom name="pill" type="capsule" size="0.15 0.5" pos="0 -1.5 0.7" euler="0 90 0"/>
    <geom name="egg" type="ellipsoid" size="0.3 0.2 0.4" pos="-1 -1 1"/>
    <body name="arm" pos="0 0 1">
      <joint name="spin" type="hinge" axis="0 0 1" damping="0.01"/>
      <geom name="hub" type="sphere" size="0.1"/>
      <site name="fwd" pos="0.1 0 0" euler="0 90 0"/>
      <site name="down" pos="0.3 0 0" euler="0 170 0"/>
      <site name="side" pos="0 0.1 0" euler="-80 0 0"/>
      <site name="up" pos="0 0 0.05" euler="0 10 0"/>
      <site name="inward" pos="0.5 0 0" euler="0 -90 0"/>
    </body>
    <body name="ball" pos="0.5 0.5 1.5">
      <freejoint/>
      <geom name="ball" type="sphere" size="0.15" mass="1"/>
      <site name="ball_eye" pos="0 0 -0.15" euler="180 0 0"/>
    </body>
  </worldbody>
  <sensor>
    <rangefinder name="fwd" site="fwd"/>
    <rangefinder name="down" site="down" cutoff="0.8"/>
    <rangefinder name="side" site="side" data="dist point normal"/>
    <rangefinder name="up" site="up"/>
    <rangefinder name="inward" site="inward" data="dist dir origin depth"/>
    <rangefinder name="ball_eye" site="ball_eye"/>
    <jointpos joint="spin"/>
  </sensor>
</mujoco>
"""


def test_rangefinders_match_mujoco_over_a_trajectory() -> None:
    m = mujoco.MjModel.from_xml_string(RANGE)
    sys = bp.from_mjmodel(m)
    d = mujoco.MjData(m)
    qd0 = np.zeros(m.nv)
    qd0[0] = 4.0  # the arm turns ~2.3 rad over the steps
    qd0[1:4] = (0.3, -0.2, 0.0)  # the ball drifts and tumbles (it falls through the floor: no contacts)
    qd0[4:7] = (1.0, 2.0, 0.5)
    # the invisible geoms (alpha 0 in rgba or material) lie in the rays' way: shown, they change them
    for shown in ("glass", "veil"):
        m2 = mujoco.MjModel.from_xml_string(RANGE)
        if shown == "glass":
            m2.geom_rgba[mujoco.mj_name2id(m2, mujoco.mjtObj.mjOBJ_GEOM, shown), 3] = 1.0
        else:
            m2.mat_rgba[:, 3] = 1.0
        a, b = mujoco.MjData(m), mujoco.MjData(m2)
        a.qvel[:] = b.qvel[:] = qd0
        moved = False
        for _ in range(60):
            mujoco.mj_step(m, a)
            mujoco.mj_step(m2, b)
            moved |= not np.array_equal(a.sensordata, b.sensordata)
        assert moved, shown
    d.qvel[:] = qd0
    state = bp.init(sys, qd=jnp.asarray(qd0, jnp.float32))
    mujoco.mj_forward(m, d)
    np.testing.assert_allclose(np.asarray(state.sensordata), d.sensordata, rtol=1e-5, atol=1e-5)
    step = jax.jit(bp.step)
    ctrl = jnp.zeros(sys.nu, jnp.float32)
    seen = np.zeros((m.nsensordata, 2), bool)
    for _ in range(60):
        mujoco.mj_step(m, d)
        state = step(sys, state, ctrl)
        np.testing.assert_allclose(np.asarray(state.sensordata), d.sensordata, rtol=1e-4, atol=1e-4)
        seen[:, 0] |= d.sensordata == -1
        seen[:, 1] |= d.sensordata > 0
    # distances alone (sensors reporting only that): some rays find nothing, most hit something
    dist_only = [m.sensor_adr[i] for i in range(m.nsensor)
                 if m.sensor_type[i] == mujoco.mjtSensor.mjSENS_RANGEFINDER and m.sensor_intprm[i, 0] == 1]
    assert seen[dist_only, 0].any() and seen[dist_only, 1].sum() >= 3, seen[dist_only]
    # gradients of every rangefinder value with respect to the body and geom frames are finite,
    # misses included (the last state has both)
    t = int(mujoco.mjtSensor.mjSENS_RANGEFINDER)

    def total(xpos: jax.Array, geom_xpos: jax.Array) -> jax.Array:
        fwd = state.replace(x=state.x.replace(pos=xpos), geom_xpos=geom_xpos)
        return jnp.sum(sensor.position(sys, fwd)[t])

    grads = jax.grad(total, argnums=(0, 1))(state.x.pos, state.geom_xpos)
    assert all(np.all(np.isfinite(np.asarray(g))) for g in grads) and np.any(np.asarray(grads[1]) != 0)


def _quadruped_rangefinders() -> Any:
    """dm_control's quadruped (escape task's rangefinders, flat 40 m floor), sensors and geoms as its
    `make_model(floor_size=40, rangefinders=True)` gives them, tendons, equality, actuators and
    contacts removed.

    The XML is found without importing dm_control: its suite loads a renderer that binds PyOpenGL to
    EGL for the whole test process (brax_io.image's OSMesa default then fails in that worker).
    """
    found = importlib.util.find_spec("dm_control")
    assert found is not None and found.origin is not None, "dm_control (a test oracle) is not installed"
    spec = mujoco.MjSpec.from_file(os.path.join(os.path.dirname(found.origin), "suite", "quadruped.xml"))
    spec.geom("floor").size = [40, 40, 0.5]
    for name in ("wall_px", "wall_py", "wall_nx", "wall_ny", "terrain"):
        spec.delete(spec.geom(name))
    spec.delete(spec.body("ball"))
    spec.delete(spec.site("target"))
    others = [s for s in spec.sensors if s.type != mujoco.mjtSensor.mjSENS_RANGEFINDER]
    for element in [*spec.tendons, *spec.equalities, *spec.actuators, *others]:
        spec.delete(element)
    for geom in spec.geoms:
        geom.contype, geom.conaffinity = 0, 0
    return spec.compile()


def test_quadruped_rangefinders_match_mujoco() -> None:
    m = _quadruped_rangefinders()
    assert m.nsensor == 20
    sys = bp.from_mjmodel(m)
    d = mujoco.MjData(m)
    init = jax.jit(bp.init)
    rng = np.random.default_rng(0)
    for k in range(4):
        q = m.qpos0.copy()
        if k:
            q[:3] += rng.normal(size=3) * (0.3, 0.3, 0.1)  # the torso moved, turned and tilted
            q[3:7] = q[3:7] + rng.normal(size=4) * 0.3
            q[3:7] /= np.linalg.norm(q[3:7])
            q[7:] += rng.normal(size=m.nq - 7) * 0.3
        d.qpos[:] = q
        mujoco.mj_forward(m, d)
        state = init(sys, jnp.asarray(q, jnp.float32))
        assert k or np.all(d.sensordata > 0), "at the initial pose every ray meets the floor"
        # rays that graze the floor tens of metres away lose a few float32 digits
        np.testing.assert_allclose(np.asarray(state.sensordata), d.sensordata, rtol=5e-5, atol=1e-5)
