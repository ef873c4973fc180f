"""Broadphase filter, parameter mixing and the batched driver against MuJoCo C."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from brax_physics._src.collision import collide, collision_pairs
from brax_physics._src.collision import oracle_testutil as ot

# Every geom overlaps every other near the origin, so MuJoCo reports a contact for each candidate
# pair: its d.contact then lists exactly the pairs that pass its filter.
FILTER_XML = """<mujoco>
  <option><flag filterparent="%s"/></option>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 .1"/>
    <geom name="world_ball" type="sphere" size=".1" pos="0 0 .05"/>
    <body name="static" pos=".01 0 .05"><geom name="static_ball" type="sphere" size=".1"/></body>
    <body name="A" pos="0 .01 .06"><freejoint/>
      <geom name="a_ball" type="sphere" size=".1" priority="1" friction=".5 .01 .001" solref=".03 1.2"
            condim="1"/>
      <geom name="a_cap" type="capsule" size=".05 .1" contype="2" conaffinity="2"/>
      <body name="B" pos=".01 0 0"><joint type="hinge"/>
        <geom name="b_ball" type="sphere" size=".1" solmix="3" solimp=".8 .9 .01 .4 3" margin=".01"
              gap=".002" friction="1.5 .02 .0001"/>
        <body name="C" pos="0 .01 0"><joint type="hinge"/>
          <geom name="c_ball" type="sphere" size=".1" solref="-1000 -50" condim="6"/>
        </body>
      </body>
    </body>
    <body name="D" pos=".02 .02 .05"><freejoint/>
      <geom name="d_cap" type="capsule" size=".05 .1" contype="2" conaffinity="2" friction="2 .1 .01"
            euler="0 90 0"/>
      <geom name="d_ball" type="sphere" size=".08" pos="0 0 .01" solref=".01 .5" solimp=".7 .8 .02 .6 1"
            solmix="0"/>
    </body>
  </worldbody>
  <contact>
    <exclude body1="D" body2="C"/>
    <pair geom1="d_cap" geom2="a_cap" condim="4" friction=".4 .5 .01 .002 .003" solref=".05 .9"
          solimp=".5 .6 .01 .5 2" margin=".003"/>
    <pair geom1="a_ball" geom2="d_ball" condim="1"/>
  </contact>
