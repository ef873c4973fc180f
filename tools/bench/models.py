"""Benchmark models, written for brax-* with the standard envs' dimensions.

reacher, swimmer, chain7: contact-free variants (contype/conaffinity 0, no joint limits) that
measure the smooth pipeline alone. ant, humanoid: the brax-envs assets, with joint limits and
foot-floor contacts (the constraint solver in the loop). gym_humanoid, dmc_quadruped: models
nobody here wrote, from the Gymnasium and dm_control packages (tendons, filter actuators, equality).
mesh32, mesh64: convex meshes of 32 and 64 vertices (mesh-plane and mesh-mesh contacts).
hfield_balls: spheres and capsules on a height-field terrain (no actuators).
lb_*: the low-budget robot scenes (quadrupeds, humanoid, arm and gripper with a free cube), at
their own solver budgets, from their first keyframe.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import mujoco
import numpy as np

# Standard locomotion models with contacts, read from the brax-envs assets (brax-physics itself
# must not import brax-envs). Timesteps are those of the XML files (ant 0.01 s, humanoid 0.003 s,
# as Google Brax's ant/humanoid); the envs step the physics N_FRAMES times per env step.
ASSETS = Path(__file__).resolve().parents[2] / "packages/brax-envs/src/brax_envs/envs/assets"
N_FRAMES: dict[str, int] = {"ant": 5, "humanoid": 5}

# The solver settings Google brax's ant and humanoid envs give MJX (their `backend == 'mjx'`
# branch): Newton, 1 iteration, 4 line-search steps, Euler damping off. `brax_mjx_env` rows run
# MJX so, as its users train; every other row runs the XML's settings (MuJoCo's defaults).
MJX_ENV_OPT: dict[str, dict[str, int]] = {
    name: {"solver": int(mujoco.mjtSolver.mjSOL_NEWTON), "iterations": 1, "ls_iterations": 4,
           "disableflags": int(mujoco.mjtDisableBit.mjDSBL_EULERDAMP)}
    for name in ("ant", "humanoid")
}

# Reacher: two 0.1 m links with 0.01 m capsule radius, hinge joints, gear 200 motors, timestep
# 0.01 as in the standard reacher (limits dropped: contact-free pipeline comparison).
REACHER = """
<mujoco model="reacher">
  <compiler angle="radian" inertiafromgeom="true"/>
  <default>
    <joint armature="1" damping="1"/>
    <geom contype="0" conaffinity="0" friction="1 0.1 0.1" rgba="0.7 0.7 0 1"/>
  </default>
  <option gravity="0 0 -9.81" integrator="Euler" timestep="0.01"/>
  <worldbody>
    <body name="body0" pos="0 0 .01">
      <geom fromto="0 0 0 0.1 0 0" name="link0" rgba="0.0 0.4 0.6 1" size=".01" type="capsule"/>
      <joint axis="0 0 1" name="joint0" pos="0 0 0" type="hinge"/>
      <body name="body1" pos="0.1 0 0">
        <joint axis="0 0 1" name="joint1" pos="0 0 0" type="hinge"/>
        <geom fromto="0 0 0 0.1 0 0" name="link1" rgba="0.0 0.4 0.6 1" size=".01" type="capsule"/>
        <body name="fingertip" pos="0.11 0 0">
          <geom name="fingertip" pos="0 0 0" rgba="0.0 0.8 0.6 1" size=".01" type="sphere"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor ctrllimited="true" ctrlrange="-1.0 1.0" gear="200.0" joint="joint0"/>
    <motor ctrllimited="true" ctrlrange="-1.0 1.0" gear="200.0" joint="joint1"/>
  </actuator>
