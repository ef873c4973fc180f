"""Height fields (`hfield.py`) vs MuJoCo C: contacts with each convex geom type, rays, rangefinders,
and a sphere and a box coming to rest on a bumpy terrain."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import brax_physics as bp
from brax_physics._src import ray
from brax_physics._src.collision import oracle_testutil as ot
from brax_physics._src.collision.contact import collide
from brax_physics._src.lowering import settings

# A bumpy 8 x 8 terrain (elevations in [0, 1], MuJoCo keeps them as given), turned and shifted so
# that its frame is not the world's.
_ELEV = " ".join(f"{v:.3f}" for v in np.random.default_rng(7).uniform(0, 1, 64))
TERRAIN = (f'<asset><hfield name="terrain" nrow="8" ncol="8" size="0.7 0.7 0.3 0.1" elevation="{_ELEV}"/>'
           "</asset>")
HFIELD_GEOM = '<geom name="terrain" type="hfield" hfield="terrain" pos="0.05 0 0" euler="0 0 10"'
SIZES = {"sphere": "0.15", "capsule": "0.1 0.15", "ellipsoid": "0.15 0.1 0.12", "cylinder": "0.12 0.1",
         "box": "0.12 0.1 0.08"}
# Separated within a margin on some types; MuJoCo then reports every prism within it.
NORMAL_TOL = {"ellipsoid": 2e-2, "cylinder": 2e-2}
MISSED_POSES = {"cylinder": 2}  # poses of 12 where float32 GJK/EPA may miss one contact
CASES = [("sphere", 0.0), ("capsule", 0.01), ("ellipsoid", 0.01), ("cylinder", 0.0), ("box", 0.01),
         ("mesh", 0.01)]
# A convex rock: 20 points on an ellipsoid (its hull is what collides).
_ROCK_PTS = np.random.default_rng(5).normal(size=(20, 3))
_ROCK_PTS *= np.array([0.12, 0.11, 0.1]) / np.linalg.norm(_ROCK_PTS, axis=1, keepdims=True)
_ROCK = " ".join(f"{v:.4f}" for v in _ROCK_PTS.ravel())


def _pair_model(gtype: str, margin: float) -> mujoco.MjModel:
    geom = ('<geom type="mesh" mesh="rock"/>' if gtype == "mesh"
            else f'<geom type="{gtype}" size="{SIZES[gtype]}"/>')
    terrain = TERRAIN.replace("</asset>", f'<mesh name="rock" vertex="{_ROCK}"/></asset>')
    return mujoco.MjModel.from_xml_string(f"""<mujoco>{terrain}<worldbody>
      {HFIELD_GEOM} margin="{margin}"/>
      <body><freejoint/>{geom}</body></worldbody></mujoco>""")


def _surface(m: mujoco.MjModel, xy: np.ndarray) -> np.ndarray:
    """Terrain height under each point xy (n, 2), from MuJoCo's own ray."""
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    gid = np.zeros(1, np.int32)
    down = np.array([0.0, 0.0, -1.0])
    return np.array([2.0 - mujoco.mj_ray(m, d, np.array([x, y, 2.0]), down, None, 1, 1, gid) for x, y in xy])


def _poses(m: mujoco.MjModel, n: int, seed: int, heights: tuple[float, float] = (0.0, 1.1)) -> np.ndarray:
    """Free-body poses about the terrain: touching, penetrating, or just above it, any orientation
    (the geom's center `heights` times its bounding radius above the surface)."""
    rng = np.random.default_rng(seed)
    q = np.zeros((n, 7))
    q[:, :2] = rng.uniform(-0.55, 0.55, (n, 2))
    rb = float(m.geom_rbound[1])
    q[:, 2] = _surface(m, q[:, :2]) + rb * rng.uniform(*heights, n)
    quat = rng.normal(size=(n, 4))
    q[:, 3:] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
    return q


def _match(mj: list[dict[str, np.ndarray]], ours: list[dict[str, np.ndarray]]) -> list[tuple[Any, Any]]:
    """Pairs (MuJoCo's, ours) matched greedily by position (the two lists hold the same count)."""
    left = list(range(len(ours)))
    out = []
    for c in mj:
        j = min(left, key=lambda j: float(np.linalg.norm(ours[j]["pos"] - c["pos"])))
        left.remove(j)
        out.append((c, ours[j]))
    return out


