"""Issue #18's scene: a quadruped with cylinder hips, capsule legs, sphere feet and a convex-mesh trunk
stands on a bumpy height field and tracks MuJoCo C within 1 cm for 1 s.

Every pair that touches here goes through the height-field prisms and the general convex collider
(mesh-hfield, cylinder-hfield, capsule-hfield, sphere-hfield); the legs do not collide with each other
(contype 1, conaffinity 0 on the robot), so the terrain is the only thing the robot touches.
"""

from __future__ import annotations

import itertools

import brax_physics as bp
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

pytestmark = pytest.mark.slow


def _trunk_vertices() -> str:
    """A chamfered box (0.25 x 0.12 x 0.05 half extents, 1 cm chamfers): 24 vertices."""
    a, b, c, ch = 0.25, 0.12, 0.05, 0.01
    out = []
    for sx, sy, sz in itertools.product((-1, 1), repeat=3):
        out += [(sx * (a - ch), sy * b, sz * c), (sx * a, sy * (b - ch), sz * c),
                (sx * a, sy * b, sz * (c - ch))]
    return "  ".join(" ".join(f"{v:g}" for v in p) for p in out)


def _elevation(n: int = 16) -> str:
    """Smooth bumps, normalized to [0, 1] (row-major, MuJoCo's hfield layout)."""
    y, x = np.meshgrid(np.linspace(0, 1, n), np.linspace(0, 1, n), indexing="ij")
    e = 0.5 + 0.5 * np.sin(7 * x + 1) * np.cos(5 * y)
    e = (e - e.min()) / (e.max() - e.min())
    return " ".join(f"{v:.4f}" for v in e.reshape(-1))


def _leg(name: str, x: float, y: float) -> str:
    return f"""
      <body name="{name}_hip" pos="{x} {y} 0">
        <joint name="{name}_hip" axis="0 1 0" range="-60 60" damping="0.5"/>
        <geom type="cylinder" fromto="0 -0.03 0 0 0.03 0" size="0.035"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.14" size="0.02"/>
        <body name="{name}_shin" pos="0 0 -0.14">
          <joint name="{name}_knee" axis="0 1 0" range="-90 90" damping="0.5"/>
          <geom type="capsule" fromto="0 0 0 0 0 -0.14" size="0.018"/>
          <geom type="sphere" pos="0 0 -0.15" size="0.025"/>
        </body>
      </body>"""


LEGS = (("fl", 0.2, 0.16), ("fr", 0.2, -0.16), ("hl", -0.2, 0.16), ("hr", -0.2, -0.16))
XML = f"""
<mujoco model="terrain quadruped">
  <option timestep="0.005"/>
  <default><geom contype="1" conaffinity="0" density="600"/></default>
  <asset>
    <hfield name="bumps" nrow="16" ncol="16" size="2 2 0.06 0.1" elevation="{_elevation()}"/>
    <mesh name="trunk" vertex="{_trunk_vertices()}"/>
  </asset>
  <worldbody>
    <geom name="terrain" type="hfield" hfield="bumps" contype="0" conaffinity="1"/>
    <body name="trunk" pos="0 0 0.45">
      <freejoint/>
      <geom name="trunk" type="mesh" mesh="trunk"/>
      {"".join(_leg(*leg) for leg in LEGS)}
    </body>
  </worldbody>
  <actuator>
    {"".join(f'<position joint="{n}_{j}" kp="40"/>' for n, _, _ in LEGS for j in ("hip", "knee"))}
  </actuator>
</mujoco>
"""
SECONDS = 1.0


def test_quadruped_stands_on_a_height_field_like_mujoco() -> None:
    m = mujoco.MjModel.from_xml_string(XML)
    d = mujoco.MjData(m)
    steps = round(SECONDS / m.opt.timestep)
    sys = bp.from_mjmodel(m)
    ctrl = jnp.zeros(m.nu, jnp.float32)

    def body(s: bp.State, _: None) -> tuple[bp.State, jax.Array]:
        s = bp.step(sys, s, ctrl)
        return s, s.q

    s0 = bp.init(sys, jnp.asarray(d.qpos, jnp.float32), jnp.asarray(d.qvel, jnp.float32))
    q = np.asarray(jax.jit(lambda s: jax.lax.scan(body, s, None, length=steps)[1])(s0))
    want, ncon = [], 0
    for _ in range(steps):
        mujoco.mj_step(m, d)
        want.append(d.qpos.copy())
        ncon = max(ncon, d.ncon)
    want_q = np.stack(want)
    touching = {int(m.geom_type[g]) for c in d.contact[: d.ncon] for g in (c.geom1, c.geom2)}
    assert ncon >= 4 and int(mujoco.mjtGeom.mjGEOM_SPHERE) in touching  # standing on its feet
    assert want_q[-1, 2] > 0.2  # it stands, not lies
    np.testing.assert_array_less(np.abs(q[:, :3] - want_q[:, :3]), 0.01)
