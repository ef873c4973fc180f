"""Shared helpers of the standard suite: the MJCF assets, reset noise, action scaling, com observations."""

from __future__ import annotations

import functools
import importlib.resources
from typing import Any

import brax_physics
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from brax_math import cross


@functools.cache
def asset_xml(name: str) -> str:
    """Text of `assets/<name>.xml`."""
    return (importlib.resources.files("brax_envs.envs") / "assets" / f"{name}.xml").read_text()


def mj_model(name: str) -> Any:
    """`assets/<name>.xml` compiled by MuJoCo (a fresh `mujoco.MjModel`)."""
    return mujoco.MjModel.from_xml_string(asset_xml(name))


def load_system(name: str) -> brax_physics.System:
    """`assets/<name>.xml` as a `brax_physics.System`."""
    return brax_physics.load_mjcf(asset_xml(name))


@functools.cache
def _home(name: str) -> tuple[float, ...]:
    m = mj_model(name)
    key = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, "home")
    q = m.key_qpos[key] if key >= 0 else m.qpos0
    return tuple(float(v) for v in q)


def home_qpos(name: str) -> jax.Array:
    """(nq,) float32 initial pose: the asset's keyframe 'home' if it has one, else qpos0."""
    return jnp.asarray(np.asarray(_home(name), np.float32))


def uniform(key: jax.Array, size: int, scale: float) -> jax.Array:
    """(size,) float32 uniform in [-scale, scale]."""
    return jax.random.uniform(key, (size,), jnp.float32, -scale, scale)


def normalize_free_quat(sys: brax_physics.System, q: jax.Array) -> jax.Array:
    """`q` with the quaternion of every free joint renormalized (after adding position noise)."""
    for j, t in enumerate(sys.jnt_type):
        if t == mujoco.mjtJoint.mjJNT_FREE:  # qpos (x, y, z, qw, qx, qy, qz)
            a = sys.jnt_qposadr[j] + 3
            quat = q[a:a + 4]
            q = q.at[a:a + 4].set(quat / jnp.linalg.norm(quat))
    return q


def scale_action(sys: brax_physics.System, action: jax.Array) -> jax.Array:
    """Map `action` in [-1, 1] linearly onto the actuators' ctrlrange (as Google Brax's humanoid)."""
    lo, hi = sys.actuator_ctrlrange[:, 0], sys.actuator_ctrlrange[:, 1]
    return (action + 1.0) * (hi - lo) * 0.5 + lo


def com_velocity(state: brax_physics.State) -> jax.Array:
    """(nbody, 6) MuJoCo `cvel`: [angular; linear] velocity of each body at its subtree-root com."""
    ang, vel = state.xd.ang, state.xd.vel
    # Every body's tree root is body 1 (one floating tree, as the humanoid); the world's cvel is 0
    # whatever point it is taken at, since its velocities are 0.
    root_com = jnp.broadcast_to(state.subtree_com[1][None, :], state.x.pos.shape)
    return jnp.concatenate([ang, vel + cross(ang, root_com - state.x.pos)], axis=-1)


def com_observation(state: brax_physics.State) -> list[jax.Array]:
    """MuJoCo's `cinert[1:]` and `cvel[1:]`, flattened (the humanoid observation's body terms)."""
    return [state.cinert[1:].ravel(), com_velocity(state)[1:].ravel()]
