"""Standard locomotion models (brax-envs MJCF assets) simulated by brax-physics vs MuJoCo C.

Zero control from the initial pose for 1 s: the torso height tracks MuJoCo within 1 cm at every
step and the number of active contacts (rows-producing contacts; MuJoCo's gap-band contacts are
excluded) agrees. The XML files are read by path: brax-physics must not import brax-envs.
"""

from __future__ import annotations

from pathlib import Path

import brax_physics as bp
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

ASSETS = Path(__file__).resolve().parents[1] / "packages/brax-envs/src/brax_envs/envs/assets"
SECONDS = 1.0
# model -> qpos index of the torso height (free joint z, or the planar model's rootz slide)
MODELS = {"ant": 2, "humanoid": 2, "halfcheetah": 1}

pytestmark = pytest.mark.slow


def _rollout(sys: bp.System, state: bp.State, n: int) -> tuple[jax.Array, jax.Array]:
    act = jnp.zeros(sys.nu, state.q.dtype)

    def body(s: bp.State, _: None) -> tuple[bp.State, tuple[jax.Array, jax.Array]]:
        # record the state the step starts from: its contacts are those MuJoCo's mj_forward sees
        ncon = jnp.sum(s.contact.active.astype(jnp.int32))
        return bp.step(sys, s, act), (s.q, ncon)

    return jax.lax.scan(body, state, None, length=n)[1]


rollout_jit = jax.jit(_rollout, static_argnums=2)
init_jit = jax.jit(bp.init)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_zero_control_tracks_mujoco(name: str) -> None:
    path = ASSETS / f"{name}.xml"
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    sys = bp.load_mjcf(path)
    n = round(SECONDS / m.opt.timestep)
    qs, ncon = rollout_jit(sys, init_jit(sys), n)

    mj_q, mj_ncon = [], []
    for _ in range(n):
        mj_q.append(d.qpos.copy())
        mujoco.mj_forward(m, d)
        mj_ncon.append(sum(1 for i in range(d.ncon) if not d.contact[i].exclude))
        mujoco.mj_step(m, d)
    z = MODELS[name]
    height = np.asarray(qs)[:, z]
    mj_height = np.array(mj_q)[:, z]
    assert np.max(np.abs(height - mj_height)) < 0.01, np.max(np.abs(height - mj_height))
    np.testing.assert_array_equal(np.asarray(ncon), np.array(mj_ncon))
    assert max(mj_ncon) > 0  # the model does touch the floor
