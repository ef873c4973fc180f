"""multiccd (MuJoCo's default) against MuJoCo C 4.0.0: capsule, cylinder, box and mesh pairs whose
faces or edges touch, contact by contact; a resting scene; gradients.

Where more than 4 points survive the clipping, MuJoCo 4.0.0's quadrilateral can differ from ours
(`multicontact`'s docstring): the random resting poses assert the count and normal everywhere
and the full contact set on most poses.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import brax_physics as bp
from brax_physics._src.collision import oracle_testutil as ot
from brax_physics._src.collision import primitives_test as pt
from brax_physics._src.collision.contact import collide

SLAB = ('<mesh name="slab" vertex="-.2 -.2 -.05  .2 -.2 -.05  .2 .2 -.05  -.2 .2 -.05  -.2 -.2 .05  '
        '.2 -.2 .05  .2 .2 .05  -.2 .2 .05"/>')
BOX = '<geom type="box" size=".2 .2 .05"/>'
CYL = '<geom type="cylinder" size=".05 .1"/>'
CAP = '<geom type="capsule" size=".02 .06"/>'
MESH = '<geom type="mesh" mesh="slab"/>'
BAR = '<geom type="box" size=".08 .02 .02"/>'


def _quat(axis: tuple[float, float, float], deg: float) -> np.ndarray:
    a = np.asarray(axis, np.float64) / np.linalg.norm(axis)
    h = np.radians(deg) / 2
    return np.array([np.cos(h), *(np.sin(h) * a)])


def _mul(q1: np.ndarray, q2: np.ndarray) -> np.ndarray:
    out = np.zeros(4)
    mujoco.mju_mulQuat(out, q1, q2)
    return out


def _model(g1: str, g2: str, opt: str = "") -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(f"""<mujoco><option>{opt}</option><asset>{SLAB}</asset>
      <worldbody><body><freejoint/>{g1}</body><body><freejoint/>{g2}</body></worldbody></mujoco>""")


def _pose(pos: tuple[float, float, float], quat: np.ndarray) -> np.ndarray:
    return np.concatenate([[0, 0, 0, 1, 0, 0, 0], pos, quat])


UP = np.array([1.0, 0, 0, 0])
LYING = _quat((1, 0, 0), 90)  # a cylinder's or capsule's axis along y
# a lying cylinder tilted 5 and 6 degrees, its far end 0.5 mm deep
DROP5, DROP6 = 0.0995 - 0.1 * np.sin(np.radians(5)), 0.0995 - 0.1 * np.sin(np.radians(6))
ACROSS = _mul(_quat((0, 1, 0), -3), _quat((1, 0, 0), 45))  # a bar's edge, tilted 3 degrees
ALONG_X = _quat((0, 1, 0), 90)
# (name, geom 1, geom 2, poses of geom 2, MuJoCo's contact count at each)
SCENES = [
    ("cylinder over a box's edge", BOX, CYL,
     [_pose((0.18, 0, 0.149), UP), _pose((0.18, 0.18, 0.149), UP)], [4, 4]),
    ("cylinder lying on a box, tilted up to 5 degrees", BOX, CYL,
     [_pose((0, 0, 0.099), LYING), _pose((0, 0, 0.099), _mul(LYING, _quat((0, 0, 1), 5))),
      _pose((0, 0, 0.099), _mul(_quat((1, 0, 0), 0.5), LYING)),
      _pose((0, 0, DROP5), _mul(_quat((1, 0, 0), 5), LYING)),
      _pose((0, 0, DROP6), _mul(_quat((1, 0, 0), 6), LYING))], [2, 2, 2, 2, 1]),
    ("cylinder tilted 20 degrees on a box", BOX, CYL, [_pose((0, 0, 0.149), _quat((1, 0, 0), 20))], [1]),
    ("box edge on a cylinder's cap, inside and across the rim", CYL, BAR,
     [_pose((0, 0, 0.1273), _quat((1, 0, 0), 45)),
      _pose((-0.08, 0, 0.1273 - 0.03 * np.tan(np.radians(3))), ACROSS)],
     [2, 2]),
    ("cylinder lying on a cylinder's cap; crossed sides; parallel sides", CYL, CYL,
     [_pose((0, 0, 0.149), LYING), _pose((0.02, 0.03, 0.149), _mul(_quat((0, 0, 1), 30), LYING)),
      _pose((0, 0.099, 0), LYING), _pose((0.099, 0, 0), UP)], [2, 2, 2, 1]),
    # tilted 3 degrees, both ends past the rim: one clipped point, twice (as MuJoCo)
    ("capsule on a cylinder's cap: lying, across the rim, tilted 3 and 6 degrees", CYL, CAP,
     [_pose((0, 0, 0.1195), ALONG_X), _pose((0.05, 0, 0.1195), ALONG_X),
      _pose((0, 0, 0.1195), _quat((0, 1, 0), 87)), _pose((0, 0, 0.1195), _quat((0, 1, 0), 84))],
     [2, 2, 2, 1]),
    ("cylinder standing tilted, lying; capsule lying on a mesh", MESH, CYL,
     [_pose((0, 0, 0.149), _quat((1, 0, 0), 2)), _pose((0, 0, 0.099), LYING)], [4, 2]),
    ("capsule lying on a mesh", MESH, CAP, [_pose((0, 0, 0.0695), ALONG_X)], [2]),
]


@pytest.mark.parametrize(("name", "g1", "g2", "poses", "counts"), SCENES, ids=[s[0] for s in SCENES])
def test_scenes_match_mujoco(name: str, g1: str, g2: str, poses: list[np.ndarray], counts: list[int]) -> None:
    batch = ot.mj_batch(_model(g1, g2), poses)
    assert [len(c) for c in batch.contacts] == counts
    assert not ot.compare_batch(batch, tol=1e-3)


@pytest.mark.parametrize("margin", [0.0, 0.01])
def test_margin_contacts_of_separated_faces(margin: float) -> None:
    """With a margin MuJoCo 4.0.0 clips faces of pairs separated within it too, each point at its
    own (positive) distance: a cube above a mesh slab, level and tilted 2 degrees."""
    cube = '<geom type="box" size=".03 .03 .03"/>'
    slab = f'<geom type="mesh" mesh="slab" margin="{margin}"/>'
    poses = [_pose((0, 0, 0.085), UP), _pose((0, 0, 0.079), _quat((1, 0, 0), 2))]
    batch = ot.mj_batch(_model(slab, cube), poses)
    assert [len(c) for c in batch.contacts] == ([4, 4] if margin else [0, 2])
    assert not ot.compare_batch(batch, tol=1e-3)
    if margin:
        np.testing.assert_allclose([c["dist"] for c in batch.contacts[0]], 0.005, atol=1e-9)


@pytest.mark.parametrize("pair", ["box-cylinder", "cylinder-cylinder", "mesh-cylinder", "cylinder-bar"])
def test_random_resting_poses(pair: str) -> None:
    """Geom 2 resting face-down on geom 1 (tilts within 3 degrees, any spin, over edges too): the
    count and normals everywhere, the full contact set on most poses (see the module docstring)."""
    g1, g2, z, exact_min = {
        "box-cylinder": ('<geom type="box" size=".2 .15 .05"/>', CYL, 0.15, 20),
        "cylinder-cylinder": ('<geom type="cylinder" size=".07 .05"/>', CYL, 0.15, 38),
        "mesh-cylinder": (MESH, CYL, 0.15, 20),
        "cylinder-bar": (CYL, '<geom type="box" size=".03 .07 .02"/>', 0.12, 38),
    }[pair]
    rng = np.random.default_rng(0)
    n = 40
    q = np.zeros((n, 14))
    q[:, 3] = 1.0
    q[:, 7] = rng.uniform(-0.22, 0.22, n)
    q[:, 8] = rng.uniform(-0.17, 0.17, n)
    q[:, 9] = z - rng.uniform(0.0005, 0.003, n)
    for k in range(n):
        q[k, 10:] = pt._euler_quat(f"{rng.uniform(-3, 3)} {rng.uniform(-3, 3)} {rng.uniform(0, 360)}")
    batch = ot.mj_batch(_model(g1, g2), q)
    ours = ot.run_ours(batch)
    counts = [len(c) for c in batch.contacts]
    assert sum(c >= 3 for c in counts) >= 4, counts
    assert [len(u) for u in ours] == counts
    for mj, us in zip(batch.contacts, ours, strict=True):
        for u in us:
            np.testing.assert_allclose(u["frame"][0], mj[0]["frame"][0], atol=1e-3)
    exact = sum(not ot.mismatches(mj, us, tol=1e-3) for mj, us in zip(batch.contacts, ours, strict=True))
    assert exact >= exact_min, exact


def test_disabled_gives_one_contact() -> None:
    m = _model(BOX, CYL, '<flag multiccd="disable"/>')
    batch = ot.mj_batch(m, [_pose((0, 0, 0.149), _quat((1, 0, 0), 20)), _pose((0, 0, 0.099), LYING)])
    assert [len(c) for c in batch.contacts] == [1, 1]
    assert [g.ncon_per_pair for g in ot.system_of(m).contact_pairs.groups] == [1]
    assert not ot.compare_batch(batch, tol=1e-3)


def test_cylinder_rests_on_a_box_as_in_mujoco() -> None:
    """A cylinder dropped standing onto a box (4 contacts on its rim): it settles level at MuJoCo's
    height, not on a single point."""
    xml = f"""<mujoco><option timestep="0.002"/><worldbody>{BOX}
      <body pos="0.03 -0.02 0.16" euler="1 -1 0"><freejoint/>{CYL}</body></worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    for _ in range(250):
        mujoco.mj_step(m, d)
    sys = bp.from_mjmodel(m)
    state = bp.init(sys, jnp.asarray(m.qpos0, jnp.float32))
    act = jnp.zeros(0, jnp.float32)
    state = jax.jit(lambda s: jax.lax.fori_loop(0, 250, lambda _, x: bp.step(sys, x, act), s))(state)
    q = np.asarray(state.q)
    assert abs(d.qpos[2] - 0.15) < 2e-3  # level on the box, slightly sunk
    np.testing.assert_allclose(q[:3], d.qpos[:3], atol=1e-3)
    up_ours = np.zeros(9)
    up_mj = np.zeros(9)
    mujoco.mju_quat2Mat(up_ours, q[3:7].astype(np.float64))
    mujoco.mju_quat2Mat(up_mj, d.qpos[3:7])
    assert up_ours[8] > 0.9999 and up_mj[8] > 0.9999  # axis vertical: resting on the cap
    assert int(np.sum(np.asarray(state.contact.active))) == d.ncon == 4


