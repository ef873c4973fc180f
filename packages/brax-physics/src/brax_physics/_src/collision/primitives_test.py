"""Narrow phase against MuJoCo C: every pair type on random and resting poses, plus gradients."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from brax_physics._src.collision import oracle_testutil as ot
from brax_physics._src.collision import primitives

SIZES = {"sphere": ".1", "capsule": ".08 .2", "box": ".1 .15 .2", "cylinder": ".1 .15",
         "ellipsoid": ".06 .1 .2"}


def _quats(rng: np.random.Generator, n: int) -> np.ndarray:
    q = Rotation.random(n, random_state=rng).as_quat()
    return np.asarray(q[:, [3, 0, 1, 2]])


def _euler_quat(deg: str) -> np.ndarray:
    q = Rotation.from_euler("XYZ", [float(v) for v in deg.split()], degrees=True).as_quat()
    return np.asarray(q[[3, 0, 1, 2]])


def plane_model(t: str) -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(f"""<mujoco><worldbody><geom type="plane" size="5 5 .1"/>
      <body><freejoint/><geom type="{t}" size="{SIZES[t]}"/></body></worldbody></mujoco>""")


def pair_model(t1: str, t2: str, s1: str | None = None, s2: str | None = None) -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(f"""<mujoco><worldbody>
      <body><freejoint/><geom type="{t1}" size="{s1 or SIZES[t1]}"/></body>
      <body><freejoint/><geom type="{t2}" size="{s2 or SIZES[t2]}"/></body></worldbody></mujoco>""")


def _check(batch: ot.Batch, tangents: bool = True) -> None:
    errs = ot.compare_batch(batch, tangents=tangents)
    assert not errs, "\n".join(errs[:20])


@pytest.mark.parametrize("t", ["sphere", "capsule", "box", "cylinder", "ellipsoid"])
def test_plane_random_poses(t: str) -> None:
    rng = np.random.default_rng(0)
    n = 48
    q = np.zeros((n, 7))
    q[:, 2] = rng.uniform(0.0, 0.25, n)
    q[:, 3:] = _quats(rng, n)
    batch = ot.mj_batch(plane_model(t), q)
    assert sum(len(c) for c in batch.contacts) > n // 4
    _check(batch)


@pytest.mark.parametrize(
    ("t", "euler", "z", "count"),
    [
        ("box", "0 0 0", 0.19, 4),  # flat
        ("box", "30 0 0", 0.2, 2),  # on an edge
        ("box", "10 20 30", 0.2, 2),
        ("capsule", "0 90 0", 0.07, 2),  # lying
        ("capsule", "0 0 0", 0.27, 1),  # standing
        ("cylinder", "0 0 0", 0.14, 3),  # standing on its disk
        ("cylinder", "90 0 0", 0.09, 2),  # lying on its side
        ("cylinder", "30 20 0", 0.15, 1),  # tilted on its rim
        ("sphere", "0 0 0", 0.09, 1),
    ],
)
def test_plane_resting(t: str, euler: str, z: float, count: int) -> None:
    q = np.concatenate([[0.1, -0.2, z], _euler_quat(euler)])
    batch = ot.mj_batch(plane_model(t), [q])
    assert len(batch.contacts[0]) == count
    _check(batch)


def _random_pair_poses(rng: np.random.Generator, n: int, rmin: float, rmax: float) -> np.ndarray:
    q = np.zeros((n, 14))
    q[:, 3:7] = _quats(rng, n)
    dirs = rng.normal(size=(n, 3))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    q[:, 7:10] = dirs * rng.uniform(rmin, rmax, n)[:, None]
    q[:, 10:14] = _quats(rng, n)
    return q


@pytest.mark.parametrize(
    ("t1", "t2"),
    [("sphere", "sphere"), ("sphere", "capsule"), ("capsule", "capsule"), ("sphere", "box"),
     ("sphere", "cylinder")],
)
def test_pair_random_poses(t1: str, t2: str) -> None:
    rng = np.random.default_rng(1)
    batch = ot.mj_batch(pair_model(t1, t2), _random_pair_poses(rng, 48, 0.1, 0.4))
    assert sum(len(c) for c in batch.contacts) > 10
    _check(batch)


def test_sphere_cylinder_deep_overlaps() -> None:
    # centers inside the cylinder: MuJoCo leaves through the side or the cap of least penetration
    rng = np.random.default_rng(2)
    batch = ot.mj_batch(pair_model("sphere", "cylinder"), _random_pair_poses(rng, 48, 0.0, 0.12))
    assert sum(len(c) for c in batch.contacts) == 48
    assert min(c["dist"] for cs in batch.contacts for c in cs) < -0.15
    _check(batch)


def _shallow_poses(m: mujoco.MjModel, rng: np.random.Generator, n: int) -> np.ndarray:
    """Random orientations; the second body moved along a random direction until MuJoCo's deepest
    contact is at a random depth in [-0.02, 0] (resting-like overlaps)."""
    d = mujoco.MjData(m)

    def deepest(q: np.ndarray) -> float:
        d.qpos[:] = q
        mujoco.mj_kinematics(m, d)
        mujoco.mj_collision(m, d)
        return min((float(d.contact[i].dist) for i in range(d.ncon)), default=1.0)

    out = _random_pair_poses(rng, n, 1.0, 1.0)
    for q in out:
        direction = q[7:10].copy()
        target = rng.uniform(-0.02, 0.0)
        lo, hi = 0.0, 1.0
        for _ in range(25):
            mid = 0.5 * (lo + hi)
            q[7:10] = direction * mid
            lo, hi = (mid, hi) if deepest(q) < target else (lo, mid)
        q[7:10] = direction * hi
    return out


def test_box_box_shallow_random() -> None:
    m = pair_model("box", "box")
    batch = ot.mj_batch(m, _shallow_poses(m, np.random.default_rng(2), 40))
    _check(batch)


def test_box_box_resting() -> None:
    cases = [  # (size1, size2, pos2, euler2, count)
        (".5 .5 .1", ".1 .1 .1", "0 0 0.19", "0 0 0", 4),
        (".1 .1 .1", ".5 .5 .1", "0 0 0.19", "0 0 0", 4),
        (".1 .1 .1", ".1 .1 .1", "0 0 0.19", "0 0 0", 4),
        (".1 .1 .1", ".1 .1 .1", "0 0 0.19", "0 0 45", 8),
        (".5 .5 .1", ".1 .1 .1", "0 0 0.19", "3 2 0", 4),
        (".5 .5 .1", ".1 .1 .1", "0 0 0.23", "45 0 0", 2),
        (".5 .5 .1", ".1 .1 .1", "0.45 0.45 0.19", "0 0 30", 5),
        (".1 .1 .1", ".1 .1 .1", "0.15 0.1 0.19", "30 40 45", 1),
    ]
    for s1, s2, pos, euler, count in cases:
        m = pair_model("box", "box", s1, s2)
        q = np.concatenate([[0, 0, 0, 1, 0, 0, 0], [float(v) for v in pos.split()], _euler_quat(euler)])
        batch = ot.mj_batch(m, [q])
        assert len(batch.contacts[0]) == count, (s1, s2, pos, euler)
        _check(batch)


def test_capsule_capsule_parallel() -> None:
    """Parallel axes give MuJoCo's 2 contacts (including its duplicate for end-to-end capsules)."""
    cases = [  # (half-length 1, euler 1, pos 2, euler 2, half-length 2)
        (0.3, "0 90 0", "0.1 0 0.19", "0 90 0", 0.2),
        (0.3, "0 90 0", "0.1 0 0.19", "0 90.001 0", 0.2),
        (0.3, "0 90 0", "0.1 0 0.19", "0 90.01 0", 0.2),
        (0.1, "0 -90 0", "0.1 0 0.19", "0 90 0", 0.3),
        (0.3, "0 90 0", "0.55 0 0.05", "0 90 0", 0.2),
        (0.3, "0 90 0", "0.1 0.1 0.1", "0 90 0", 0.2),
        (0.3, "0 0 0", "0 0.15 0", "0 0 0", 0.2),
    ]
    for h1, e1, pos, e2, h2 in cases:
        m = pair_model("capsule", "capsule", f".1 {h1}", f".1 {h2}")
        q = np.concatenate([[0, 0, 0], _euler_quat(e1), [float(v) for v in pos.split()], _euler_quat(e2)])
        _check(ot.mj_batch(m, [q]))


