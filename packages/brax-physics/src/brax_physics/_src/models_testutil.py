"""MJCF models shared by the tests (a `*_testutil.py` module: importable by tests, never in the wheel)."""

from __future__ import annotations

PENDULUM = """
<mujoco model="pendulum">
  <option timestep="0.01"/>
  <worldbody>
    <body name="pole" pos="0 0 1">
      <joint name="hinge" type="hinge" axis="0 1 0"/>
      <geom name="rod" type="capsule" fromto="0 0 0 0 0 -0.5" size="0.04" mass="1"/>
    </body>
  </worldbody>
</mujoco>
"""

DOUBLE_PENDULUM = """
<mujoco model="double_pendulum">
  <option timestep="0.005"/>
  <worldbody>
    <body name="upper" pos="0 0 2">
      <joint name="shoulder" type="hinge" axis="0 1 0" damping="0.05"/>
      <geom type="capsule" fromto="0 0 0 0.6 0 0" size="0.05"/>
      <body name="lower" pos="0.6 0 0">
        <joint name="elbow" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.04"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""

# Hinge, slide and ball joints, two joints on one body, armature, damping, springs with springref,
# joint ref angles, anchors off the body origin, tilted body frames and non-diagonal inertias.
CHAIN7 = """
<mujoco model="chain7">
  <option timestep="0.002"/>
  <default><geom type="capsule" size="0.03"/></default>
  <worldbody>
    <body name="l1" pos="0 0 1.5" euler="10 0 20">
      <joint name="j1" type="hinge" axis="0 0 1" armature="0.05" damping="0.3"/>
      <geom fromto="0 0 0 0.3 0 0"/>
      <body name="l2" pos="0.3 0 0" quat="0.9 0.2 0.1 0.3">
        <joint name="j2" type="hinge" axis="0 1 0.3" pos="0.02 0.01 0" ref="30" stiffness="4" springref="45"/>
        <inertial pos="0.15 0.01 0" quat="0.8 0.3 0.4 0.2" mass="0.7" diaginertia="0.02 0.015 0.01"/>
        <geom fromto="0 0 0 0.3 0 0"/>
        <body name="l3" pos="0.3 0 0">
          <joint name="j3" type="slide" axis="1 0.2 0" armature="0.1" damping="0.5" stiffness="20"
                 springref="0.05"/>
          <geom type="box" size="0.05 0.04 0.03" pos="0.05 0 0"/>
          <body name="l4" pos="0.1 0 0" euler="0 30 0">
            <joint name="j4" type="ball" pos="0 0 0.02" damping="0.05" armature="0.01"/>
            <geom fromto="0 0 0 0 0 -0.3"/>
            <body name="l5" pos="0 0 -0.3">
              <joint name="j5a" type="hinge" axis="1 0 0" ref="-15"/>
              <joint name="j5b" type="slide" axis="0 0 1" pos="0 0.01 0"/>
              <inertial pos="0 0.02 -0.1" fullinertia="0.01 0.02 0.015 0.002 -0.001 0.003" mass="0.5"/>
              <geom fromto="0 0 0 0 0 -0.2"/>
              <body name="l6" pos="0 0 -0.2">
                <joint name="j6" type="hinge" axis="0 1 0" damping="0.1" stiffness="1"/>
                <geom type="sphere" size="0.05" pos="0.02 0 -0.05"/>
                <body name="l7" pos="0 0 -0.1" quat="0.7 0 0.7 0">
                  <joint name="j7" type="ball" armature="0.02"/>
                  <geom type="ellipsoid" size="0.06 0.03 0.02" pos="0.05 0 0"/>
                </body>
              </body>
            </body>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>
"""

FREE_BODY = """
<mujoco model="free_body">
  <option gravity="0 0 0" timestep="0.002"/>
  <worldbody>
    <body name="box" pos="0.1 -0.2 0.5" euler="20 -10 40">
      <freejoint name="root"/>
      <geom type="box" size="0.2 0.1 0.05" pos="0.05 0.02 0" euler="5 10 0"/>
      <geom type="sphere" size="0.04" pos="-0.2 0 0.05"/>
    </body>
  </worldbody>
