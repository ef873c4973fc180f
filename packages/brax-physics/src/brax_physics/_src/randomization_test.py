"""Contact parameters randomized under vmap move bodies exactly as MuJoCo after the same change.

The recipe users bring from Brax and Playground: `sys.replace(geom_friction=...)` inside `jax.vmap`
over a batch of values. Each member must match `mujoco.mj_step` on an `MjModel` whose field was set
to the same value directly (no `mj_setConst`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import brax_physics as bp

# A box thrown along x over a plane. Equal priorities, so both geoms enter the mix: the larger
# friction (the floor's is small), solref/solimp weighted 1:2 by solmix, margins summed.
SLIDE_XML = """<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 .1" friction="0.05 0.005 0.0001" solmix="2"/>
    <body name="box" pos="0 0 0.1"><freejoint/>
      <geom name="box" type="box" size=".1 .1 .1" friction="0.8 0.005 0.0001" solref="0.02 1"/>
    </body>
  </worldbody>
</mujoco>"""
BOX = 1  # geom id of the box
STEPS = 300  # 0.6 s
V0 = 3.0  # initial speed along x, m/s


def _mj_final_x(m: Any) -> tuple[float, float]:
    d = mujoco.MjData(m)
    d.qvel[0] = V0
    for _ in range(STEPS):
        mujoco.mj_step(m, d)
    return float(d.qpos[0]), float(d.qpos[2])


@functools.cache
def _base() -> tuple[bp.System, Any]:
    m = mujoco.MjModel.from_xml_string(SLIDE_XML)
    return bp.from_mjmodel(m), m


@jax.jit
@functools.partial(jax.vmap, in_axes=(0,))
def _final(sys: bp.System) -> jax.Array:
    state = bp.init(sys, qd=jnp.zeros(sys.nv).at[0].set(V0))

    def body(s: bp.State, _: None) -> tuple[bp.State, None]:
        return bp.step(sys, s, jnp.zeros(sys.nu)), None

    state, _ = jax.lax.scan(body, state, None, length=STEPS)
    return state.q[jnp.asarray([0, 2])]


# (field, three values for the box's entry, how to set them on an MjModel)
Setter = Callable[[Any, np.ndarray], None]
CASES: dict[str, tuple[list[np.ndarray], Setter]] = {
    "geom_friction": (
        [np.array([f, 0.005, 0.0001]) for f in (0.9, 0.3, 0.1)],
        lambda m, v: m.geom_friction.__setitem__(BOX, v),
    ),
    "geom_solref": (
        [np.array(v) for v in ([0.005, 1.0], [0.05, 0.3], [-20000.0, -100.0])],
        lambda m, v: m.geom_solref.__setitem__(BOX, v),
    ),
    "geom_solimp": (
        [np.array(v) for v in ([0.5, 0.6, 0.01, 0.5, 2.0], [0.95, 0.99, 0.001, 0.5, 2.0],
                               [0.2, 0.3, 0.05, 0.3, 1.0])],
        lambda m, v: m.geom_solimp.__setitem__(BOX, v),
    ),
    "geom_margin": (
        [np.array(v) for v in (0.0, 0.02, 0.05)],
        lambda m, v: m.geom_margin.__setitem__(BOX, v),
    ),
}


@pytest.mark.parametrize("field", sorted(CASES))
def test_randomized_contact_parameter_matches_mujoco(field: str) -> None:
    """Three values of one box parameter under vmap: each member within 1 cm of MuJoCo after 0.6 s."""
    sys, _ = _base()
    values, setter = CASES[field]
    base = np.asarray(getattr(sys, field))
    batch = np.stack([np.asarray(base).copy() for _ in values])
    for i, v in enumerate(values):
        batch[i, BOX] = v
    sys_v = jax.tree.map(lambda x: jnp.broadcast_to(x, (len(values), *jnp.shape(x))), sys)
    sys_v = sys_v.replace(**{field: jnp.asarray(batch, jnp.float32)})
    ours = np.asarray(_final(sys_v))
    want = []
    for v in values:
        m = mujoco.MjModel.from_xml_string(SLIDE_XML)
        setter(m, v)
        want.append(_mj_final_x(m))
    want_a = np.asarray(want)
    np.testing.assert_allclose(ours, want_a, atol=0.01, err_msg=field)
    # The values really change the motion (in MuJoCo and in ours): the spread is well above 1 cm.
    assert np.ptp(want_a[:, 0] if field != "geom_margin" else want_a[:, 1]) > 0.02, (field, want_a)


def test_friction_from_the_issue_slides_like_mujoco() -> None:
    """The reported case: friction 0.8 vs 0.1 gave the same stop; MuJoCo slides much farther at 0.1."""
    sys, _ = _base()
    frictions = [0.8, 0.1]
    sys_v = jax.vmap(lambda f: sys.replace(geom_friction=sys.geom_friction.at[:, 0].set(f)))(
        jnp.asarray(frictions, jnp.float32))
    ours = np.asarray(_final(sys_v))[:, 0]
    want = []
    for f in frictions:
        m = mujoco.MjModel.from_xml_string(SLIDE_XML)
        m.geom_friction[:, 0] = f
        want.append(_mj_final_x(m)[0])
    np.testing.assert_allclose(ours, want, atol=0.01)
    assert ours[1] - ours[0] > 0.3
