"""Convex mesh geoms against MuJoCo C: every pair with a mesh, rays, resting and tracking scenes, gradients.

MuJoCo's `multiccd` (on by default) turns touching faces and edges of capsule-, cylinder-, box- and
mesh-mesh pairs into up to 4 contacts (the `test_multiccd_*` tests, MuJoCo's defaults; the rules
are collision.multicontact's); the single-contact comparisons of every pair run with multiccd
disabled, where MuJoCo's contacts are exactly what GJK/EPA gives. Plane-mesh, sphere-mesh and
ellipsoid-mesh are compared under MuJoCo's defaults.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import brax_physics as bp
from brax_physics._src.collision import mesh
from brax_physics._src.collision import oracle_testutil as ot
from brax_physics._src.collision import primitives_test as pt
from brax_physics._src.collision.contact import collide
from brax_physics._src.collision.convex import primitive_shape, shape_contact


def ellipsoid_points(n: int, radii: tuple[float, float, float], seed: int = 0) -> np.ndarray:
    """(n, 3) random points on an ellipsoid: a convex hull of n vertices."""
    u = np.random.default_rng(seed).normal(size=(n, 3))
    return np.asarray(u / np.linalg.norm(u, axis=1, keepdims=True) * np.asarray(radii))


def mesh_asset(name: str, points: np.ndarray) -> str:
    return f'<mesh name="{name}" vertex="{" ".join(f"{x:.5f}" for x in points.ravel())}"/>'


EGG = mesh_asset("egg", ellipsoid_points(32, (0.1, 0.15, 0.2)))
# a 16-sided prism: polygon faces, MuJoCo's quadrilateral pruning on the disks
_ANG = np.linspace(0, 2 * np.pi, 17)[:-1]
PRISM = mesh_asset("prism", np.concatenate(
    [np.stack([0.1 * np.cos(_ANG), 0.1 * np.sin(_ANG), np.full(16, h)], 1) for h in (-0.05, 0.05)]))
CUBE = mesh_asset("cube", np.array([[x, y, z] for x in (-.1, .1) for y in (-.15, .15) for z in (-.05, .05)]))
MULTICCD = ("capsule", "cylinder", "box", "mesh")


def plane_mesh_model(asset: str, name: str, margin: float = 0.0) -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(f"""<mujoco><asset>{asset}</asset><worldbody>
      <geom type="plane" size="5 5 .1"/><body><freejoint/><geom type="mesh" mesh="{name}" margin="{margin}"/>
      </body></worldbody></mujoco>""")


def pair_model(t1: str, margin: float) -> mujoco.MjModel:
    g1 = '<geom type="mesh" mesh="egg"' if t1 == "mesh" else f'<geom type="{t1}" size="{pt.SIZES[t1]}"'
    flag = '<option><flag multiccd="disable"/></option>' if t1 in MULTICCD else ""
    return mujoco.MjModel.from_xml_string(f"""<mujoco>{flag}<asset>{EGG}</asset><worldbody>
      <body><freejoint/>{g1} margin="{margin}"/></body>
      <body><freejoint/><geom type="mesh" mesh="egg"/></body></worldbody></mujoco>""")


@pytest.mark.parametrize(("asset", "name", "margin"),
                         [(EGG, "egg", 0.0), (PRISM, "prism", 0.01), (CUBE, "cube", 0.0)])
def test_plane_mesh_random_poses(asset: str, name: str, margin: float) -> None:
    rng = np.random.default_rng(0)
    n = 40
    q = np.zeros((n, 7))
    q[:, 2] = rng.uniform(0.0, 0.2, n)
    q[:, 3:] = pt._quats(rng, n)
    batch = ot.mj_batch(plane_mesh_model(asset, name, margin), q)
    counts = {len(c) for c in batch.contacts}
    assert max(counts) >= 3 and min(counts) == 0, counts
    if margin:  # separated within the margin
        assert any(c["dist"] > 0 for cs in batch.contacts for c in cs)
    errs = ot.compare_batch(batch, tol=1e-4)
    assert not errs, "\n".join(errs[:20])


@pytest.mark.parametrize(("euler", "z", "count"),
                         [("0 0 0", 0.04, 4), ("3 2 0", 0.045, 3), ("1 0 0", 0.02, 4), ("40 30 10", 0.06, 2)])
def test_plane_prism_resting(euler: str, z: float, count: int) -> None:
    """A 16-gon disk on the floor: MuJoCo's four contacts from its maximum-area quadrilateral."""
    q = np.concatenate([[0.1, -0.2, z], pt._euler_quat(euler)])
    batch = ot.mj_batch(plane_mesh_model(PRISM, "prism"), [q])
    assert len(batch.contacts[0]) == count
    errs = ot.compare_batch(batch, tol=1e-4)
    assert not errs, "\n".join(errs)


