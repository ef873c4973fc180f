"""The locomotion robot assets, checked with MuJoCo C: names, published limits, home pose, sensors."""

from __future__ import annotations

import dataclasses
import functools
import pathlib

import brax_physics
import mujoco
import numpy as np
import pytest

from brax_envs import locomotion

ASSETS = pathlib.Path(__file__).parent / "assets"

Limits = dict[str, tuple[tuple[float, float], float]]  # joint: ((lo, hi) rad, torque limit Nm)
Chain = tuple[tuple[str, tuple[float, float] | None, float], ...]  # part, range (None: _ROLL), torque

_QUAD_LIMITS = {
    "hip": ((-0.863, 0.863), 23.7), "thigh": ((-0.686, 4.501), 23.7), "calf": ((-2.818, -0.888), 35.55),
}
_LEG = (
    ("hip_pitch", (-2.5307, 2.8798), 88.0),
    ("hip_roll", None, 88.0),
    ("hip_yaw", (-2.7576, 2.7576), 88.0),
    ("knee", (-0.087267, 2.8798), 139.0),
    ("ankle_pitch", (-0.87267, 0.5236), 35.0),
    ("ankle_roll", (-0.2618, 0.2618), 35.0),
)
_ARM = (
    ("shoulder_pitch", (-3.0892, 2.6704), 25.0),
    ("shoulder_roll", None, 25.0),
    ("shoulder_yaw", (-2.618, 2.618), 25.0),
    ("elbow", (-1.0472, 2.0944), 25.0),
    ("wrist_roll", (-1.972222, 1.972222), 25.0),
)
# Roll joints: the left range, mirrored for the right side.
_ROLL = {"hip_roll": (-0.5236, 2.9671), "shoulder_roll": (-1.5882, 2.2515)}


def _side(side: str, chain: Chain) -> Limits:
    """Published (range, torque limit) per joint of one side of a limb chain."""
    out = {}
    for part, rng, torque in chain:
        if rng is None:
            lo, hi = _ROLL[part]
            rng = (lo, hi) if side == "left" else (-hi, -lo)
        out[f"{side}_{part}"] = (rng, torque)
    return out


@dataclasses.dataclass(frozen=True)
class Robot:
    """What a robot's files must provide: actuated joints in actuator order with published limits."""

    name: str
    limits: Limits
    feet: tuple[str, ...]  # foot geoms; each has a site `<foot>_site`
    touch: tuple[str, ...]  # touch sensors, one per foot
    base: str  # the free body carrying the IMU site
    mass: tuple[float, float]  # published total mass, kg, as a range


ROBOTS = {
    "quadruped": Robot(
        name="quadruped",
        limits={f"{leg}_{part}": _QUAD_LIMITS[part]
                for leg in ("FR", "FL", "RR", "RL") for part in ("hip", "thigh", "calf")},
        feet=("FR_foot", "FL_foot", "RR_foot", "RL_foot"),
        touch=("FR_touch", "FL_touch", "RR_touch", "RL_touch"),
        base="trunk",
        mass=(11.5, 12.5),  # Go1: about 12 kg
    ),
    "humanoid": Robot(
        name="humanoid",
        limits={
            **_side("left", _LEG), **_side("right", _LEG),
            "waist_yaw": ((-2.618, 2.618), 88.0),
            **_side("left", _ARM), **_side("right", _ARM),
        },
        feet=("left_foot", "right_foot"),
        touch=("left_foot_touch", "right_foot_touch"),
        base="pelvis",
        mass=(33.0, 36.0),  # G1: about 35 kg
    ),
}
VARIANTS = ("", "_full_collision")
CASES = [(r, v) for r in ROBOTS for v in VARIANTS]
IDS = [f"{r}{v}" for r, v in CASES]


@functools.cache
def _model(robot: str, variant: str, scene: bool = True) -> mujoco.MjModel:
    """The compiled robot (with the flat floor when `scene`), shared read-only by the tests."""
    name = f"{robot}{variant}_scene_flat.xml" if scene else f"{robot}{variant}.xml"
    return mujoco.MjModel.from_xml_path(str(ASSETS / name))


def _name(m: mujoco.MjModel, obj: mujoco.mjtObj, i: int) -> str:
    """Name of object `i` of type `obj`."""
    return mujoco.mj_id2name(m, obj, i) or ""


def _home(m: mujoco.MjModel) -> mujoco.MjData:
    """Data at the `home` keyframe, with positions and contacts computed."""
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, m.key("home").id)
    mujoco.mj_forward(m, d)
    return d