def test_gradients_finite_when_touching() -> None:
    m = _model(BOX, CYL)
    poses = [_pose((0, 0, 0.15), UP), _pose((0, 0, 0.149), UP), _pose((0, 0, 0.0995), LYING)]
    batch = ot.mj_batch(m, poses)
    sys = ot.system_of(m)

    def loss(s: bp.System, xp: jax.Array, xm: jax.Array) -> jax.Array:
        c = collide(s, xp, xm)
        return jnp.sum(jnp.where(c.active, c.dist + jnp.sum(c.pos, axis=-1), 0.0))

    per_pose = jax.grad(loss, argnums=(0, 1))
    grad = jax.jit(lambda s, xp, xm: jax.lax.map(lambda a: per_pose(s, *a), (xp, xm)))  # pose by pose
    gs, gx = grad(sys, jnp.asarray(batch.xpos, jnp.float32), jnp.asarray(batch.xmat, jnp.float32))
    assert np.all(np.isfinite(np.asarray(gs.geom_size))) and np.all(np.isfinite(np.asarray(gx)))
    assert [len(c) for c in batch.contacts][1:] == [4, 2]
    # 4 contacts: the distance sum falls 4 to 1 as the cylinder rises (each point moves at half rate)
    np.testing.assert_allclose(np.asarray(gx)[1, 1, 2], 4 * 1.0 + 4 * 0.5, atol=1e-3)