</mujoco>"""


def _model(filterparent: bool = True) -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(FILTER_XML % ("enable" if filterparent else "disable"))


def _names(m: mujoco.MjModel, pairs: set[tuple[int, int]]) -> set[frozenset[str]]:
    return {frozenset(mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) for g in p) for p in pairs}


@pytest.mark.parametrize("filterparent", [True, False])
def test_candidate_pairs_and_mixing_match_mujoco(filterparent: bool) -> None:
    m = _model(filterparent)
    batch = ot.mj_batch(m, [m.qpos0])
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    mj_pairs = {(int(c.geom[0]), int(c.geom[1])) for c in d.contact[: d.ncon]}
    ours = collision_pairs(m)
    our_pairs = {(int(a), int(b)) for g in ours.groups for a, b in zip(g.geom1, g.geom2, strict=True)}
    assert our_pairs == mj_pairs
    names = _names(m, our_pairs)
    # Rules exercised: world exception, static/world weld, grandparent, exclude, masks, <pair>.
    assert frozenset({"floor", "a_ball"}) in names
    assert frozenset({"world_ball", "static_ball"}) not in names
    assert frozenset({"floor", "static_ball"}) not in names
    assert frozenset({"a_ball", "c_ball"}) in names
    assert frozenset({"d_ball", "c_ball"}) not in names
    assert frozenset({"a_cap", "b_ball"}) not in names
    assert frozenset({"a_cap", "d_cap"}) in names
    assert (frozenset({"a_ball", "b_ball"}) in names) == (not filterparent)
    assert (frozenset({"b_ball", "c_ball"}) in names) == (not filterparent)
    # Every MuJoCo contact (geometry and mixed parameters) is reproduced.
    errs = ot.compare_batch(batch)
    assert not errs, "\n".join(errs)


# MjModel fields and our leaves of the same name that the run-time mixing reads.
_MIXED_FIELDS = ("geom_friction", "geom_solref", "geom_solimp", "geom_solmix", "geom_margin", "geom_gap",
                 "pair_friction", "pair_solref", "pair_solimp", "pair_margin", "pair_gap")


def _perturbed(m: mujoco.MjModel, seed: int) -> mujoco.MjModel:
    """A copy of `m` with every mixed contact parameter redrawn (valid ranges, some solrefs direct)."""
    rng = np.random.default_rng(seed)
    p = mujoco.MjModel.from_xml_string(FILTER_XML % "enable")
    p.geom_friction[:] = rng.uniform([0.1, 0.001, 1e-5], [2.0, 0.05, 0.01], p.geom_friction.shape)
    direct = rng.uniform([-3000, -80], [-500, -5], (p.ngeom, 2))
    p.geom_solref[:] = np.where(rng.random((p.ngeom, 1)) < 0.25, direct,
                                rng.uniform([0.005, 0.3], [0.05, 1.5], (p.ngeom, 2)))
    lo = rng.uniform(0.3, 0.8, (p.ngeom, 1))
    width, mid, power = (rng.uniform(a, b, (p.ngeom, 1)) for a, b in ((0.001, 0.02), (0.2, 0.8), (1, 3)))
    p.geom_solimp[:] = np.concatenate([lo, lo + 0.15, width, mid, power], 1)
    p.geom_solmix[:] = rng.choice([0.0, 0.5, 1.0, 4.0], p.ngeom)
    p.geom_margin[:] = rng.uniform(0, 0.02, p.ngeom)
    p.geom_gap[:] = rng.uniform(0, 0.005, p.ngeom)
    p.pair_friction[:] = rng.uniform(0.01, 1.0, p.pair_friction.shape)
    p.pair_solref[:] = rng.uniform([0.005, 0.3], [0.05, 1.5], p.pair_solref.shape)
    p.pair_solimp[:] = np.concatenate([np.full((p.npair, 1), 0.6), np.full((p.npair, 1), 0.9),
                                       rng.uniform(0.001, 0.02, (p.npair, 3))], 1)
    p.pair_margin[:] = rng.uniform(0, 0.02, p.npair)
    p.pair_gap[:] = rng.uniform(0, 0.005, p.npair)
    return p


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_parameters_mixed_at_run_time_match_mujoco(seed: int) -> None:
    """Leaves replaced after load (as a vmap randomization does) give MuJoCo's contacts for the same
    direct change to the MjModel: priority, solmix weights, direct-solref minimum, max friction,
    summed margin/gap, explicit <pair> values."""
    base = ot.system_of(_model())
    p = _perturbed(_model(), seed)
    sys = base.replace(**{f: jnp.asarray(np.asarray(getattr(p, f)), jnp.float32) for f in _MIXED_FIELDS})
    batch = ot.mj_batch(p, [p.qpos0])
    assert sum(len(c) for c in batch.contacts) >= 5
    errs = ot.compare_batch(batch, sys=sys)
    assert not errs, "\n".join(errs)
    # ...and they differ from the load-time parameters (the replaced leaves are what was read).
    assert ot.compare_batch(batch, sys=base)


def test_bounding_sphere_filter_reads_rbound() -> None:
    """MuJoCo skips a pair whose bounding spheres (plus margin and gap) are apart: a shrunk rbound
    removes a touching contact in both engines; a plane uses the geom's height above it."""
    xml = """<mujoco><worldbody><geom type="plane" size="5 5 .1"/>
      <body pos="0 0 .099"><freejoint/><geom type="sphere" size=".1"/></body>
      <body pos=".3 0 .099"><freejoint/><geom type="sphere" size=".1" margin=".01"/></body>
      <body pos=".3 0 .297"><freejoint/><geom type="box" size=".1 .1 .1"/></body></worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    base = ot.system_of(m)
    for rbound in ([0, 0.1, 0.1, 0.17], [0, 0.05, 0.1, 0.17], [0, 0.1, 0.06, 0.05], [0, 0.1, 0.08, 0.17]):
        p = mujoco.MjModel.from_xml_string(xml)
        p.geom_rbound[:] = rbound
        batch = ot.mj_batch(p, [p.qpos0])
        sys = base.replace(geom_rbound=jnp.asarray(rbound, jnp.float32))
        errs = ot.compare_batch(batch, sys=sys)
        assert not errs, (rbound, errs)
    counts = []
    for rbound in ([0, 0.1, 0.1, 0.17], [0, 0.05, 0.08, 0.05]):
        p = mujoco.MjModel.from_xml_string(xml)
        p.geom_rbound[:] = rbound
        counts.append(sum(len(c) for c in ot.mj_batch(p, [p.qpos0]).contacts))
    assert counts[0] > counts[1], counts


def test_explicit_pair_parameters() -> None:
    m = _model()
    sys = ot.system_of(m)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    con = jax.jit(collide)(sys, jnp.asarray(d.geom_xpos, jnp.float32),
                           jnp.asarray(d.geom_xmat.reshape(-1, 3, 3), jnp.float32))
    gid = {mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, i): i for i in range(m.ngeom)}
    pair = {frozenset((gid["a_cap"], gid["d_cap"]))}
    slots = [i for i in range(con.ncon) if {int(con.geom1[i]), int(con.geom2[i])} in pair]
    assert slots
    for i in slots:
        assert int(con.dim[i]) == 4
        np.testing.assert_allclose(con.friction[i], [0.4, 0.5, 0.01, 0.002, 0.003], rtol=1e-6)
        assert float(con.includemargin[i]) == pytest.approx(0.003)


def test_gap_contacts_are_inactive() -> None:
    """margin <= dist < margin + gap: MuJoCo lists the contact but excludes it; ours is inactive."""
    xml = """<mujoco><worldbody><geom type="plane" size="5 5 .1" margin=".004" gap=".003"/>
      <body><freejoint/><geom type="sphere" size=".1" margin=".006" gap=".002"/></body>
    </worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    sys = ot.system_of(m)
    fn = jax.jit(lambda p, r: collide(sys, p, r))
    for z, mj_listed, active in [(0.108, True, True), (0.112, True, False), (0.116, False, False)]:
        d.qpos[:] = [0, 0, z, 1, 0, 0, 0]
        mujoco.mj_forward(m, d)
        assert (d.ncon == 1) == mj_listed
        if mj_listed:
            assert (d.contact[0].efc_address >= 0) == active
            assert d.contact[0].includemargin == pytest.approx(0.01)
        c = fn(jnp.asarray(d.geom_xpos, jnp.float32), jnp.asarray(d.geom_xmat.reshape(-1, 3, 3), jnp.float32))
        assert bool(c.active[0]) == active
        assert float(c.includemargin[0]) == pytest.approx(0.01)


