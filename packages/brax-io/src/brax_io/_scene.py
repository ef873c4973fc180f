"""Shared extraction of a renderable scene (geoms, bodies) and a trajectory from brax-physics objects."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mujoco
import numpy as np

GEOM_TYPES: dict[int, str] = {
    int(mujoco.mjtGeom.mjGEOM_PLANE): "plane",
    int(mujoco.mjtGeom.mjGEOM_HFIELD): "hfield",
    int(mujoco.mjtGeom.mjGEOM_SPHERE): "sphere",
    int(mujoco.mjtGeom.mjGEOM_CAPSULE): "capsule",
    int(mujoco.mjtGeom.mjGEOM_ELLIPSOID): "ellipsoid",
    int(mujoco.mjtGeom.mjGEOM_CYLINDER): "cylinder",
    int(mujoco.mjtGeom.mjGEOM_BOX): "box",
    int(mujoco.mjtGeom.mjGEOM_MESH): "mesh",
}
"""MuJoCo `mjtGeom` codes to the names used in the JSON schema and the viewer."""


def _f(a: Any, decimals: int = 6) -> list[Any]:
    out: list[Any] = np.round(np.asarray(a, dtype=np.float64), decimals).tolist()
    return out


def describe_system(sys: Any, dt: float | None = None) -> dict[str, Any]:
    """A JSON-able description of a system's bodies and geoms."""
    ngeom = int(sys.ngeom)
    names = tuple(getattr(sys, "geom_names", ("",) * ngeom))
    body_names = tuple(getattr(sys, "body_names", ()))
    nbody = int(getattr(sys, "nbody", len(body_names)))
    if len(body_names) != nbody:
        body_names = ("",) * nbody
    size = np.asarray(sys.geom_size)
    pos = np.asarray(sys.geom_pos)
    quat = np.asarray(sys.geom_quat)
    rgba = np.asarray(sys.geom_rgba)
    geoms = []
    for i in range(ngeom):
        code = int(sys.geom_type[i])
        geoms.append(
            {
                "name": names[i] if i < len(names) else "",
                "type": GEOM_TYPES.get(code, f"unknown:{code}"),
                "body": int(sys.geom_bodyid[i]),
                "size": _f(size[i]),
                "pos": _f(pos[i]),
                "quat": _f(quat[i]),
                "rgba": _f(rgba[i], 4),
            }
        )
    return {
        "dt": float(f"{float(np.asarray(sys.dt if dt is None else dt)):.7g}"),
        "bodies": [{"name": n} for n in body_names],
        "geoms": geoms,
    }


def _pipeline_state(state: Any) -> Any:
    # brax_envs.State wraps the physics state; accept either.
    inner = getattr(state, "pipeline_state", None)
    return state if inner is None else inner


def trajectory(states: Any) -> tuple[np.ndarray, np.ndarray]:
    """Body positions (T, nbody, 3) and quaternions (T, nbody, 4) from states.

    `states` is a sequence of states, one state batched along a leading time axis, or a single
    state (one frame).
    """
    if isinstance(states, Sequence) and not hasattr(states, "x"):
        if not states:
            raise ValueError("states is empty: need at least one frame")
        frames = [_pipeline_state(s) for s in states]
        pos = np.stack([np.asarray(s.x.pos) for s in frames])
        rot = np.stack([np.asarray(s.x.rot) for s in frames])
    else:
        s = _pipeline_state(states)
        pos = np.asarray(s.x.pos)
        rot = np.asarray(s.x.rot)
        if pos.ndim == 2:
            pos, rot = pos[None], rot[None]
    if pos.ndim != 3 or pos.shape[-1] != 3 or rot.shape != (*pos.shape[:2], 4):
        raise ValueError(
            f"states must give x.pos of shape (T, nbody, 3) and x.rot of shape (T, nbody, 4); "
            f"got {pos.shape} and {rot.shape} (a batch of environments is not a trajectory: "
            "select one environment first)"
        )
    return pos.astype(np.float32), rot.astype(np.float32)


def check_frames(desc: dict[str, Any], pos: np.ndarray) -> None:
    """Raise if the trajectory's body count does not match the system."""
    nbody = len(desc["bodies"])
    if pos.shape[1] != nbody:
        raise ValueError(f"states have {pos.shape[1]} bodies per frame but the system has {nbody}")