</mujoco>
"""

# Two trees: a hinge chain and a free body with a child on a hinge.
TWO_ROOTS = """
<mujoco model="two_roots">
  <option timestep="0.004"/>
  <worldbody>
    <body name="arm" pos="0 0 1">
      <joint name="a1" type="hinge" axis="1 0 0" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0 0.4 0" size="0.04"/>
      <body name="forearm" pos="0 0.4 0">
        <joint name="a2" type="hinge" axis="0 0 1" pos="0 -0.05 0"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      </body>
    </body>
    <body name="torso" pos="2 0 3">
      <freejoint/>
      <geom type="box" size="0.1 0.15 0.2"/>
      <body name="flap" pos="0.1 0 0.2">
        <joint name="f1" type="hinge" axis="0 1 0" stiffness="2"/>
        <geom type="box" size="0.1 0.1 0.01" pos="0.1 0 0"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""

# Motor, position, velocity and general actuators; the test controls exceed ctrlrange and the
# forces exceed forcerange so that both clamps are active.
ACTUATED_ARM = """
<mujoco model="actuated_arm">
  <option timestep="0.004"/>
  <worldbody>
    <body name="base" pos="0 0 0.5">
      <joint name="yaw" type="hinge" axis="0 0 1" damping="0.2"/>
      <geom type="cylinder" size="0.05 0.05"/>
      <body name="upper" pos="0 0 0.05">
        <joint name="shoulder" type="hinge" axis="0 1 0" damping="0.1"/>
        <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.04"/>
        <body name="lower" pos="0.4 0 0">
          <joint name="elbow" type="hinge" axis="0 1 0" armature="0.01"/>
          <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
          <body name="slider" pos="0.3 0 0">
            <joint name="extend" type="slide" axis="1 0 0"/>
            <geom type="box" size="0.05 0.03 0.03"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="m_yaw" joint="yaw" gear="2" ctrlrange="-1 1"/>
    <position name="p_shoulder" joint="shoulder" kp="20" kv="1" ctrlrange="-1.5 1.5" forcerange="-3 3"/>
    <velocity name="v_elbow" joint="elbow" kv="2" gear="1.5"/>
    <general name="g_extend" joint="extend" gainprm="10" biastype="affine" biasprm="0.5 -30 -2"
             ctrlrange="-0.5 0.5" forcerange="-4 4"/>
  </actuator>
</mujoco>
"""

RK4_CHAIN = """
<mujoco model="rk4_chain">
  <option timestep="0.01" integrator="RK4"/>
  <worldbody>
    <body name="b1" pos="0 0 1">
      <joint name="h1" type="hinge" axis="0 1 0" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.04"/>
      <body name="b2" pos="0.4 0 0">
        <joint name="s2" type="slide" axis="1 0 0" stiffness="10"/>
        <geom type="box" size="0.05 0.05 0.05"/>
        <body name="b3" pos="0.1 0 0">
          <joint name="h3" type="hinge" axis="1 0 1" pos="0 0.02 0" ref="10"/>
          <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator><position joint="h1" kp="5"/></actuator>
</mujoco>
"""

# RK4 with quaternions: MuJoCo 4.0.0's RK4 (mj_RungeKutta; MuJoCo documentation, Computation:
# General framework, Numerical integration) combines ball/free-joint qpos differently from the
# textbook tableau, by O(h^3) per step; this model checks that the gap stays at that level.
RK4_BALL = """
<mujoco model="rk4_ball">
  <option timestep="0.01" integrator="RK4"/>
  <worldbody>
    <body name="top" pos="0 0 1">
      <joint name="ball" type="ball" damping="0.02"/>
      <geom type="capsule" fromto="0 0 0 0.1 0.05 -0.4" size="0.04"/>
    </body>
  </worldbody>
</mujoco>
"""

IMPLICITFAST_ARM = """
<mujoco model="implicitfast_arm">
  <option timestep="0.01" integrator="implicitfast"/>
  <worldbody>
    <body name="upper" pos="0 0 1">
      <joint name="shoulder" type="hinge" axis="0 1 0" damping="2"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.04"/>
      <body name="lower" pos="0.4 0 0">
        <joint name="elbow" type="hinge" axis="0 1 0" damping="0.5"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <velocity joint="shoulder" kv="3"/>
    <position joint="elbow" kp="10" kv="4" forcerange="-1 1"/>
  </actuator>
</mujoco>
"""

_BODY = """
    <body name="b" pos="0 0 1">
      <joint name="j" type="hinge" axis="0 1 0"/>
      <geom name="g" type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      <site name="tip" pos="0.3 0 0"/>
      <body name="c" pos="0.3 0 0">
        <joint name="k" type="hinge" axis="0 1 0"/>
        <geom type="sphere" size="0.05"/>
      </body>
    </body>
"""

WITH_TENDON = f"""
<mujoco><worldbody>{_BODY}</worldbody>
  <tendon><fixed name="t1" actuatorfrcrange="-1 1"><joint joint="j" coef="1"/><joint joint="k" coef="-1"/>
  </fixed></tendon>
</mujoco>
"""