@functools.cache
def _contacts(gtype: str, margin: float) -> tuple[Any, list[list[dict[str, np.ndarray]]]]:
    m = _pair_model(gtype, margin)
    batch = ot.mj_batch(m, _poses(m, 12, seed=len(gtype)))
    return batch, ot.run_ours(batch)


@pytest.mark.parametrize(("gtype", "margin"), CASES)
def test_contacts_match_mujoco(gtype: str, margin: float) -> None:
    batch, ours = _contacts(gtype, margin)
    counts = [len(c) for c in batch.contacts]
    assert sum(c > 0 for c in counts) >= 8, counts
    assert max(counts) > 2, "a geom on the terrain meets several prisms"
    # Ours may miss a contact where float32 GJK/EPA gives up on a prism MuJoCo's float64 one resolves
    # (cylinder poses: one on some CPU models, two on an Ice Lake host, whose XLA code rounds
    # differently); never more than that per case, and never an extra one.
    ours_counts = [len(c) for c in ours]
    assert all(a <= b for a, b in zip(ours_counts, counts, strict=True)), (ours_counts, counts)
    missed = sum(a != b for a, b in zip(ours_counts, counts, strict=True))
    assert missed <= MISSED_POSES.get(gtype, 1), (ours_counts, counts)
    if margin:
        assert any(c["dist"] > 0 for cs in batch.contacts for c in cs), "no contact within the margin"
    same = [(mj, us) for mj, us in zip(batch.contacts, ours, strict=True) if len(mj) == len(us)]
    pairs = [p for mj, us in same for p in _match(mj, us)]
    ddist = np.array([abs(float(a["dist"]) - float(b["dist"])) for a, b in pairs])
    dpos = np.array([np.max(np.abs(a["pos"] - b["pos"])) for a, b in pairs])
    dnrm = np.array([np.max(np.abs(a["frame"][0] - b["frame"][0])) for a, b in pairs])
    assert ddist.max() < 1e-3 and dpos.max() < 1e-3, (ddist.max(), dpos.max())
    # EPA's stopping rule leaves the normals on curved faces accurate to ~1e-3..1e-2 (see convex_test)
    assert dnrm.max() < NORMAL_TOL.get(gtype, 1e-3), (np.mean(dnrm < 1e-3), dnrm.max())


def test_sphere_centers_under_the_surface_match_mujoco() -> None:
    """Spheres (collided in closed form, not searched) sunk to their centers and below: where the
    center is inside a prism, MuJoCo's EPA depth along the nearest face, else the center's distance."""
    m = _pair_model("sphere", 0.0)
    batch = ot.mj_batch(m, _poses(m, 16, seed=3, heights=(-0.9, 0.3)))
    ours = ot.run_ours(batch)
    counts = [len(c) for c in batch.contacts]
    assert [len(c) for c in ours] == counts
    r = float(SIZES["sphere"])
    assert sum(float(c["dist"]) < -r for cs in batch.contacts for c in cs) >= 8, "few centers inside a prism"
    pairs = [p for mj, us in zip(batch.contacts, ours, strict=True) for p in _match(mj, us)]
    ddist = max(abs(float(a["dist"]) - float(b["dist"])) for a, b in pairs)
    dpos = max(float(np.max(np.abs(a["pos"] - b["pos"]))) for a, b in pairs)
    dnrm = max(float(np.max(np.abs(a["frame"][0] - b["frame"][0]))) for a, b in pairs)
    # MuJoCo's EPA stops within its tolerance of the depth; its point on a round shape, less closely
    assert ddist < 1e-5 and dpos < 1e-3 and dnrm < 1e-4, (ddist, dpos, dnrm)
    # and no search loop runs for them
    sys = ot.system_of(m)
    jaxpr = jax.make_jaxpr(collide)(sys, jnp.asarray(batch.xpos[0], jnp.float32),
                                    jnp.asarray(batch.xmat[0], jnp.float32))
    assert "while" not in str(jaxpr), "a sphere on a height field ran the GJK/EPA search"


def test_spheres_are_searched_under_a_looser_ccd_budget() -> None:
    """Below MuJoCo's default `ccd_iterations` the closed form would ignore the cap: the search runs."""
    m = _pair_model("sphere", 0.0)
    m.opt.ccd_iterations = 4
    sys = ot.system_of(m)
    d = mujoco.MjData(m)
    mujoco.mj_kinematics(m, d)
    jaxpr = jax.make_jaxpr(collide)(sys, jnp.asarray(d.geom_xpos, jnp.float32),
                                    jnp.asarray(d.geom_xmat.reshape(-1, 3, 3), jnp.float32))
    assert "while" in str(jaxpr)