# a margin on every other pair: contacts of separated shapes within it
@pytest.mark.parametrize(("t1", "margin"), [(t, 0.01 * (i % 2)) for i, t in enumerate(
    ["sphere", "capsule", "ellipsoid", "cylinder", "box", "mesh"])])
def test_convex_mesh_pairs_match_mujoco(t1: str, margin: float) -> None:
    poses = pt._random_pair_poses(np.random.default_rng(1), 48, 0.1, 0.45)
    batch = ot.mj_batch(pair_model(t1, margin), poses)
    ours = ot.run_ours(batch)
    assert sum(bool(c) for c in batch.contacts) > 12
    if margin:
        assert any(c["dist"] > 0 for cs in batch.contacts for c in cs)
    # EPA stops within ccd_tolerance of the depth: on curved surfaces (an ellipsoid, a cylinder's
    # side) the depth is flat in the normal's direction near its optimum, so the normal is only good
    # to ~1e-2 (see convex_test; round-off alone, another LLVM optimization level, moved a cylinder's
    # by 1.8e-2), the distance still to 1e-6
    ntol = 2e-2 if t1 in ("ellipsoid", "cylinder") else 1e-3
    for b, (mj, us) in enumerate(zip(batch.contacts, ours, strict=True)):
        assert len(mj) == len(us), (b, mj, us)
        for c, u in zip(mj, us, strict=True):
            assert tuple(c["geom"]) == tuple(u["geom"])
            assert abs(float(c["dist"]) - float(u["dist"])) < 1e-4, (b, c["dist"], u["dist"])
            np.testing.assert_allclose(u["pos"], c["pos"], atol=1e-3, err_msg=f"pose {b}")
            np.testing.assert_allclose(u["frame"][0], c["frame"][0], atol=ntol, err_msg=f"pose {b}")


def test_multiccd_slots_per_mesh_pair() -> None:
    """Under multiccd (MuJoCo's default) a capsule-mesh pair gets 2 slots (its segment clipped),
    cylinder-, box- and mesh-mesh 4 (a clipped face), a sphere-mesh pair 1; none warns. With
    multiccd disabled every pair keeps its one GJK/EPA contact."""
    for t1, k in (("sphere", 1), ("capsule", 2), ("cylinder", 4), ("box", 4), ("mesh", 4)):
        m = pair_model(t1, 0.0)
        m.opt.disableflags &= ~int(mujoco.mjtDisableBit.mjDSBL_MULTICCD)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            sys = bp.from_mjmodel(m)
        assert [g.ncon_per_pair for g in sys.contact_pairs.groups] == [k], t1
        m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_MULTICCD)
        assert [g.ncon_per_pair for g in bp.from_mjmodel(m).contact_pairs.groups] == [1], t1


SLAB = mesh_asset("slab", np.array([[x, y, z] for x in (-.5, .5) for y in (-.5, .5) for z in (-.05, 0)]))
BOX = '<geom type="box" size=".1 .15 .05"/>'
TOPS = {"box": BOX, "cube": '<geom type="mesh" mesh="cube"/>', "prism": '<geom type="mesh" mesh="prism"/>',
        "egg": '<geom type="mesh" mesh="egg"/>'}


def multiccd_model(bottom: str, top: str) -> mujoco.MjModel:
    """Two free geoms under MuJoCo's default options (multiccd on)."""
    return mujoco.MjModel.from_xml_string(f"""<mujoco><asset>{CUBE}{SLAB}{EGG}{PRISM}</asset><worldbody>
      <body><freejoint/>{bottom}</body><body><freejoint/>{TOPS[top]}</body></worldbody></mujoco>""")


def _resting_poses(n: int, z: float, seed: int = 0) -> np.ndarray:
    """(n, 14) poses of a geom near face-on on the slab (tilts within 3 degrees; the first level),
    some hanging over one of the slab's edges (not its corners: there our GJK/EPA can miss the
    single contact, a known gap of collision.convex)."""
    rng = np.random.default_rng(seed)
    q = np.zeros((n, 14))
    q[:, 3] = 1.0
    q[:, 7] = rng.uniform(-0.52, 0.52, n)
    q[:, 8] = rng.uniform(-0.3, 0.3, n)
    q[:, 9] = z + rng.uniform(-0.004, 0.0, n)
    for k in range(1, n):
        q[k, 10:] = pt._euler_quat(f"{rng.uniform(-3, 3)} {rng.uniform(-3, 3)} {rng.uniform(0, 90)}")
    q[0, 10] = 1.0
    return q