def _lowest(m: mujoco.MjModel, d: mujoco.MjData, geom: str) -> float:
    """World height of the lowest point of a sphere or box geom."""
    g = m.geom(geom).id
    size = m.geom_size[g]
    if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_SPHERE:
        return float(d.geom_xpos[g][2] - size[0])
    assert m.geom_type[g] == mujoco.mjtGeom.mjGEOM_BOX
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) * size
    return float(np.min(d.geom_xpos[g][2] + corners @ d.geom_xmat[g].reshape(3, 3)[2]))


def _contact_names(m: mujoco.MjModel, d: mujoco.MjData) -> set[frozenset[str]]:
    """The geom-name pairs of the active contacts."""
    return {frozenset((m.geom(c.geom1).name, m.geom(c.geom2).name)) for c in d.contact[: d.ncon]}


def _sensor(m: mujoco.MjModel, d: mujoco.MjData, name: str) -> np.ndarray:
    """The current reading of sensor `name`."""
    s = m.sensor(name)
    return np.array(d.sensordata[s.adr[0] : s.adr[0] + s.dim[0]])


@dataclasses.dataclass(frozen=True)
class Stand:
    """Summary of 2 s of holding the home targets."""

    z0: float
    max_dz: float
    min_up: float
    accel: np.ndarray
    touch: np.ndarray
    contacts: frozenset[frozenset[str]]


@functools.cache
def _stand(robot: str, variant: str) -> Stand:
    """Hold ctrl = home ctrl for 2 s of MuJoCo C from `home`; record height, uprightness and sensors."""
    m = _model(robot, variant)
    d = _home(m)
    z0 = float(d.qpos[2])
    max_dz, min_up, seen = 0.0, 1.0, set()
    for _ in range(round(2.0 / m.opt.timestep)):
        mujoco.mj_step(m, d)
        max_dz = max(max_dz, abs(float(d.qpos[2]) - z0))
        min_up = min(min_up, float(_sensor(m, d, "upvector")[2]))
        seen |= _contact_names(m, d)
    touch = np.array([_sensor(m, d, t)[0] for t in ROBOTS[robot].touch])
    return Stand(z0, max_dz, min_up, _sensor(m, d, "accelerometer"), touch, frozenset(seen))


def test_asset_files() -> None:
    """The directory holds each robot, its collision variants, their flat and rough scenes, the README."""
    names = {p.name for p in ASSETS.iterdir()}
    expected = {"README.md"} | {
        f"{r}{suffix}.xml" for r in ROBOTS
        for suffix in ("_common", "", "_full_collision", "_scene_flat", "_full_collision_scene_flat",
                       "_scene_rough")
    }
    assert expected <= names


_LOADABLE = sorted(p.name for p in ASSETS.glob("*.xml") if not p.stem.endswith("_common"))


@pytest.mark.parametrize("path", _LOADABLE)
def test_every_model_compiles(path: str) -> None:
    """Every loadable XML here compiles with MuJoCo and has a `home` keyframe."""
    m = mujoco.MjModel.from_xml_path(str(ASSETS / path))
    assert m.nkey == 1 and m.key(0).name == "home"


@pytest.mark.parametrize(("robot", "variant"), CASES, ids=IDS)
@pytest.mark.parametrize("scene", [False, True])
def test_compiles_with_free_base(robot: str, variant: str, scene: bool) -> None:
    """Robot and scene files compile; the base has the only free joint, then one hinge per actuator."""
    m = _model(robot, variant, scene)
    r = ROBOTS[robot]
    assert m.njnt == len(r.limits) + 1
    assert m.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE
    assert _name(m, mujoco.mjtObj.mjOBJ_BODY, int(m.jnt_bodyid[0])) == r.base
    assert all(t == mujoco.mjtJoint.mjJNT_HINGE for t in m.jnt_type[1:])
    assert (m.nq, m.nv, m.nu) == (7 + len(r.limits), 6 + len(r.limits), len(r.limits))
    assert (m.ngeom > 0) and ("floor" in {m.geom(i).name for i in range(m.ngeom)}) == scene


def test_common_files_need_a_variant() -> None:
    """`*_common.xml` is included, never loaded: the collision class `link` comes from the variant."""
    for r in ROBOTS:
        with pytest.raises(ValueError, match="link"):
            mujoco.MjModel.from_xml_path(str(ASSETS / f"{r}_common.xml"))


