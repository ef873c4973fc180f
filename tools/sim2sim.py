"""Run an exported joystick policy in MuJoCo C: the sim-to-sim check before a policy meets hardware.

No JAX here: the `mujoco` package steps the same MJCF the policy was trained on, observations are
built from `MjData` exactly as `brax_envs.locomotion.Joystick` builds its `state` observation, and
onnxruntime runs the policy that `brax-train export RUN --format onnx` wrote, once per control step
(`n_frames` physics steps, the training env's rate). Prints one JSON line: the command, the mean
absolute error of the torso's horizontal velocity against it, and whether the robot fell.

    python tools/sim2sim.py --onnx policy.onnx --torso trunk --command 0.5 0 0 --seconds 10 \\
        --mjcf packages/brax-envs/src/brax_envs/locomotion/assets/quadruped_scene_flat.xml

Observation (float32): torso angular velocity in its frame (3), gravity direction in its frame (3),
command (3), joint angles less the keyframe's (nu), joint velocities (nu), last action (nu).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

import mujoco
import numpy as np


@dataclasses.dataclass(frozen=True)
class Robot:
    """The robot's description (the fields of `brax_envs.locomotion.LeggedRobot` used here)."""

    torso: str
    """The floating base body (its free joint is the model's first joint)."""
    keyframe: str = "home"
    """Standing keyframe: the reset pose and the default joint targets."""
    action_scale: float = 0.3
    """Joint-target offset (rad) of a unit action."""
    n_frames: int = 5
    """Physics steps per control step."""
    min_upright: float = 0.3
    """A torso whose up axis' z component falls below this has fallen."""


class MuJoCoJoystick:
    """A joystick-task episode in MuJoCo C, driven by an ONNX policy (or any `obs -> action`)."""

    def __init__(self, mjcf: str, robot: Robot, onnx_path: str | None = None) -> None:
        """Load `mjcf`, find the torso, keyframe and servos, and open the policy at `onnx_path`."""
        self.model = mujoco.MjModel.from_xml_path(mjcf)
        self.data = mujoco.MjData(self.model)
        self.robot = robot
        m = self.model
        torso = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, robot.torso)
        if torso < 0 or m.jnt_type[0] != mujoco.mjtJoint.mjJNT_FREE or m.jnt_bodyid[0] != torso:
            raise ValueError(f"{mjcf}: body {robot.torso!r} must exist and carry the model's first joint, "
                             "a free joint")
        key = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, robot.keyframe)
        if key < 0:
            raise ValueError(f"{mjcf}: no keyframe named {robot.keyframe!r}")
        joints = m.actuator_trnid[:, 0]
        self.qadr = m.jnt_qposadr[joints]
        self.dadr = m.jnt_dofadr[joints]
        self.key_qpos = m.key_qpos[key].copy()
        self.default = self.key_qpos[self.qadr]
        limited = m.actuator_ctrllimited.astype(bool)
        self.ctrl_lo = np.where(limited, m.actuator_ctrlrange[:, 0], -np.inf)
        self.ctrl_hi = np.where(limited, m.actuator_ctrlrange[:, 1], np.inf)
        self.last_action = np.zeros(m.nu)
        self.session: Any = None
        if onnx_path is not None:
            import onnxruntime  # type: ignore[import-untyped]  # ships no py.typed

            self.session = onnxruntime.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])

    @property
    def dt(self) -> float:
        """Seconds per control step."""
        return float(self.model.opt.timestep) * self.robot.n_frames

    def reset(self, qpos: np.ndarray | None = None, qvel: np.ndarray | None = None) -> None:
        """Start at `qpos`/`qvel` (default: the keyframe at rest), with MuJoCo's reset state otherwise."""
        mujoco.mj_resetData(self.model, self.data)
        self.data.qpos[:] = self.key_qpos if qpos is None else qpos
        self.data.qvel[:] = 0.0 if qvel is None else qvel
        mujoco.mj_forward(self.model, self.data)
        self.last_action = np.zeros(self.model.nu)

    def _rotation(self) -> np.ndarray:
        """(3, 3) torso rotation (columns: its axes in the world)."""
        mat = np.zeros(9)
        mujoco.mju_quat2Mat(mat, self.data.qpos[3:7])
        return mat.reshape(3, 3)

    def torso_velocity(self) -> np.ndarray:
        """(3,) the torso's linear velocity in its own frame."""
        return np.asarray(self._rotation().T @ self.data.qvel[0:3])

    def upright(self) -> float:
        """The z component of the torso's up axis."""
        return float(self._rotation()[2, 2])

    def observation(self, command: np.ndarray) -> np.ndarray:
        """The policy's observation at the current state under `command` (3,)."""
        d = self.data
        rot = self._rotation()
        parts = [d.qvel[3:6], rot.T @ np.asarray([0.0, 0.0, -1.0]), np.asarray(command, np.float64),
                 d.qpos[self.qadr] - self.default, d.qvel[self.dadr], self.last_action]
        return np.concatenate(parts).astype(np.float32)

    def act(self, obs: np.ndarray) -> np.ndarray:
        """The ONNX policy's action for one observation."""
        if self.session is None:
            raise ValueError("no policy: give onnx_path")
        name = self.session.get_inputs()[0].name
        return np.asarray(self.session.run(None, {name: obs[None]})[0][0], np.float64)

    def step(self, action: np.ndarray) -> None:
        """Drive the servos toward `default + action_scale * action` for `n_frames` physics steps."""
        action = np.clip(np.asarray(action, np.float64), -1.0, 1.0)
        target = self.default + self.robot.action_scale * action
        self.data.ctrl[:] = np.clip(target, self.ctrl_lo, self.ctrl_hi)
        for _ in range(self.robot.n_frames):
            mujoco.mj_step(self.model, self.data)
        self.last_action = action


def run(env: MuJoCoJoystick, command: np.ndarray, steps: int) -> dict[str, Any]:
    """Drive `env` with its policy for `steps` control steps; the tracking summary."""
    errors, fell = [], False
    for _ in range(steps):
        env.step(env.act(env.observation(command)))
        errors.append(float(np.linalg.norm(env.torso_velocity()[:2] - command[:2])))
        if env.upright() < env.robot.min_upright:
            fell = True
            break
    return {"command": command.tolist(), "steps": len(errors), "seconds": len(errors) * env.dt,
            "mean_abs_velocity_error": float(np.mean(errors)), "fell": fell}


def main(argv: list[str] | None = None) -> int:
    """The command line: run the policy, print the summary as a JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mjcf", required=True, help="the scene the policy was trained on")
    ap.add_argument("--onnx", required=True, help="the policy from `brax-train export RUN --format onnx`")
    ap.add_argument("--torso", required=True, help="the floating base body")
    ap.add_argument("--keyframe", default="home")
    ap.add_argument("--action-scale", type=float, default=0.3)
    ap.add_argument("--n-frames", type=int, default=5)
    ap.add_argument("--command", type=float, nargs=3, default=[0.5, 0.0, 0.0], metavar=("VX", "VY", "WZ"))
    ap.add_argument("--seconds", type=float, default=10.0)
    a = ap.parse_args(argv)
    env = MuJoCoJoystick(a.mjcf, Robot(a.torso, a.keyframe, a.action_scale, a.n_frames), a.onnx)
    env.reset()
    print(json.dumps(run(env, np.asarray(a.command), max(1, round(a.seconds / env.dt)))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