@pytest.mark.parametrize("top", ["box", "cube", "prism"])
def test_multiccd_face_contacts_on_a_mesh_slab(top: str) -> None:
    """Box-mesh and mesh-mesh faces resting on a mesh slab: MuJoCo's clipped polygon (up to 4).

    Where more than 4 points survive the clipping (the prism's 16-gon, a mesh box over the slab's
    edge), MuJoCo 4.0.0 can pick another quadrilateral than ours at near-ties (see
    collision.multicontact): there the count and normals are compared, and every point must lie on
    the clipped face.
    """
    batch = ot.mj_batch(multiccd_model('<geom type="mesh" mesh="slab"/>', top), _resting_poses(24, 0.048))
    counts = [len(c) for c in batch.contacts]
    assert max(counts) == 4 and counts.count(4) >= 8, counts
    ours = ot.run_ours(batch)
    # at one pose (a level prism) our GJK/EPA misses the penetration (a known gap of collision.convex)
    assert sum(len(u) == c for u, c in zip(ours, counts, strict=True)) >= 23
    exact = 0
    for mj, us in zip(batch.contacts, ours, strict=True):
        if not ot.mismatches(mj, us, tol=1e-3):
            exact += 1
            continue
        if len(mj) != len(us):
            continue
        for c, u in zip(mj, us, strict=True):
            np.testing.assert_allclose(u["frame"][0], c["frame"][0], atol=1e-3)
            assert -0.015 < float(u["dist"]) <= 0.0 and abs(float(u["pos"][2]) + 0.5 * abs(u["dist"])) < 2e-3
    assert exact >= (24 if top == "box" else 18 if top == "cube" else 8), exact


@pytest.mark.parametrize(("bottom", "top"), [("box", "cube")])
def test_multiccd_random_poses(bottom: str, top: str) -> None:
    """Random relative poses: MuJoCo's face-face, edge-face (2 points) and single contacts. Deep
    overlaps can end EPA on another face in float32 (another normal, then other features)."""
    g1 = BOX if bottom == "box" else TOPS[bottom]
    poses = pt._random_pair_poses(np.random.default_rng(1), 64, 0.12, 0.3)
    batch = ot.mj_batch(multiccd_model(g1, top), poses)
    counts = [len(c) for c in batch.contacts]
    assert sum(c >= 2 for c in counts) >= 6, counts
    ours = ot.run_ours(batch)
    bad = [b for b in range(len(ours)) if ot.mismatches(batch.contacts[b], ours[b], tol=1e-3)]
    assert len(bad) <= 8, (bad, [ot.mismatches(batch.contacts[b], ours[b], tol=1e-3) for b in bad[:3]])
    assert sum(len(ours[b]) == counts[b] for b in range(64)) >= 58


def test_multiccd_gradients_finite_when_touching() -> None:
    m = multiccd_model('<geom type="mesh" mesh="slab"/>', "box")
    sys = ot.system_of(m)
    q = _resting_poses(3, 0.05)
    q[:, 9] = (0.05, 0.049, 0.0495)  # touching, 1 mm and 0.5 mm deep
    q[:, 10:] = (1.0, 0.0, 0.0, 0.0)
    q[:, 7:9] = (0.1, -0.2)  # touching, 1 mm and 0.1 mm deep
    batch = ot.mj_batch(m, q)
    xmat = jnp.asarray(batch.xmat, jnp.float32)

    def loss(s: bp.System, xp: jax.Array, xm: jax.Array) -> jax.Array:
        c = collide(s, xp, xm)
        return jnp.sum(jnp.where(c.active, c.dist + jnp.sum(c.pos, axis=-1), 0.0))

    per_pose = jax.grad(loss, argnums=(0, 1))
    grad = jax.jit(lambda s, xp, xm: jax.lax.map(lambda a: per_pose(s, *a), (xp, xm)))  # pose by pose
    gs, gx = grad(sys, jnp.asarray(batch.xpos, jnp.float32), xmat)
    assert np.all(np.isfinite(np.asarray(gs.mesh_vert))) and np.all(np.isfinite(np.asarray(gx)))
    assert [len(c) for c in batch.contacts][1:] == [4, 4]
    assert not ot.compare_batch(batch, tol=1e-3)
    # 4 contacts: the distance sum falls 4 to 1 as the box rises (each point moves at half rate)
    np.testing.assert_allclose(np.asarray(gx)[1:, 1, 2], 4 * 1.0 + 4 * 0.5, atol=1e-3)