def test_explicit_pair_without_a_collider_gives_no_contact_as_in_mujoco() -> None:
    """Every geom pair type MuJoCo collides has a collider here; a <pair> between a plane and a height
    field (MuJoCo has no routine for it) loads and never touches, as in MuJoCo."""
    xml = """<mujoco><asset><hfield name="h" nrow="2" ncol="2" size="1 1 0.1 0.1"/></asset><worldbody>
      <geom name="ground" type="hfield" hfield="h"/><geom name="floor" type="plane" size="1 1 1"/>
      </worldbody><contact><pair geom1="ground" geom2="floor"/></contact></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    assert d.ncon == 0 and m.npair == 1
    assert collision_pairs(m).ncon == 0


def test_disabled_contacts_give_empty_contact_set() -> None:
    xml = """<mujoco><option><flag contact="disable"/></option><worldbody><geom type="plane" size="1 1 .1"/>
      <body><freejoint/><geom type="sphere" size=".1"/></body></worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    pairs = collision_pairs(m)
    assert pairs.ncon == 0
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    c = jax.jit(collide)(
        ot.system_of(m), jnp.asarray(d.geom_xpos, jnp.float32),
        jnp.asarray(d.geom_xmat.reshape(-1, 3, 3), jnp.float32),
    )
    assert c.ncon == 0 and c.frame.shape == (0, 3, 3)


