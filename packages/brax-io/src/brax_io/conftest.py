"""Fixtures shared by brax-io tests: a small model with every primitive geom type and a short rollout."""

from typing import Any

import brax_physics as bp
import jax.numpy as jnp
import pytest

SCENE_XML = """
<mujoco model="scene">
  <option timestep="0.01"/>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1" rgba="0.3 0.35 0.4 1"/>
    <body name="box" pos="0 0 0.6">
      <freejoint/>
      <geom name="box" type="box" size="0.15 0.15 0.15" rgba="0.9 0.1 0.1 1"/>
    </body>
    <body name="pole" pos="0.6 0 1.0">
      <joint name="hinge" type="hinge" axis="0 1 0"/>
      <geom name="rod" type="capsule" fromto="0 0 0 0.3 0 -0.3" size="0.04" rgba="0.1 0.8 0.2 1"
            contype="0" conaffinity="0"/>
      <geom name="ball" type="sphere" pos="0.3 0 -0.3" size="0.08" rgba="0.1 0.3 0.9 1"
            contype="0" conaffinity="0"/>
    </body>
    <body name="deco" pos="-0.6 0 0.3">
      <geom name="cyl" type="cylinder" size="0.1 0.2" rgba="0.9 0.8 0.1 1" contype="0" conaffinity="0"/>
      <geom name="egg" type="ellipsoid" pos="0 0.4 0" size="0.1 0.15 0.2" rgba="0.8 0.2 0.8 1"
            contype="0" conaffinity="0"/>
    </body>
  </worldbody>
</mujoco>
"""


NUM_FRAMES = 6


@pytest.fixture(scope="session")
def scene() -> tuple[Any, list[Any]]:
    """The system and 6 states: a box dropping and turning, a pendulum swinging.

    Frames come from `forward_kinematics` over a scripted q (stepping would spend most of the
    test budget compiling); the first is a real `bp.init` state and the rest are copies of it
    with the new body poses.
    """
    sys = bp.load_mjcf(SCENE_XML)
    state = bp.init(sys)
    states = []
    for t in range(NUM_FRAMES):
        q = sys.qpos0
        q = q.at[2].set(0.6 - 0.08 * t)  # box height
        half = 0.1 * t
        q = q.at[3:7].set(jnp.array([jnp.cos(half), 0.0, 0.0, jnp.sin(half)], jnp.float32))
        q = q.at[7].set(0.3 * t)  # pendulum angle
        states.append(state.replace(x=bp.forward_kinematics(sys, q)))
    return sys, states


# A visual-only terrain, a mesh with a material and a group-3 geom (hidden, as in MuJoCo's viewer).
TERRAIN_XML = """
<mujoco model="terrain">
  <asset>
    <hfield name="hills" nrow="5" ncol="6" size="1.2 1.0 0.3 0.1"
            elevation="0 0.2 0.4 0.4 0.2 0  0.1 0.5 0.9 0.8 0.4 0.1  0.2 0.6 1 1 0.5 0.2
                       0.1 0.5 0.8 0.7 0.4 0.1  0 0.2 0.3 0.3 0.2 0"/>
    <mesh name="gem" vertex="0.2 0 0  -0.2 0 0  0 0.15 0  0 -0.15 0  0 0 0.25  0 0 -0.25"/>
    <material name="emerald" rgba="0.05 0.85 0.2 1"/>
  </asset>
  <worldbody>
    <geom name="hills" type="hfield" hfield="hills" rgba="0.85 0.55 0.1 1" contype="0" conaffinity="0"/>
    <body name="gem" pos="0.1 -0.2 0.7" euler="20 30 40">
      <freejoint/>
      <geom name="gem" type="mesh" mesh="gem" material="emerald" contype="0" conaffinity="0"/>
      <geom name="hidden" type="box" size="0.3 0.3 0.3" group="3" rgba="1 0 1 1" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
</mujoco>
"""


@pytest.fixture(scope="session")
def terrain() -> tuple[Any, Any]:
    """The terrain system and one state at its initial pose."""
    sys = bp.load_mjcf(TERRAIN_XML)
    return sys, bp.init(sys)