def test_capsule_box_resting() -> None:
    cases = [  # (box euler, capsule pos, capsule euler, half-length, count)
        ("0 0 0", "0 0 0.14", "0 90 0", 0.2, 2),  # lying on the face
        ("0 0 0", "0.1 0.1 0.14", "0 90 30", 0.2, 2),
        ("0 0 0", "0.5 0.1 0.14", "0 90 0", 0.2, 2),  # hanging over the edge
        ("0 0 0", "0.1 0.1 0.14", "0 90 0", 0.6, 2),  # longer than the face
        ("0 0 0", "0.1 0.1 0.14", "0 89.9 30", 0.2, 2),  # almost flat
        ("0 0 0", "0.1 0.1 0.14", "0 80 30", 0.2, 1),  # tilted: lower end only
        ("0 0 0", "0.1 0.1 0.34", "0 0 0", 0.2, 1),  # standing
        ("0 0 0", "0.1 0.1 0.3", "0 30 0", 0.2, 1),  # leaning on its lower end
        ("0 0 0", "0.05 0.45 0.14", "90 0 0", 0.2, 2),  # overhanging the y edge
        ("10 20 30", "0 0 0", "0 0 0", 0.2, 2),  # lying on a rotated box
    ]
    for box_euler, pos, euler, h, count in cases:
        m = mujoco.MjModel.from_xml_string(f"""<mujoco><worldbody>
          <body euler="{box_euler}"><freejoint/><geom type="box" size=".5 .4 .1"/></body>
          <body><freejoint/><geom type="capsule" size=".05 {h}"/></body></worldbody></mujoco>""")
        qb = np.concatenate([[0, 0, 0], _euler_quat(box_euler)])
        p = np.array([float(v) for v in pos.split()])
        if box_euler != "0 0 0":  # a capsule resting on the rotated box's top face, tilted with it
            rot = Rotation.from_euler("XYZ", [float(v) for v in box_euler.split()], degrees=True)
            p = rot.apply([0.1, 0.05, 0.14])
            lying = rot * Rotation.from_euler("XYZ", [0, 90, 0], degrees=True)
            qc = np.concatenate([p, np.asarray(lying.as_quat()[[3, 0, 1, 2]])])
        else:
            qc = np.concatenate([p, _euler_quat(euler)])
        batch = ot.mj_batch(m, [np.concatenate([qb, qc])])
        assert len(batch.contacts[0]) == count, (box_euler, pos, euler, h)
        _check(batch)