WITH_EQUALITY = f"""
<mujoco><worldbody>{_BODY}</worldbody>
  <equality><joint name="eq_jk" joint1="j" joint2="k"/></equality>
</mujoco>
"""

WITH_FILTER_ACTUATOR = f"""
<mujoco><worldbody>{_BODY}</worldbody>
  <actuator><general name="a_filter" joint="j" dyntype="filter" dynprm="0.1"/></actuator>
</mujoco>
"""

WITH_SITE_ACTUATOR = f"""
<mujoco><worldbody>{_BODY}</worldbody>
  <actuator><motor name="a_site" site="tip" gear="0 0 1 0 0 0"/></actuator>
</mujoco>
"""

_LIMITED = _BODY.replace('axis="0 1 0"/>', 'axis="0 1 0" range="-30 30"/>', 1)
WITH_LIMIT = f"<mujoco><worldbody>{_LIMITED}</worldbody></mujoco>"

_FRICTION = _BODY.replace('axis="0 1 0"/>', 'axis="0 1 0" frictionloss="0.1"/>', 1)
WITH_FRICTIONLOSS = f"<mujoco><worldbody>{_FRICTION}</worldbody></mujoco>"

WITH_BALL_LIMIT = """<mujoco><worldbody><body><joint name="b" type="ball" range="0 30"/><geom size=".1"/>
</body></worldbody></mujoco>"""

# Contacts and constraints, one model for all oracle tests (one compile): independent free bodies
# dropped on a floor (box, sphere, capsule), a box sliding to rest, boxes on two ramps (20° holds
# and 35° slides for friction 0.5; collision bits keep each box on its own ramp and the bodies
# apart, so only plane pairs exist), and a hinge
# with friction loss driven by a motor past its limit.
CONTACT_SCENE = """
<mujoco model="contact_scene">
  <option timestep="0.004"/>
  <default><geom contype="1" conaffinity="0"/></default>
  <worldbody>
    <geom name="floor" type="plane" size="0 0 1" contype="0" conaffinity="1"/>
    <geom name="ramp_hold" type="plane" size="0 0 1" pos="0 10 0" euler="0 20 0" contype="0" conaffinity="2"
          friction="0.5"/>
    <geom name="ramp_slide" type="plane" size="0 0 1" pos="0 -10 0" euler="0 35 0" contype="0" conaffinity="4"
          friction="0.5"/>
    <body name="box" pos="0 0 0.3" euler="10 20 5"><freejoint/><geom type="box" size=".1 .08 .05"/></body>
    <body name="ball" pos="1 0 0.3"><freejoint/><geom type="sphere" size=".1"/></body>
    <body name="pill" pos="2 0 0.3" euler="30 10 0"><freejoint/><geom type="capsule" size=".05 .1"/></body>
    <body name="slider" pos="3 0 0.05"><freejoint/><geom type="box" size=".1 .1 .05"/></body>
    <body name="hold" pos="0 10 0.06" euler="0 20 0"><freejoint/>
      <geom type="box" size=".1 .1 .05" friction="0.5" contype="2"/></body>
    <body name="slide" pos="0 -10 0.06" euler="0 35 0"><freejoint/>
      <geom type="box" size=".1 .1 .05" friction="0.5" contype="4"/></body>
    <body name="arm" pos="5 0 1">
      <joint name="hinge" type="hinge" axis="0 1 0" range="-30 30" frictionloss="0.05"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03" contype="0"/>
    </body>
  </worldbody>
  <actuator><motor joint="hinge" gear="1"/></actuator>
</mujoco>
"""

# Disable flags that change the smooth dynamics: no gravity, no ctrl clamping, explicit damping.
ACTUATED_ARM_FLAGS = ACTUATED_ARM.replace(
    '<option timestep="0.004"/>',
    '<option timestep="0.004"><flag gravity="disable" clampctrl="disable" eulerdamp="disable"/></option>',
)

# Models compared against MuJoCo C step by step: name -> MJCF.
ORACLE_MODELS = {
    "pendulum": PENDULUM,
    "double_pendulum": DOUBLE_PENDULUM,
    "chain7": CHAIN7,
    "free_body": FREE_BODY,
    "two_roots": TWO_ROOTS,
    "actuated_arm": ACTUATED_ARM,
    "actuated_arm_flags": ACTUATED_ARM_FLAGS,
    "rk4_chain": RK4_CHAIN,
    "implicitfast_arm": IMPLICITFAST_ARM,
}