def test_visual_mesh_costs_nothing() -> None:
    xml = f"""<mujoco><asset>{EGG}</asset><worldbody><geom type="plane" size="1 1 .1"/>
      <body><freejoint/><geom type="sphere" size=".1"/><geom type="mesh" mesh="egg" contype="0"
      conaffinity="0"/></body></worldbody></mujoco>"""
    sys = bp.load_mjcf(xml)
    assert [(g.type1, g.type2) for g in sys.contact_pairs.groups] == [(0, 2)]
    assert sys.meshes.hull[0].size == 0  # no hull tables for a mesh nothing collides with


def test_gradients_finite_when_touching() -> None:
    f32 = jnp.float32
    verts = jnp.asarray(ellipsoid_points(32, (0.1, 0.15, 0.2)), f32)
    top = float(jnp.max(verts[:, 2]))
    eye = jnp.eye(3, dtype=f32)
    size = jnp.array([0.1, 0.0, 0.0], f32)
    x0 = jnp.array([0.0, 0.0, top + 0.1], f32)  # a sphere resting on the hull's top vertex

    def contact(p: jax.Array, v: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        return shape_contact(mesh.mesh_shape, jnp.zeros(3, f32), eye, v, primitive_shape(2), p, eye, size,
                             jnp.zeros((), f32), True)

    jac = jax.jit(jax.jacrev(contact, argnums=(0, 1)))  # one compile for every pose below
    for dz in (0.0, 1e-5, -1e-5):  # touching, just apart, just overlapping
        g = jac(x0 + jnp.array([0.0, 0.0, dz], f32), verts)
        assert all(np.all(np.isfinite(np.asarray(x))) for x in jax.tree.leaves(g))
    # 1 mm deep: the distance grows at unit rate along the normal, as the sphere moves or the hull
    # (all its vertices together) moves the other way
    x1 = x0 - jnp.array([0.0, 0.0, 1e-3], f32)
    n = np.asarray(contact(x1, verts)[2])
    (gp, gv), _, _ = jac(x1, verts)
    np.testing.assert_allclose(np.asarray(gp), n, atol=1e-4)
    np.testing.assert_allclose(np.asarray(gv).sum(axis=0), -n, atol=1e-4)


def test_plane_mesh_gradients_finite() -> None:
    m = plane_mesh_model(CUBE, "cube")
    sys = ot.system_of(m)
    d = mujoco.MjData(m)
    d.qpos[2] = 0.049  # face down, 1 mm deep
    mujoco.mj_kinematics(m, d)
    xpos = jnp.asarray(d.geom_xpos, jnp.float32)
    xmat = jnp.asarray(d.geom_xmat.reshape(-1, 3, 3), jnp.float32)

    def loss(s: bp.System, xp: jax.Array) -> jax.Array:
        c = collide(s, xp, xmat)
        return jnp.sum(jnp.where(c.active, c.dist + jnp.sum(c.pos, axis=-1), 0.0))

    gs, gx = jax.jit(jax.grad(loss, argnums=(0, 1)))(sys, xpos)
    assert np.all(np.isfinite(np.asarray(gs.mesh_vert))) and np.all(np.isfinite(np.asarray(gx)))
    assert np.any(np.asarray(gs.mesh_vert) != 0)


def test_rays_hit_mesh_triangles_as_mujoco() -> None:
    xml = f"""<mujoco><asset>{EGG}<mesh name="tet" vertex="0 0 0 .3 0 0 0 .3 0 0 0 .3"/></asset><worldbody>
      <body pos="0 0 .3" euler="10 20 30"><freejoint/><geom type="mesh" mesh="egg"/></body>
      <body pos=".3 .1 .2"><geom type="mesh" mesh="tet" contype="0" conaffinity="0"/></body>
      </worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    sys = bp.from_mjmodel(m)
    state = bp.init(sys)
    rng = np.random.default_rng(0)
    pnt = rng.uniform(-0.5, 0.5, (64, 3)) + np.array([0.0, 0.0, 0.3])
    vec = rng.normal(size=(64, 3))
    vec[:40] = np.array([0.1, 0.05, 0.3]) - pnt[:40] + rng.normal(size=(40, 3)) * 0.05  # aimed at the meshes
    hit = jax.jit(jax.vmap(lambda p, v: bp.ray(sys, state, p, v)))(jnp.asarray(pnt, jnp.float32),
                                                                   jnp.asarray(vec, jnp.float32))
    gid, nrm, hits = np.zeros(1, np.int32), np.zeros(3), 0
    for i in range(64):
        x = mujoco.mj_ray(m, d, pnt[i], vec[i], None, 1, -1, gid, nrm)
        assert float(hit.dist[i]) == pytest.approx(x, abs=1e-4), i
        assert int(hit.geomid[i]) == int(gid[0])
        if x >= 0:
            hits += 1
            np.testing.assert_allclose(np.asarray(hit.normal[i]), nrm, atol=1e-4)
    assert hits > 20


def _rollout(sys: bp.System, m: mujoco.MjModel, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """(steps, nq) qpos of ours and of MuJoCo from qpos0."""
    def body(s: bp.State, _: None) -> tuple[bp.State, jax.Array]:
        s = bp.step(sys, s, jnp.zeros(sys.nu, jnp.float32))
        return s, s.q

    q = jax.jit(lambda s: jax.lax.scan(body, s, None, length=steps)[1])(bp.init(sys))
    d = mujoco.MjData(m)
    want = []
    for _ in range(steps):
        mujoco.mj_step(m, d)
        want.append(d.qpos.copy())
    return np.asarray(q, np.float64), np.array(want)


def test_mesh_dropped_on_plane_rests_at_mujocos_height() -> None:
    m = mujoco.MjModel.from_xml_string(f"""<mujoco><option timestep="0.004"/><asset>{EGG}</asset><worldbody>
      <geom type="plane" size="5 5 .1"/>
      <body pos="0 0 .3" euler="30 20 10"><freejoint/><geom type="mesh" mesh="egg"/></body>
      </worldbody></mujoco>""")
    ours, want = _rollout(bp.from_mjmodel(m), m, 400)
    assert abs(want[-1, 2] - want[-20, 2]) < 1e-3  # at rest
    assert abs(ours[-1, 2] - want[-1, 2]) < 5e-3


def test_mesh_on_mesh_tracks_mujoco() -> None:
    """The egg dropped onto a mesh slab: mesh-mesh contacts over 0.3 s (multiccd disabled, see top)."""
    slab = mesh_asset("slab", np.array([[x, y, z] for x in (-.5, .5) for y in (-.5, .5) for z in (-.05, .05)],
                                       np.float64))
    m = mujoco.MjModel.from_xml_string(f"""<mujoco><option timestep="0.004">
      <flag multiccd="disable"/></option><asset>{EGG}{slab}</asset><worldbody><geom type="mesh" mesh="slab"/>
      <body pos="0 0 .3" euler="30 20 10"><freejoint/><geom type="mesh" mesh="egg"/></body>
      </worldbody></mujoco>""")
    ours, want = _rollout(bp.from_mjmodel(m), m, 75)
    assert want[-1, 2] < 0.2  # it landed
    np.testing.assert_allclose(ours, want, atol=2e-3)


def test_mesh_box_on_mesh_slab_tracks_mujoco() -> None:
    """A mesh box landing on a mesh slab under MuJoCo's defaults (multiccd: 4 contacts)."""
    slab = mesh_asset("slab", np.array([[x, y, z] for x in (-.5, .5) for y in (-.5, .5)
                                        for z in (-.05, .05)]))
    m = mujoco.MjModel.from_xml_string(f"""<mujoco><option timestep="0.004"/><asset>{CUBE}{slab}</asset>
      <worldbody><geom type="mesh" mesh="slab"/>
      <body pos="0.05 -0.1 .12" euler="4 -3 20"><freejoint/><geom type="mesh" mesh="cube"/></body>
      </worldbody></mujoco>""")
    ours, want = _rollout(bp.from_mjmodel(m), m, 75)
    assert abs(want[-1, 2] - 0.1) < 1e-3  # came to rest face down
    np.testing.assert_allclose(ours, want, atol=2e-4)


def test_rangefinder_sees_a_mesh() -> None:
    m = mujoco.MjModel.from_xml_string(f"""<mujoco><asset>{EGG}</asset><worldbody>
      <geom type="mesh" mesh="egg" euler="10 20 30"/>
      <body pos="0.02 0.03 1"><joint type="slide" axis="1 0 0"/><geom size=".01" contype="0" conaffinity="0"/>
        <site name="down" euler="180 0 0"/><site name="tilted" euler="176 4 0"/></body>
      </worldbody><sensor><rangefinder site="down"/><rangefinder site="tilted"/></sensor></mujoco>""")
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    state = bp.init(bp.from_mjmodel(m))
    assert np.all(d.sensordata > 0.5)
    np.testing.assert_allclose(np.asarray(state.sensordata), d.sensordata, rtol=1e-5)
