"""Sim-to-sim: an exported ONNX policy drives the quadruped in MuJoCo C (`tools/sim2sim.py`, no JAX) as
it drives it in our joystick env: the same observations, actions and trajectory, step by step."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import subprocess
import sys
from types import ModuleType
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from brax_envs import locomotion
from brax_train import export

ROOT = pathlib.Path(__file__).resolve().parents[1]
SIM2SIM = ROOT / "tools" / "sim2sim.py"
SCENE = locomotion.asset("quadruped_scene_flat.xml")
OBS = 9 + 3 * 12
STEPS = 25  # 0.5 s of control at 50 Hz
COMMAND = np.asarray([0.5, 0.0, 0.2], np.float32)


def _sim2sim() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sim2sim", SIM2SIM)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["sim2sim"] = module  # dataclasses resolve the module's annotations through it
    spec.loader.exec_module(module)
    return module


def _make_policy(params: tuple[jax.Array, jax.Array], deterministic: bool = True) -> Any:
    """A small fixed network: the check is that both simulators run the same one the same way."""
    w, b = params

    def policy(obs: jax.Array, key: jax.Array) -> tuple[jax.Array, dict[str, Any]]:
        return jnp.tanh(obs @ w + b[None]), {}

    return policy


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, pathlib.Path]:
    k_w, k_b = jax.random.split(jax.random.PRNGKey(7))
    params = (0.3 * jax.random.normal(k_w, (OBS, 12)), 0.1 * jax.random.normal(k_b, (12,)))
    path = tmp_path_factory.mktemp("sim2sim") / "policy.onnx"
    export.export_policy((_make_policy, params), path, "onnx", observation_size=OBS)
    return jax.jit(_make_policy(params)), path


def test_mujoco_c_follows_our_env_step_by_step(policy: tuple[Any, pathlib.Path]) -> None:
    act, onnx_path = policy
    # every command the env draws is COMMAND
    fixed = tuple((float(c), float(c)) for c in COMMAND)
    env = locomotion.quadruped_joystick(command_range=fixed, zero_command_prob=0.0)
    state = jax.jit(env.reset)(jax.random.PRNGKey(3))
    step = jax.jit(env.step)
    sim = _sim2sim().MuJoCoJoystick(str(SCENE), _sim2sim().Robot("trunk"), str(onnx_path))
    sim.reset(np.asarray(state.pipeline_state.q, np.float64), np.asarray(state.pipeline_state.qd, np.float64))
    obs_err, act_err, q_err = [], [], []
    for _ in range(STEPS):
        ours = np.asarray(state.obs["state"])
        theirs = sim.observation(COMMAND)
        obs_err.append(float(np.max(np.abs(ours - theirs))))
        a_ours = np.asarray(act(jnp.asarray(ours)[None], None)[0][0])
        a_theirs = sim.act(theirs)
        act_err.append(float(np.max(np.abs(a_ours - a_theirs))))
        state = step(state, jnp.asarray(a_ours))
        sim.step(a_theirs)
        q_err.append(float(np.max(np.abs(np.asarray(state.pipeline_state.q) - sim.data.qpos))))
    moved = float(np.max(np.abs(np.asarray(state.pipeline_state.q[7:]) - sim.default)))
    print(f"max |obs| error {max(obs_err):.2e}, |action| {max(act_err):.2e}, |qpos| {max(q_err):.2e}; "
          f"joints moved up to {moved:.3f} rad")
    assert moved > 0.05  # the policy drives the legs: a trajectory worth comparing
    # float32 against MuJoCo's float64 at 4 Newton iterations: round-off grows through the foot
    # contacts (measured: obs 1e-6 -> 3e-2, qpos 1e-6 -> 1e-3 over the 25 steps), so the first 0.2 s
    # are held tight and the whole 0.5 s to the same trajectory
    early = STEPS * 2 // 5
    assert max(obs_err[:early]) < 1e-3 and max(q_err[:early]) < 1e-4, (obs_err, q_err)
    assert max(act_err[:early]) < 1e-3, act_err
    assert max(q_err) < 5e-3, q_err


def test_the_script_runs_without_jax(policy: tuple[Any, pathlib.Path]) -> None:
    _, onnx_path = policy
    code = ("import runpy, sys; sys.modules['jax'] = None; "  # any `import jax` now raises
            f"sys.argv = ['sim2sim', '--mjcf', {str(SCENE)!r}, '--onnx', {str(onnx_path)!r}, "
            "'--torso', 'trunk', '--seconds', '1', '--command', '0.5', '0', '0']; "
            f"runpy.run_path({str(SIM2SIM)!r}, run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    assert row["command"] == [0.5, 0.0, 0.0] and row["seconds"] <= 1.0 + 1e-9
    assert row["steps"] >= 1 and row["mean_abs_velocity_error"] >= 0.0