def test_capsule_box_shallow_random_deepest() -> None:
    """General poses: the deepest contact matches MuJoCo's (dist 1e-5, pos 1e-4, normal 2e-3).

    Documented deviation: MuJoCo's capsule-box adds a second contact (sometimes a duplicate) in
    edge/corner configurations that this collider reports with one contact, and its normal in
    edge regions differs by up to ~1e-3 rad from the exact closest-point normal used here.
    """
    m = mujoco.MjModel.from_xml_string(f"""<mujoco><worldbody>
      <body><freejoint/><geom type="box" size="{SIZES["box"]}"/></body>
      <body><freejoint/><geom type="capsule" size="{SIZES["capsule"]}"/></body></worldbody></mujoco>""")
    batch = ot.mj_batch(m, _shallow_poses(m, np.random.default_rng(3), 40))
    ours = ot.run_ours(batch)
    for b, (mj, us) in enumerate(zip(batch.contacts, ours, strict=True)):
        assert mj and us, b
        cm = min(mj, key=lambda c: float(c["dist"]))
        cu = min(us, key=lambda c: float(c["dist"]))
        assert abs(float(cm["dist"]) - float(cu["dist"])) < 1e-5, b
        assert np.allclose(cm["pos"], cu["pos"], atol=1e-4), b
        assert np.allclose(cm["frame"][0], cu["frame"][0], atol=2e-3), b
        assert len(us) <= len(mj), b