def test_prisms_searched_one_per_round_give_the_same_contacts() -> None:
    """The masked search over (pair, prism) lanes, one lane per round (as many rounds as the pose
    with the most visited prisms, several per pose), gives the contacts of the default rounds."""
    batch, ours = _contacts("box", 0.01)
    sys = ot.system_of(batch.m)
    sys = sys.replace(lowering=sys.lowering.replace(search_chunk=1))
    one_per_round = jax.jit(jax.vmap(_collide, in_axes=(None, 0, 0)))(
        sys, jnp.asarray(batch.xpos, jnp.float32), jnp.asarray(batch.xmat, jnp.float32))
    assert max(len(c) for c in ours) > 2
    for b, cs in enumerate(ours):
        act = np.asarray(one_per_round.active[b])
        assert int(act.sum()) == len(cs), (b, int(act.sum()), len(cs))
        dist = np.asarray(one_per_round.dist[b])[act]
        pos = np.asarray(one_per_round.pos[b])[act]
        np.testing.assert_allclose(dist, np.reshape([float(c["dist"]) for c in cs], (-1,)), atol=1e-6)
        np.testing.assert_allclose(pos, np.reshape([c["pos"] for c in cs], (-1, 3)), atol=1e-6)


def _collide(sys: bp.System, xpos: jax.Array, xmat: jax.Array) -> Any:
    """`collide` under the system's lowering settings (as the pipeline's entry points run it)."""
    with settings.use(sys.lowering):
        return collide(sys, xpos, xmat)


def test_gradients_are_finite_when_touching() -> None:
    batch, ours = _contacts("box", 0.01)
    sys = ot.system_of(batch.m)
    b = next(i for i, c in enumerate(ours) if len(c) > 1)
    xpos = jnp.asarray(batch.xpos[b], jnp.float32)
    xmat = jnp.asarray(batch.xmat[b], jnp.float32)

    def depth(s: bp.System, xpos: jax.Array) -> jax.Array:
        c = collide(s, xpos, xmat)
        return jnp.sum(jnp.where(c.active, c.dist, 0.0))

    gs, gx = jax.jit(jax.grad(depth, argnums=(0, 1)))(sys, xpos)
    for g in (gs.hfield_data, gs.hfield_size, gs.geom_size, gx):
        assert np.all(np.isfinite(np.asarray(g)))
    assert np.any(np.asarray(gs.hfield_data) != 0) and np.any(np.asarray(gx[1]) != 0)


def test_rays_match_mj_ray() -> None:
    # the terrain tilted, so no ray runs along its grid
    m = mujoco.MjModel.from_xml_string(f'<mujoco>{TERRAIN}<worldbody><geom type="hfield" hfield="terrain" '
                                       'pos="0.05 0 0.1" euler="5 0 10"/></worldbody></mujoco>')
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    rng = np.random.default_rng(0)
    n = 300
    pnt = np.c_[rng.uniform(-1, 1, (n, 2)), rng.uniform(-0.3, 0.8, n)]
    vec = rng.normal(size=(n, 3))
    vec[:100, 2] = -3 * np.abs(vec[:100, 2])  # mostly down onto the surface
    vec[:20, :2] = 0  # straight down
    side = slice(150, 250)  # from beside the terrain through its sides
    pnt[side, 0] = rng.choice([-1.0, 1.0], 100)
    pnt[side, 2] = rng.uniform(0, 0.45, 100)
    vec[side] = np.c_[-pnt[side, 0], rng.normal(0, 0.3, 100), rng.normal(0, 0.1, 100)]
    gid = np.zeros(1, np.int32)
    want, want_n = np.zeros(n), np.zeros((n, 3))
    for i in range(n):
        want[i] = mujoco.mj_ray(m, d, pnt[i], vec[i], None, 1, -1, gid, want_n[i])
    hit = ray.cast(bp.from_mjmodel(m), jnp.asarray(d.geom_xpos, jnp.float32),
                   jnp.asarray(d.geom_xmat.reshape(-1, 3, 3), jnp.float32), jnp.asarray(pnt, jnp.float32),
                   jnp.asarray(vec, jnp.float32), np.ones((n, 1), bool))
    assert 0.25 < np.mean(want >= 0) < 0.75
    np.testing.assert_allclose(np.asarray(hit.dist), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(hit.normal), want_n, atol=1e-4)