@pytest.mark.parametrize(("robot", "variant"), CASES, ids=IDS)
def test_joints_and_servos(robot: str, variant: str) -> None:
    """Position servos, one per joint in the stated order, at the published ranges and torques."""
    m = _model(robot, variant)
    limits = ROBOTS[robot].limits
    assert [m.actuator(i).name for i in range(m.nu)] == list(limits)
    assert [m.joint(i).name for i in range(1, m.njnt)] == list(limits)
    for i, (joint, (rng, torque)) in enumerate(limits.items()):
        j = m.joint(joint).id
        assert m.actuator_trntype[i] == mujoco.mjtTrn.mjTRN_JOINT and m.actuator_trnid[i, 0] == j
        assert m.jnt_limited[j] and m.jnt_range[j] == pytest.approx(rng, abs=1e-9)
        assert m.actuator_ctrllimited[i] and m.actuator_ctrlrange[i] == pytest.approx(rng, abs=1e-9)
        assert m.actuator_forcelimited[i] and m.actuator_forcerange[i] == pytest.approx((-torque, torque))
        # MJCF <position>: gain kp, bias -kp q - kv qdot
        kp = m.actuator_gainprm[i, 0]
        assert m.actuator_gaintype[i] == mujoco.mjtGain.mjGAIN_FIXED and kp > 0
        assert m.actuator_biastype[i] == mujoco.mjtBias.mjBIAS_AFFINE
        assert m.actuator_biasprm[i, :3] == pytest.approx([0.0, -kp, m.actuator_biasprm[i, 2]])
        assert m.actuator_biasprm[i, 2] < 0


def test_quadruped_gains_and_joint_dynamics() -> None:
    """Go1-class servos: kp 35, kv 0.5 at hip and thigh, x1.5 at the knee; joint losses and armature."""
    m = _model("quadruped", "")
    kp, kv = m.actuator_gainprm[:, 0], -m.actuator_biasprm[:, 2]
    np.testing.assert_allclose(kp, [35.0, 35.0, 52.5] * 4)
    np.testing.assert_allclose(kv, [0.5, 0.5, 0.75] * 4)
    np.testing.assert_allclose(m.dof_armature[6:], 0.01)
    np.testing.assert_allclose(m.dof_damping[6:], 0.5)
    np.testing.assert_allclose(m.dof_frictionloss[6:], 0.2)


@pytest.mark.parametrize("robot", ROBOTS)
def test_options(robot: str) -> None:
    """0.004 s steps, 4 Newton iterations, 8 line-search steps, implicitfast, elliptic cones, impratio 1."""
    o = _model(robot, "").opt
    assert (o.timestep, o.iterations, o.ls_iterations, o.impratio) == (0.004, 4, 8, 1.0)
    assert o.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    assert o.cone == mujoco.mjtCone.mjCONE_ELLIPTIC
    assert o.solver == mujoco.mjtSolver.mjSOL_NEWTON


def test_quadruped_geometry() -> None:
    """Published Go1 offsets and lengths: hips at (+-0.1881, +-0.04675), thigh 0.08 lateral, 0.213 m links."""
    m = _model("quadruped", "")
    for leg, sx, sy in (("FR", 1, -1), ("FL", 1, 1), ("RR", -1, -1), ("RL", -1, 1)):
        np.testing.assert_allclose(m.body(f"{leg}_hip").pos, [sx * 0.1881, sy * 0.04675, 0.0])
        np.testing.assert_allclose(m.body(f"{leg}_thigh").pos, [0.0, sy * 0.08, 0.0])
        np.testing.assert_allclose(m.body(f"{leg}_calf").pos, [0.0, 0.0, -0.213])
        foot = m.geom(f"{leg}_foot")
        np.testing.assert_allclose(foot.pos, [0.0, 0.0, -0.213])
        assert foot.type == mujoco.mjtGeom.mjGEOM_SPHERE and foot.size[0] == pytest.approx(0.02)
        np.testing.assert_allclose([m.jnt_axis[m.joint(f"{leg}_{p}").id] for p in ("hip", "thigh", "calf")],
                                   [[1, 0, 0], [0, 1, 0], [0, 1, 0]])
    assert m.body("trunk").mass[0] == pytest.approx(5.204)


@pytest.mark.parametrize(("robot", "variant"), CASES, ids=IDS)
def test_total_mass(robot: str, variant: str) -> None:
    """The robot's mass is within the published total."""
    m = _model(robot, variant)
    lo, hi = ROBOTS[robot].mass
    assert lo < m.body_subtreemass[m.body(ROBOTS[robot].base).id] < hi