def _args(p1: list[float], p2: list[float], s1: list[float], s2: list[float]) -> tuple[jax.Array, ...]:
    eye = jnp.eye(3, dtype=jnp.float32)
    f = jnp.float32
    return (jnp.array(p1, f), eye, jnp.array(s1, f), jnp.array(p2, f), eye, jnp.array(s2, f),
            jnp.zeros((), f))


def _fd_grad(fn: object, x: np.ndarray, eps: float = 1e-3) -> np.ndarray:
    g = np.zeros(3)
    for i in range(3):
        e = np.zeros(3)
        e[i] = eps
        up = float(fn(jnp.asarray(x + e, jnp.float32)))  # type: ignore[operator]
        down = float(fn(jnp.asarray(x - e, jnp.float32)))  # type: ignore[operator]
        g[i] = (up - down) / (2 * eps)
    return g


@pytest.mark.parametrize("pair", ["plane_sphere", "capsule_capsule"])
def test_gradient_matches_finite_differences(pair: str) -> None:
    if pair == "plane_sphere":
        args = _args([0, 0, 0], [0.1, 0.2, 0.09], [5, 5, 0.1], [0.1, 0, 0])
        fn, x0 = primitives.plane_sphere, np.array([0.1, 0.2, 0.09])
    else:
        rot = jnp.asarray(Rotation.from_euler("XYZ", [30, 60, 10], degrees=True).as_matrix(), jnp.float32)
        a = _args([0, 0, 0], [0.05, 0.12, 0.03], [0.1, 0.3, 0], [0.1, 0.2, 0])
        args = (a[0], a[1], a[2], a[3], rot, a[5], a[6])
        fn, x0 = primitives.capsule_capsule, np.array([0.05, 0.12, 0.03])

    def loss(p2: jax.Array) -> jax.Array:
        dist, _, _ = fn(args[0], args[1], args[2], p2, args[4], args[5], args[6])
        return jnp.sum(jnp.where(dist < primitives.NO_CONTACT, dist, 0.0))

    g = np.asarray(jax.jit(jax.grad(loss))(jnp.asarray(x0, jnp.float32)))
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(g, _fd_grad(loss, x0), atol=2e-3)


def test_gradients_finite_at_degenerate_poses() -> None:
    """Coincident sphere centers, a point on a capsule axis, a box-centered sphere: no NaNs."""
    for fn, s1, s2 in [
        (primitives.sphere_sphere, [0.1, 0, 0], [0.1, 0, 0]),
        (primitives.sphere_capsule, [0.1, 0, 0], [0.1, 0.2, 0]),
        (primitives.capsule_capsule, [0.1, 0.2, 0], [0.1, 0.2, 0]),
        (primitives.sphere_box, [0.1, 0, 0], [0.1, 0.2, 0.3]),
        (primitives.capsule_box, [0.1, 0.2, 0], [0.1, 0.2, 0.3]),
        (primitives.box_box, [0.1, 0.2, 0.3], [0.1, 0.2, 0.3]),
    ]:
        args = _args([0, 0, 0], [0, 0, 0], s1, s2)

        def loss(p2: jax.Array, fn: primitives.Collider = fn,
                 args: tuple[jax.Array, ...] = args) -> jax.Array:
            dist, pos, frame = fn(args[0], args[1], args[2], p2, args[4], args[5], args[6])
            ok = dist < primitives.NO_CONTACT
            return (jnp.sum(jnp.where(ok, dist, 0.0)) + jnp.sum(jnp.where(ok[:, None], pos, 0.0))
                    + jnp.sum(frame))

        g = jax.jit(jax.grad(loss))(jnp.zeros(3, jnp.float32))
        assert np.all(np.isfinite(np.asarray(g))), fn.__name__