</mujoco>
"""

# Swimmer-like chain: planar root (two slides and a hinge) plus two hinged 1 m capsule links,
# gear 150 motors, timestep 0.01; the viscous medium of the standard swimmer is left out.
SWIMMER = """
<mujoco model="swimmer">
  <compiler angle="degree" inertiafromgeom="true"/>
  <option integrator="Euler" timestep="0.01" gravity="0 0 0"/>
  <default>
    <geom contype="0" conaffinity="0" density="1000" rgba="0.8 0.6 0.4 1"/>
    <joint armature="0.1" damping="0.1"/>
  </default>
  <worldbody>
    <body name="torso" pos="0 0 0">
      <geom density="1000" fromto="1.5 0 0 0.5 0 0" size="0.1" type="capsule"/>
      <joint axis="1 0 0" name="slider1" pos="0 0 0" type="slide"/>
      <joint axis="0 1 0" name="slider2" pos="0 0 0" type="slide"/>
      <joint axis="0 0 1" name="free_body_rot" pos="0 0 0" type="hinge"/>
      <body name="mid" pos="0.5 0 0">
        <geom density="1000" fromto="0 0 0 -1 0 0" size="0.1" type="capsule"/>
        <joint axis="0 0 1" name="motor1_rot" pos="0 0 0" type="hinge"/>
        <body name="back" pos="-1 0 0">
          <geom density="1000" fromto="0 0 0 -1 0 0" size="0.1" type="capsule"/>
          <joint axis="0 0 1" name="motor2_rot" pos="0 0 0" type="hinge"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor ctrllimited="true" ctrlrange="-1 1" gear="150.0" joint="motor1_rot"/>
    <motor ctrllimited="true" ctrlrange="-1 1" gear="150.0" joint="motor2_rot"/>
  </actuator>
</mujoco>
"""

# A 7-link spatial chain hanging under gravity (hinges about alternating axes), timestep 0.002:
# deeper trees make the tree traversals and the mass matrix dominate.
CHAIN7 = """
<mujoco model="chain7">
  <option timestep="0.002"/>
  <default>
    <geom type="capsule" size="0.04" contype="0" conaffinity="0"/>
    <joint type="hinge" damping="0.05" armature="0.01"/>
  </default>
  <worldbody>
    <body name="l1" pos="0 0 2"><joint axis="1 0 0"/><geom fromto="0 0 0 0 0 -0.25"/>
    <body name="l2" pos="0 0 -0.25"><joint axis="0 1 0"/><geom fromto="0 0 0 0 0 -0.25"/>
    <body name="l3" pos="0 0 -0.25"><joint axis="1 0 0"/><geom fromto="0 0 0 0 0 -0.25"/>
    <body name="l4" pos="0 0 -0.25"><joint axis="0 1 0"/><geom fromto="0 0 0 0 0 -0.25"/>
    <body name="l5" pos="0 0 -0.25"><joint axis="1 0 0"/><geom fromto="0 0 0 0 0 -0.25"/>
    <body name="l6" pos="0 0 -0.25"><joint axis="0 1 0"/><geom fromto="0 0 0 0 0 -0.25"/>
    <body name="l7" pos="0 0 -0.25"><joint axis="1 0 0"/><geom fromto="0 0 0 0 0 -0.25"/>
    </body></body></body></body></body></body></body>
  </worldbody>
  <actuator>
    <motor joint="joint0" gear="10" ctrlrange="-1 1"/>
  </actuator>