@pytest.mark.parametrize(("robot", "variant"), CASES, ids=IDS)
def test_home_feet_on_floor(robot: str, variant: str) -> None:
    """At `home` every sole is at z = 0 within 1 mm, nothing else touches, and ctrl = the joint angles."""
    m = _model(robot, variant)
    d = _home(m)
    key = m.key("home")
    np.testing.assert_array_equal(key.ctrl, key.qpos[7:])
    for foot in ROBOTS[robot].feet:
        assert abs(_lowest(m, d, foot)) < 1e-3, foot
    feet = set(ROBOTS[robot].feet)
    assert all("floor" in pair and pair - {"floor"} <= feet for pair in _contact_names(m, d))
    # the body starts level and at rest
    np.testing.assert_array_equal(key.qpos[3:7], [1.0, 0.0, 0.0, 0.0])
    assert not np.any(key.qvel)


@pytest.mark.parametrize(("robot", "variant"), CASES, ids=IDS)
def test_stands_on_home_targets(robot: str, variant: str) -> None:
    """Holding the home targets for 2 s keeps the base within 3 cm of its start height and upright."""
    s = _stand(robot, variant)
    assert s.max_dz < 0.03
    assert s.min_up > 0.95


@pytest.mark.parametrize(("robot", "variant"), CASES, ids=IDS)
def test_only_feet_touch_the_floor_while_standing(robot: str, variant: str) -> None:
    """While standing, every contact is a foot on the floor, and every foot makes one."""
    feet = ROBOTS[robot].feet
    assert _stand(robot, variant).contacts == {frozenset((f, "floor")) for f in feet}


@pytest.mark.parametrize(("robot", "variant"), CASES, ids=IDS)
def test_sensors_at_rest(robot: str, variant: str) -> None:
    """After settling, each foot's touch sensor carries weight and the accelerometer reads +g on z."""
    s = _stand(robot, variant)
    m = _model(robot, variant)
    weight = float(m.body_subtreemass[m.body(ROBOTS[robot].base).id]) * 9.81
    assert np.all(s.touch > 0.05 * weight)
    assert s.touch.sum() == pytest.approx(weight, rel=0.05)
    assert abs(s.accel[2] - 9.81) < 0.5
    assert np.all(np.abs(s.accel[:2]) < 0.5)


@pytest.mark.parametrize("robot", ROBOTS)
def test_sensor_set(robot: str) -> None:
    """IMU sensors on site `imu` of the base, touch sensors on foot sites that enclose the feet."""
    m = _model(robot, "")
    r = ROBOTS[robot]
    site, imu = mujoco.mjtObj.mjOBJ_SITE, m.site("imu")
    assert imu.bodyid[0] == m.body(r.base).id
    imu_sensors = {"gyro": 3, "accelerometer": 3, "local_linvel": 3, "orientation": 4, "upvector": 3}
    names = [m.sensor(i).name for i in range(m.nsensor)]
    assert names == [*imu_sensors, *r.touch]
    for name, dim in imu_sensors.items():
        s = m.sensor(name)
        assert s.dim[0] == dim and s.objtype[0] == site and s.objid[0] == imu.id
    types = [m.sensor(n).type[0] for n in imu_sensors]
    assert types == [mujoco.mjtSensor.mjSENS_GYRO, mujoco.mjtSensor.mjSENS_ACCELEROMETER,
                     mujoco.mjtSensor.mjSENS_VELOCIMETER, mujoco.mjtSensor.mjSENS_FRAMEQUAT,
                     mujoco.mjtSensor.mjSENS_FRAMEZAXIS]
    for foot, touch in zip(r.feet, r.touch, strict=True):
        s, g = m.sensor(touch), m.geom(foot)
        fsite = m.site(f"{foot}_site")
        assert s.type[0] == mujoco.mjtSensor.mjSENS_TOUCH and s.dim[0] == 1 and s.objid[0] == fsite.id
        # touch counts contacts inside the site volume: same body, same centre, larger in every direction
        assert fsite.bodyid[0] == g.bodyid[0] and fsite.type[0] == g.type[0]
        np.testing.assert_allclose(fsite.pos, g.pos)
        n = 1 if g.type[0] == mujoco.mjtGeom.mjGEOM_SPHERE else 3
        assert np.all(fsite.size[:n] > g.size[:n])


