"""General convex collider (GJK/EPA) against MuJoCo C's native convex collision, plus gradients.

MuJoCo's EPA stops after `ccd_iterations` (35) or once its upper and lower depth bounds are
within `ccd_tolerance` (1e-6); the normal of a curved contact is then only accurate to about
sqrt(1e-6 / curvature) ~ 1e-3..1e-2 rad (checked against a converged float64 minimization of the
support function: ours is the closer one on most poses where the two differ), which moves pos by
up to a few 1e-3, and a few poses stop early with depth errors up to 1e-2. So these tests compare
the deepest contact of each pose: dist within 1e-3 and pos within 5e-3 on at least 90% of the
poses, normal within 2e-2 on at least 90%, every dist within 2e-2, and the contact count on at
least 85% (under MuJoCo's default multiccd: the several contacts of touching faces and edges,
`collision.multicontact`; `multicontact_test` compares those contact by contact).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from brax_physics._src.collision import Contact, collide, convex
from brax_physics._src.collision import oracle_testutil as ot
from brax_physics._src.collision import primitives_test as pt
from brax_physics._src.lowering import settings
from brax_physics._src.system import System

_TYPES = {"sphere": 2, "capsule": 3, "ellipsoid": 4, "cylinder": 5, "box": 6}
PAIRS = [("sphere", "ellipsoid"), ("capsule", "ellipsoid"), ("capsule", "cylinder"),
         ("ellipsoid", "ellipsoid"), ("ellipsoid", "cylinder"), ("cylinder", "cylinder"),
         ("ellipsoid", "box"), ("cylinder", "box")]


def _model(t1: str, t2: str, margin: float) -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(f"""<mujoco><worldbody>
      <body><freejoint/><geom type="{t1}" size="{pt.SIZES[t1]}" margin="{margin}"/></body>
      <body><freejoint/><geom type="{t2}" size="{pt.SIZES[t2]}" margin="{margin}"/></body>
      </worldbody></mujoco>""")


# a margin on every other pair: contacts of separated shapes within it
@pytest.mark.parametrize(("t1", "t2", "margin"), [(a, b, 0.02 * (i % 2)) for i, (a, b) in enumerate(PAIRS)])
def test_random_poses_match_mujoco(t1: str, t2: str, margin: float) -> None:
    m = _model(t1, t2, margin)
    batch = ot.mj_batch(m, pt._random_pair_poses(np.random.default_rng(1), 48, 0.1, 0.4))
    ours = ot.run_ours(batch)
    n = len(ours)
    touching = sum(bool(c) for c in batch.contacts)
    assert touching > n // 4
    if margin:  # separated within the margin
        assert any(c["dist"] > 0 for cs in batch.contacts for c in cs)
    same_count = sum(len(a) == len(b) for a, b in zip(batch.contacts, ours, strict=True))
    assert same_count >= 0.85 * n, same_count
    close, normal_ok, errs = 0, 0, []
    for b, (mj, us) in enumerate(zip(batch.contacts, ours, strict=True)):
        if not (mj and us):
            continue
        cm = min(mj, key=lambda c: float(c["dist"]))
        cu = min(us, key=lambda c: float(c["dist"]))
        ddist = abs(float(cm["dist"]) - float(cu["dist"]))
        dpos = float(np.max(np.abs(cm["pos"] - cu["pos"])))
        dn = float(np.max(np.abs(cm["frame"][0] - cu["frame"][0])))
        close += ddist < 1e-3 and dpos < 5e-3
        normal_ok += dn < 2e-2
        if ddist > 2e-2:
            errs.append(f"pose {b}: dist MuJoCo {float(cm['dist'])} ours {float(cu['dist'])}")
        assert tuple(cm["geom"]) == tuple(cu["geom"])
        assert np.allclose(cu["frame"] @ cu["frame"].T, np.eye(3), atol=1e-5)
    both = sum(bool(a) and bool(b) for a, b in zip(batch.contacts, ours, strict=True))
    assert not errs, errs
    assert close >= 0.9 * both, (close, both)
    assert normal_ok >= 0.9 * both, (normal_ok, both)


def test_resting_single_contacts() -> None:
    """Stacked shapes, 5 to 10 mm deep (EPA from GJK's segment through the origin): MuJoCo's values."""
    cases = [  # (t1, t2, pos2, euler2)
        ("sphere", "ellipsoid", "0 0 0.295", "0 0 0"),
        ("ellipsoid", "box", "0 0 0.39", "0 0 0"),
        ("ellipsoid", "ellipsoid", "0 0 0.395", "0 0 0"),
    ]
    for t1, t2, pos, euler in cases:
        m = pt.pair_model(t1, t2)
        q = np.concatenate([[0, 0, 0, 1, 0, 0, 0], [float(v) for v in pos.split()], pt._euler_quat(euler)])
        batch = ot.mj_batch(m, [q])
        assert len(batch.contacts[0]) >= 1, (t1, t2)
        ours = ot.run_ours(batch)[0]
        cm = min(batch.contacts[0], key=lambda c: float(c["dist"]))
        cu = min(ours, key=lambda c: float(c["dist"]))
        np.testing.assert_allclose(cu["dist"], cm["dist"], atol=1e-4)
        # every case is mirror-symmetric in x and y (both shapes axis-aligned on the z axis): EPA
        # stops within its tolerance on a curved surface with a slightly tilted normal, and which
        # side it tilts to is round-off (it flipped under another LLVM optimization level), so the
        # tilt is compared up to those mirrors and the normal's z exactly
        n_us, n_mj = np.asarray(cu["frame"][0], np.float64), np.asarray(cm["frame"][0], np.float64)
        np.testing.assert_allclose(np.abs(n_us[:2]), np.abs(n_mj[:2]), atol=1e-3, err_msg=f"{t1}-{t2}")
        np.testing.assert_allclose(n_us[2], n_mj[2], atol=1e-3, err_msg=f"{t1}-{t2}")


def test_collision_pairs_accept_convex_pairs() -> None:
    m = pt.pair_model("capsule", "cylinder")
    (g,) = ot.system_of(m).contact_pairs.groups
    assert g.ncon_per_pair == 2  # multiccd (MuJoCo's default): the capsule's segment clipped
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_MULTICCD
    (g,) = ot.system_of(m).contact_pairs.groups
    assert g.ncon_per_pair == 1
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_NATIVECCD
    with pytest.raises(ValueError, match="nativeccd"):
        ot.system_of(m)


@pytest.mark.parametrize(("t1", "t2"), [("capsule", "cylinder"), ("ellipsoid", "box"),
                                        ("sphere", "ellipsoid")])
def test_gradients_finite_when_touching(t1: str, t2: str) -> None:
    fn = convex.convex_collider(_TYPES[t1], _TYPES[t2])
    f32 = jnp.float32
    s1 = jnp.array([float(v) for v in (pt.SIZES[t1] + " 0 0").split()[:3]], f32)
    s2 = jnp.array([float(v) for v in (pt.SIZES[t2] + " 0 0").split()[:3]], f32)
    # geom2 straight above geom1, surfaces touching: half-heights of both along z
    top = {"sphere": 0.1, "capsule": 0.28, "ellipsoid": 0.2, "cylinder": 0.15, "box": 0.2}
    x0 = jnp.array([0.0, 0.0, top[t1] + top[t2]], f32)
    eye = jnp.eye(3, dtype=f32)

    def contact(p2: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        return fn(jnp.zeros(3, f32), eye, s1, p2, eye, s2, jnp.zeros((), f32))

    def loss(p2: jax.Array) -> jax.Array:
        dist, pos, frame = contact(p2)
        return jnp.sum(dist) + jnp.sum(pos) + jnp.sum(frame)

    dist, _, _ = contact(x0)
    assert abs(float(dist[0])) < 1e-4
    for dz in (0.0, 1e-5, -1e-5):  # touching, just apart, just overlapping
        g = jax.jit(jax.grad(loss))(x0 + jnp.array([0.0, 0.0, dz], f32))
        assert np.all(np.isfinite(np.asarray(g)))
    # 1 mm deep, the distance grows at unit rate as geom2 moves up
    gd = jax.jit(jax.grad(lambda p: contact(p)[0][0]))(x0 - jnp.array([0.0, 0.0, 1e-3], f32))
    np.testing.assert_allclose(np.asarray(gd), [0.0, 0.0, 1.0], atol=1e-3)


def test_run_masked_computes_the_masked_lanes_in_rounds() -> None:
    """Chunks smaller than the masked count, a chunk that does not divide n, and batch elements
    with different counts (under vmap the loop runs the most rounds of any): the vmapped values
    where the mask holds, the fill elsewhere."""
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(4, 11, 3)), jnp.float32)
    mask = jnp.asarray(rng.uniform(size=(4, 11)) < np.array([[0.0], [0.2], [0.6], [1.0]]))

    def fn(v: jax.Array) -> tuple[jax.Array, jax.Array]:
        return 2.0 * v, jnp.sum(v)

    def masked(xb: jax.Array, mb: jax.Array) -> tuple[jax.Array, jax.Array]:
        fill = (jnp.full((11, 3), -7.0, jnp.float32), jnp.full((11,), -9.0, jnp.float32))
        out: tuple[jax.Array, jax.Array] = convex.run_masked(fn, mb, (xb,), fill, 3)
        return out

    a, s = jax.jit(jax.vmap(masked))(x, mask)
    m = np.asarray(mask)
    np.testing.assert_array_equal(np.asarray(a), np.where(m[..., None], 2.0 * np.asarray(x), -7.0))
    np.testing.assert_allclose(np.asarray(s), np.where(m, np.asarray(x).sum(-1), -9.0), rtol=1e-6)
    assert m[0].sum() == 0 and m[3].sum() == 11  # none masked, and more rounds than the rest


def test_mixed_pair_types_searched_in_rounds() -> None:
    """Six shapes of five types in a small box: seven general-convex pair types in one model, all
    searched together one pair per round (a different number of rounds per pose), against MuJoCo."""
    kinds = ["sphere", "capsule", "ellipsoid", "cylinder", "box", "ellipsoid"]
    bodies = "".join(f'<body><freejoint/><geom type="{t}" size="{pt.SIZES[t]}"/></body>' for t in kinds)
    m = mujoco.MjModel.from_xml_string(f"<mujoco><worldbody>{bodies}</worldbody></mujoco>")
    rng = np.random.default_rng(5)
    poses = np.zeros((24, 7 * len(kinds)))
    for b in range(len(kinds)):
        poses[:, 7 * b:7 * b + 3] = rng.uniform(-0.17, 0.17, (24, 3))
        poses[:, 7 * b + 3:7 * b + 7] = pt._quats(rng, 24)
    batch = ot.mj_batch(m, poses)
    sys = ot.system_of(m)
    sys = sys.replace(lowering=sys.lowering.replace(search_chunk=1))
    general = {(min(a, b), max(a, b)) for a, b in convex.CONVEX_PAIRS}
    run = jax.jit(jax.vmap(convex_collide, in_axes=(None, 0, 0)))
    out = run(sys, jnp.asarray(batch.xpos, jnp.float32), jnp.asarray(batch.xmat, jnp.float32))
    gtype = np.asarray(m.geom_type)
    compared, close, rounds, mixes = 0, 0, [], []
    for b, mj in enumerate(batch.contacts):
        deepest: dict[tuple[int, int], float] = {}
        for c in mj:
            key = (int(c["geom"][0]), int(c["geom"][1]))
            deepest[key] = min(deepest.get(key, np.inf), float(c["dist"]))
        act = np.asarray(out.active[b])
        ours = {(int(out.geom1[b, i]), int(out.geom2[b, i])): float(out.dist[b, i])
                for i in np.nonzero(act)[0]}
        convex_keys = {k for k in {*deepest, *ours} if tuple(sorted(gtype[list(k)])) in general}
        rounds.append(len(convex_keys))
        mixes.append(len({tuple(sorted(gtype[list(k)])) for k in convex_keys}))
        for key in convex_keys:
            assert key in deepest and key in ours, (b, key, deepest.get(key), ours.get(key))
            compared += 1
            close += abs(deepest[key] - ours[key]) < 1e-3
            assert abs(deepest[key] - ours[key]) < 2e-2, (b, key, deepest[key], ours[key])
    assert compared >= 40 and close >= 0.9 * compared, (compared, close)
    assert max(rounds) >= 4 and min(rounds) < max(rounds), rounds
    assert max(mixes) >= 3, mixes  # pairs of several types share the search


def convex_collide(sys: System, xpos: jax.Array, xmat: jax.Array) -> Contact:
    """`collide` under the system's lowering settings (as the pipeline's entry points run it)."""
    with settings.use(sys.lowering):
        return collide(sys, xpos, xmat)


def test_gradients_through_the_masked_search() -> None:
    """`collide`'s general-convex pairs (searched only past the sphere filter) keep finite
    gradients when touching, and the distance grows at unit rate as geom2 moves up."""
    m = pt.pair_model("capsule", "cylinder")
    sys = ot.system_of(m)
    d = mujoco.MjData(m)
    d.qpos[:] = np.concatenate([[0, 0, 0, 1, 0, 0, 0], [0, 0, 0.28 + 0.15 - 1e-3, 1, 0, 0, 0]])
    mujoco.mj_kinematics(m, d)
    xpos = jnp.asarray(d.geom_xpos, jnp.float32)
    xmat = jnp.asarray(d.geom_xmat.reshape(-1, 3, 3), jnp.float32)

    def dist(x: jax.Array) -> jax.Array:
        return collide(sys, x, xmat).dist[0]

    assert float(dist(xpos)) == pytest.approx(-1e-3, abs=1e-5)
    g = jax.jit(jax.grad(dist))(xpos)
    np.testing.assert_allclose(np.asarray(g), [[0, 0, -1], [0, 0, 1]], atol=1e-3)
    full = jax.jit(jax.grad(lambda x: jnp.sum(collide(sys, x, xmat).pos) + dist(x)))(xpos)
    assert np.all(np.isfinite(np.asarray(full)))


def test_search_traced_once_per_kinds(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process's programs that search the same pair kinds (a step and a reset, alone and under
    vmap) trace the GJK/EPA search once and take it from jit's cache after that; the results are
    those of the search traced in place."""
    calls = []
    search = convex._search

    def counted(*args: object) -> tuple[jax.Array, ...]:
        calls.append(1)
        return search(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(convex, "_search", counted)
    m = pt.pair_model("capsule", "ellipsoid")
    d = mujoco.MjData(m)
    d.qpos[:] = np.concatenate([[0, 0, 0, 1, 0, 0, 0], [0.05, 0, 0.2, 0.9, 0.3, 0.1, 0]])
    mujoco.mj_kinematics(m, d)
    xpos = jnp.asarray(d.geom_xpos, jnp.float32)
    xmat = jnp.asarray(d.geom_xmat.reshape(-1, 3, 3), jnp.float32)
    t1, t2 = np.asarray([_TYPES["capsule"]]), np.asarray([_TYPES["ellipsoid"]])
    size = jnp.asarray(m.geom_size, jnp.float32)

    def dist(x: jax.Array, iterations: int) -> jax.Array:  # iterations: settings no other test traces
        return convex.primitive_search(t1, x[:1], xmat[:1], size[:1], t2, x[1:], xmat[1:], size[1:],
                                       jnp.zeros(1), jnp.ones(1, bool), iterations)[0]

    first = jax.jit(lambda x: dist(x, 37))(xpos)
    again = jax.jit(lambda x: dist(x, 37) + 0.0)(xpos)
    batched = jax.jit(jax.vmap(lambda x: dist(x, 37)))(xpos[None])
    assert len(calls) == 1, f"the search was traced {len(calls)} times"
    for got in (again, batched[0]):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(first))
    capsule, ellipsoid = convex.primitive_shape(int(t1[0])), convex.primitive_shape(int(t2[0]))
    alone = search(capsule(xmat[0], size[0]), ellipsoid(xmat[1], size[1]), True, xpos[0], xpos[1],
                   jnp.zeros(()), 37, convex.CCD_TOLERANCE)[0]  # the search of this pair, outside the cache
    np.testing.assert_allclose(np.asarray(first), [float(alone)], rtol=1e-6, atol=1e-7)
    assert abs(float(first[0])) < 0.1  # not the fill of an unsearched lane: the search ran
