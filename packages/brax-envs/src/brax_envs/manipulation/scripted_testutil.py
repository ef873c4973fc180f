"""A scripted top-down grasp for the tests: inverse kinematics in MuJoCo C and a joint-space plan.

The plan is open loop in joint space: arm joint targets that put the gripper site above the cube,
around it and then above the table, each found by damped least squares on the site's position and
orientation (hand pointing down, fingers across two faces of the cube).
"""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np

_DAMPING = 1e-4  # damped least squares: keeps steps bounded near singular poses


@dataclasses.dataclass(frozen=True)
class GraspPlan:
    """Arm joint targets (narm,) for the phases of a top-down grasp."""

    above: np.ndarray
    """The gripper site `approach` above the cube's centre."""
    grasp: np.ndarray
    """The gripper site at the cube's centre."""
    lifted: np.ndarray
    """The gripper site `lift` above the cube's resting centre."""


def arm_dofs(m: mujoco.MjModel, gripper_actuator: str = "gripper") -> tuple[np.ndarray, np.ndarray]:
    """(narm,) qpos and dof addresses of the joints of every actuator but the gripper, in actuator order."""
    g = m.actuator(gripper_actuator).id
    joints = np.asarray([m.actuator_trnid[i, 0] for i in range(m.nu) if i != g])
    return m.jnt_qposadr[joints], m.jnt_dofadr[joints]


def down_frame(yaw: float) -> np.ndarray:
    """(3, 3) site orientation pointing down (z = -world z) with its x axis at `yaw` about world z."""
    c, s = np.cos(yaw), np.sin(yaw)
    return np.asarray([[c, s, 0.0], [s, -c, 0.0], [0.0, 0.0, -1.0]])


def solve_ik(m: mujoco.MjModel, q_start: np.ndarray, site: str, pos: np.ndarray, rot: np.ndarray,
             iterations: int = 200) -> np.ndarray:
    """(narm,) arm joint angles from `q_start` that put `site` at `pos` with orientation `rot` (3, 3)."""
    qadr, dadr = arm_dofs(m)
    d = mujoco.MjData(m)
    sid = m.site(site).id
    q = np.asarray(q_start, np.float64).copy()
    lo, hi = m.jnt_range[m.dof_jntid[dadr]].T
    jp, jr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
    for _ in range(iterations):
        d.qpos[qadr] = q
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)
        mujoco.mj_jacSite(m, d, jp, jr, sid)
        cur = d.site_xmat[sid].reshape(3, 3)
        err = np.concatenate([pos - d.site_xpos[sid], 0.5 * np.cross(cur, rot, axis=0).sum(axis=1)])
        jac = np.concatenate([jp, jr])[:, dadr]
        q = np.clip(q + jac.T @ np.linalg.solve(jac @ jac.T + _DAMPING * np.eye(6), err), lo, hi)
    return q


def grasp_plan(m: mujoco.MjModel, q_start: np.ndarray, cube_pos: np.ndarray, cube_yaw: float,
               site: str = "grip_site", approach: float = 0.1, lift: float = 0.15) -> GraspPlan:
    """The joint targets of a top-down grasp of a cube at `cube_pos` (3,) turned `cube_yaw` about z."""
    # the fingers close along the site's y axis: any multiple of a quarter turn from the cube's yaw
    # grips two faces; the one nearest the start pose spares the wrist
    yaw = (cube_yaw + np.pi / 4) % (np.pi / 2) - np.pi / 4
    rot = down_frame(yaw)
    up = np.asarray([0.0, 0.0, 1.0])
    above = solve_ik(m, q_start, site, cube_pos + approach * up, rot)
    grasp = solve_ik(m, above, site, cube_pos, rot)
    lifted = solve_ik(m, grasp, site, cube_pos + lift * up, rot)
    return GraspPlan(above=above, grasp=grasp, lifted=lifted)


def plan_targets(plan: GraspPlan, start: np.ndarray, steps: tuple[int, int, int, int]
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Per-step arm targets (n, narm) and gripper commands (n,) (1 open, -1 closed) of the plan.

    `steps` are the phases' lengths: move above the cube, descend, close, lift; each move is a
    straight line in joint space.
    """
    move, descend, close, lift = steps

    def line(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
        return np.asarray(a + (b - a) * (np.arange(1, n + 1) / n)[:, None])

    arm = np.concatenate([line(start, plan.above, move), line(plan.above, plan.grasp, descend),
                          np.repeat(plan.grasp[None], close, axis=0), line(plan.grasp, plan.lifted, lift)])
    grip = np.concatenate([np.ones(move + descend), -np.ones(close + lift)])
    return arm, grip