@pytest.mark.parametrize("robot", ROBOTS)
def test_collision_variants_differ_only_in_contype(robot: str) -> None:
    """The variants share bodies, joints, masses, servos and geoms; only link contype/conaffinity differ."""
    a, b = _model(robot, "", scene=False), _model(robot, "_full_collision", scene=False)
    for field in ("nbody", "njnt", "ngeom", "nsite", "nu", "nsensor", "nkey"):
        assert getattr(a, field) == getattr(b, field), field
    for field in ("body_pos", "body_quat", "body_mass", "body_inertia", "body_ipos", "body_parentid",
                  "jnt_type", "jnt_axis", "jnt_range", "dof_armature", "dof_damping", "dof_frictionloss",
                  "geom_type", "geom_size", "geom_pos", "geom_quat", "geom_bodyid", "geom_friction",
                  "geom_condim", "geom_priority", "site_pos", "site_size", "actuator_trnid",
                  "actuator_gainprm", "actuator_biasprm", "actuator_ctrlrange", "actuator_forcerange",
                  "sensor_type", "sensor_objid", "key_qpos", "key_ctrl", "exclude_signature"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
    for obj, n in ((mujoco.mjtObj.mjOBJ_BODY, a.nbody), (mujoco.mjtObj.mjOBJ_JOINT, a.njnt),
                   (mujoco.mjtObj.mjOBJ_GEOM, a.ngeom), (mujoco.mjtObj.mjOBJ_ACTUATOR, a.nu)):
        assert [_name(a, obj, i) for i in range(n)] == [_name(b, obj, i) for i in range(n)]
    feet = np.isin([a.geom(i).name for i in range(a.ngeom)], ROBOTS[robot].feet)
    assert feet.sum() == len(ROBOTS[robot].feet)
    for m, links in ((a, 0), (b, 1)):
        np.testing.assert_array_equal(m.geom_contype, np.where(feet, 1, links))
        np.testing.assert_array_equal(m.geom_conaffinity, np.where(feet, 1, links))


@pytest.mark.parametrize(("robot", "variant"), CASES, ids=IDS)
def test_brax_physics_loads_the_scene(robot: str, variant: str) -> None:
    """`brax_physics.load_mjcf` accepts each scene (builds a System; nothing is compiled)."""
    sys = brax_physics.load_mjcf(ASSETS / f"{robot}{variant}_scene_flat.xml")
    assert isinstance(sys, brax_physics.System)


ROUGH_TERRAIN = {"quadruped": locomotion.QUADRUPED_TERRAIN, "humanoid": locomotion.HUMANOID_TERRAIN}


@pytest.mark.parametrize("robot", ROBOTS)
def test_rough_scene_height_field(robot: str) -> None:
    """The rough scene's floor: one flat height field sized as the robot's `Terrain`, at the origin."""
    m = mujoco.MjModel.from_xml_path(str(ASSETS / f"{robot}_scene_rough.xml"))
    t = ROUGH_TERRAIN[robot]
    assert m.nhfield == 1 and (m.hfield_nrow[0], m.hfield_ncol[0]) == (t.size, t.size)
    np.testing.assert_allclose(m.hfield_size[0, :3], [t.half_extent, t.half_extent, t.max_height])
    assert m.hfield_size[0, 3] > 0 and not np.any(m.hfield_data)
    g = m.geom("terrain")
    assert g.type[0] == mujoco.mjtGeom.mjGEOM_HFIELD and g.bodyid[0] == 0 and g.dataid[0] == 0
    assert not np.any(g.pos) and np.array_equal(g.quat, [1.0, 0.0, 0.0, 0.0])
    assert (g.contype[0], g.conaffinity[0], g.condim[0]) == (1, 1, 3)
    assert "floor" not in {m.geom(i).name for i in range(m.ngeom)}


@pytest.mark.parametrize("robot", ROBOTS)
def test_rough_scene_holds_the_same_robot_standing_on_the_field(robot: str) -> None:
    """The flat scene's robot and keyframe; at `home` the soles rest on the field and nothing else touches."""
    m = mujoco.MjModel.from_xml_path(str(ASSETS / f"{robot}_scene_rough.xml"))
    flat = _model(robot, "")
    assert (m.nq, m.nv, m.nu, m.nbody) == (flat.nq, flat.nv, flat.nu, flat.nbody)
    np.testing.assert_array_equal(m.key_qpos, flat.key_qpos)
    np.testing.assert_array_equal(m.actuator_gainprm, flat.actuator_gainprm)
    d = _home(m)
    feet = ROBOTS[robot].feet
    for foot in feet:
        assert abs(_lowest(m, d, foot)) < 1e-3, foot
    assert all("terrain" in pair and pair - {"terrain"} <= set(feet) for pair in _contact_names(m, d))
    assert isinstance(brax_physics.load_mjcf(ASSETS / f"{robot}_scene_rough.xml"), brax_physics.System)