# A sphere and a box dropped onto the terrain (damped, so they settle within the 1.5 s), rangefinders
# looking at it from a static rig (a rangefinder never sees its own body, here the world's) and from
# the box. The box has a margin: without one, box-prism is a polytope pair whose float32 EPA here can
# settle on a deeper face than MuJoCo's (seen as too-deep contacts when the box lands across a cell).
DROP = f"""<mujoco><option timestep="0.01"/>{TERRAIN}<worldbody>
  {HFIELD_GEOM}/>
  <body name="rig">
    <site name="fixed0" pos="-0.3 -0.4 0.8" euler="180 0 0"/>
    <site name="fixed1" pos="0.35 0.2 0.8" euler="160 15 0"/>
    <site name="fixed2" pos="0.8 0 0.05" euler="0 -90 0"/>
  </body>
  <body name="ball" pos="-0.3 0.25 0.6"><joint type="free" damping="0.1"/>
    <geom type="sphere" size="0.1"/></body>
  <body name="box" pos="0.25 -0.2 0.6" euler="10 20 30"><joint type="free" damping="0.1"/>
    <geom type="box" size="0.1 0.08 0.06" margin="0.001"/>
    <site name="onbox" pos="0 0 -0.07" euler="180 0 0"/></body>
</worldbody><sensor>
  <rangefinder site="fixed0"/><rangefinder site="fixed1"/><rangefinder site="fixed2"/>
  <rangefinder site="onbox"/>
</sensor></mujoco>"""
DROP_STEPS = 150


@functools.cache
def _drop() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    m = mujoco.MjModel.from_xml_string(DROP)
    d = mujoco.MjData(m)
    qs, ss = [], []
    for _ in range(DROP_STEPS):
        mujoco.mj_step(m, d)
        qs.append(d.qpos.copy())
        ss.append(d.sensordata.copy())
    sys = bp.load_mjcf(DROP)

    @jax.jit
    def rollout(s: bp.State) -> tuple[jax.Array, jax.Array]:
        def body(s: bp.State, _: None) -> tuple[bp.State, tuple[jax.Array, jax.Array]]:
            s = bp.step(sys, s, jnp.zeros(0, jnp.float32))
            return s, (s.q, s.sensordata)

        return jax.lax.scan(body, s, None, length=DROP_STEPS)[1]

    q, s = rollout(bp.init(sys))
    return np.array(qs), np.array(ss), np.asarray(q, np.float64), np.asarray(s, np.float64)


def test_sphere_and_box_rest_on_the_terrain_like_mujoco() -> None:
    want_q, _, q, _ = _drop()
    assert np.all(np.isfinite(q))
    for adr in (2, 9):  # the ball's and the box's height
        assert np.ptp(want_q[-20:, adr]) < 5e-3, "MuJoCo's bodies came (nearly) to rest"
        assert want_q[-1, adr] < 0.5, "they fell onto the terrain"
        assert abs(q[-1, adr] - want_q[-1, adr]) < 5e-3, (adr, q[-1, adr], want_q[-1, adr])


def test_rangefinders_over_the_terrain_match_mujoco() -> None:
    _, want_s, _, s = _drop()
    assert np.all(want_s[0] > 0), "every rangefinder sees the terrain"
    # the fixed sites see the same terrain at every step; the box's follows its (slightly different) fall
    np.testing.assert_allclose(s[:, :3], want_s[:, :3], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(s[:, 3], want_s[:, 3], atol=5e-3)


def test_planes_and_height_fields_never_collide() -> None:
    # MuJoCo has no plane-hfield or hfield-hfield collider: such candidate pairs are not tested
    xml = f"""<mujoco>{TERRAIN}<worldbody><geom type="plane" size="1 1 0.1"/>{HFIELD_GEOM}/>
      <body><freejoint/><inertial pos="0 0 0" mass="1" diaginertia="0.1 0.1 0.1"/>
        <geom type="hfield" hfield="terrain"/></body></worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    assert d.ncon == 0
    assert bp.load_mjcf(xml).contact_pairs.ncon == 0