def test_driver_shapes_order_and_randomized_sizes() -> None:
    """One slot block per pair type; sizes are traced inputs (vmapped here), indices are static."""
    xml = """<mujoco><worldbody><geom name="floor" type="plane" size="5 5 .1"/>
      <body pos="0 0 .09"><freejoint/><geom type="sphere" size=".1"/></body>
      <body pos=".5 0 .09"><freejoint/><geom type="box" size=".1 .1 .1"/></body>
      <body pos="1 0 .09"><freejoint/><geom type="capsule" size=".1 .2"/></body></worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    pairs = collision_pairs(m)
    plane, sphere, capsule, box = (mujoco.mjtGeom.mjGEOM_PLANE, mujoco.mjtGeom.mjGEOM_SPHERE,
                                   mujoco.mjtGeom.mjGEOM_CAPSULE, mujoco.mjtGeom.mjGEOM_BOX)
    assert [(g.type1, g.type2) for g in pairs.groups] == [
        (plane, sphere), (plane, capsule), (plane, box), (sphere, capsule), (sphere, box), (capsule, box)]
    assert pairs.ncon == 1 + 2 + 4 + 1 + 1 + 2
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    xpos = jnp.asarray(d.geom_xpos, jnp.float32)
    xmat = jnp.asarray(d.geom_xmat.reshape(-1, 3, 3), jnp.float32)
    scale = jnp.array([1.0, 0.5, 1.2], jnp.float32)[:, None, None]
    sizes = jnp.asarray(m.geom_size, jnp.float32)[None] * scale
    sys = ot.system_of(m)
    c = jax.jit(jax.vmap(lambda s: collide(sys.replace(geom_size=s), xpos, xmat)))(sizes)
    assert c.dist.shape == (3, pairs.ncon) and c.frame.shape == (3, pairs.ncon, 3, 3)
    sphere_floor = np.asarray(c.dist[:, 0])
    np.testing.assert_allclose(sphere_floor, [0.09 - 0.1, 0.09 - 0.05, 0.09 - 0.12], atol=1e-6)
    np.testing.assert_array_equal(np.asarray(c.geom1[0, :3]), [0, 0, 0])


def test_with_parameters_recomputes_what_collide_takes_from_the_model() -> None:
    """`with_parameters` gives back collide's model fields (mixed geom pairs and explicit <pair>s,
    randomized leaves) from a contact set that has lost them."""
    import dataclasses

    from brax_physics._src import kinematics
    from brax_physics._src.collision.contact import with_parameters

    p = _perturbed(_model(), 0)
    base = ot.system_of(_model())
    sys = base.replace(**{f: jnp.asarray(np.asarray(getattr(p, f)), jnp.float32) for f in _MIXED_FIELDS})
    fr = kinematics.kinematics(sys, jnp.asarray(p.qpos0, jnp.float32))
    contact = collide(sys, fr.geom_xpos, fr.geom_xmat)
    fields = ("includemargin", "friction", "solref", "solreffriction", "solimp")
    lost = dataclasses.replace(contact, **{f: jnp.full_like(getattr(contact, f), -7.0) for f in fields})
    again = with_parameters(sys, lost)
    for f in fields:
        np.testing.assert_array_equal(np.asarray(getattr(again, f)), np.asarray(getattr(contact, f)),
                                      err_msg=f)
    assert len(np.unique(np.asarray(contact.friction)[:, 0])) > 2  # pairs mixed differently
    np.testing.assert_array_equal(np.asarray(again.dist), np.asarray(contact.dist))  # geometry kept