</mujoco>
""".replace('<joint axis="1 0 0"/><geom fromto="0 0 0 0 0 -0.25"/>\n    <body name="l2"',
            '<joint name="joint0" axis="1 0 0"/><geom fromto="0 0 0 0 0 -0.25"/>\n    <body name="l2"', 1)


def mesh_stack(nvert: int) -> str:
    """Two convex hulls of `nvert` vertices (points on an ellipsoid) stacked on the floor: plane-mesh
    contacts for the lower one, mesh-mesh between them. multiccd is disabled so that MuJoCo C, MJX
    and brax-physics all compute one contact per mesh-mesh pair (MuJoCo's default adds face contacts)."""
    u = np.random.default_rng(nvert).normal(size=(nvert, 3))
    pts = u / np.linalg.norm(u, axis=1, keepdims=True) * np.array([0.12, 0.1, 0.06])
    vert = " ".join(f"{x:.5f}" for x in pts.ravel())
    return f"""
<mujoco model="mesh{nvert}">
  <option timestep="0.005"><flag multiccd="disable"/></option>
  <asset><mesh name="hull" vertex="{vert}"/></asset>
  <worldbody>
    <geom name="floor" type="plane" size="0 0 1"/>
    <body name="lower" pos="0 0 0.07"><freejoint/><geom type="mesh" mesh="hull"/></body>
    <body name="upper" pos="0.02 0 0.2" euler="20 10 0"><freejoint/><geom type="mesh" mesh="hull"/></body>
  </worldbody>
</mujoco>
"""


def _terrain_elevation(n: int) -> str:
    """n x n smooth bumps in [0, 1] (rows are y), as an MJCF elevation list."""
    out = []
    for r in range(n):
        for c in range(n):
            x, y = c / (n - 1), r / (n - 1)
            z = 0.5 + 0.25 * math.sin(9.0 * x + 1.0) * math.cos(7.0 * y) + 0.25 * math.sin(5.0 * (x + y))
            out.append(f"{z:.4f}")
    return " ".join(out)


# Height-field terrain (32 x 32 grid, 4 x 4 m, 0.3 m bumps) with four spheres and four capsules
# rolling on it: every ground contact goes through the height-field prisms (GJK/EPA per prism).
HFIELD_BALLS = f"""
<mujoco model="hfield_balls">
  <option timestep="0.005"/>
  <asset>
    <hfield name="terrain" nrow="32" ncol="32" size="2 2 0.3 0.1" elevation="{_terrain_elevation(32)}"/>
  </asset>
  <worldbody>
    <geom name="terrain" type="hfield" hfield="terrain"/>
""" + "".join(
    f'    <body pos="{x} {y} 0.6"><freejoint/><geom type="sphere" size="0.1"/></body>\n'
    f'    <body pos="{-x} {y} 0.6" euler="0 80 {30 * i}"><freejoint/>'
    '<geom type="capsule" size="0.06 0.15"/></body>\n'
    for i, (x, y) in enumerate(((0.5, 0.5), (1.0, -0.5), (0.3, -1.2), (1.4, 1.1)))
) + """  </worldbody>
</mujoco>
"""

MODELS: dict[str, str] = {"reacher": REACHER, "swimmer": SWIMMER, "chain7": CHAIN7,
                          "mesh32": mesh_stack(32), "mesh64": mesh_stack(64), "hfield_balls": HFIELD_BALLS}
for _name in N_FRAMES:
    if (ASSETS / f"{_name}.xml").exists():
        MODELS[_name] = (ASSETS / f"{_name}.xml").read_text()

# The low-budget corpus (tests-integration/physics/low_budget): robot scenes at the solver budgets
# of RL training (1-4 Newton iterations, short line searches), each run at the budget its XML sets,
# from its first keyframe, by every backend.
LOW_BUDGET = Path(__file__).resolve().parents[2] / "tests-integration/physics/low_budget"
for _path in sorted(LOW_BUDGET.glob("*.xml")):
    MODELS[f"lb_{_path.stem}"] = _path.read_text()


def _package_dir(name: str) -> Path | None:
    """Folder of an installed package, without importing it (None when it is not installed)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _standalone_xml(path: Path, drop_geoms: tuple[str, ...] = ()) -> str:
    """The MJCF at `path` as one self-contained string (includes resolved), minus `drop_geoms`."""
    spec = mujoco.MjSpec.from_file(str(path))
    for name in drop_geoms:
        spec.delete(spec.geom(name))
    if drop_geoms:
        for hfield in list(spec.hfields):  # a dropped terrain leaves its height field unused
            spec.delete(hfield)
    spec.compile()
    return str(spec.to_xml())


# Gymnasium's humanoid (hip-knee tendons) and dm_control's quadruped (tendon transmissions, filter
# actuators, tendon equality). The quadruped's terrain height field is left out, as dm_control's walk
# and run tasks leave it out (height fields have their own row, hfield_balls).
_GYM, _DMC = _package_dir("gymnasium"), _package_dir("dm_control")
if _GYM is not None:
    MODELS["gym_humanoid"] = _standalone_xml(_GYM / "envs/mujoco/assets/humanoid.xml")
    N_FRAMES["gym_humanoid"] = 5  # Gymnasium's Humanoid frame_skip
if _DMC is not None:
    MODELS["dmc_quadruped"] = _standalone_xml(_DMC / "suite/quadruped.xml", drop_geoms=("terrain",))
    N_FRAMES["dmc_quadruped"] = 4  # dm_control's quadruped: 0.02 s control step, 0.005 s physics
