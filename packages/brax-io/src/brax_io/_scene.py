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


_DEFAULT_RGBA = np.array([0.5, 0.5, 0.5, 1.0], np.float32)  # MuJoCo's geom rgba when none is given
_MESH = int(mujoco.mjtGeom.mjGEOM_MESH)
_HFIELD = int(mujoco.mjtGeom.mjGEOM_HFIELD)


def _rgba(sys: Any, model: Any) -> np.ndarray:
    """(ngeom, 4) colours as MuJoCo draws them: a geom with a material and the default rgba takes the
    material's rgba; any other geom its own."""
    rgba = np.asarray(sys.geom_rgba, np.float32).copy()
    if model is None or model.nmat == 0:
        return rgba
    matid = np.asarray(model.geom_matid)
    default = np.all(np.isclose(rgba, _DEFAULT_RGBA), axis=-1)
    use = (matid >= 0) & default
    rgba[use] = np.asarray(model.mat_rgba, np.float32)[matid[use]]
    return rgba


def _mesh(sys: Any, model: Any, i: int) -> dict[str, Any]:
    """Mesh i as MuJoCo compiled it, flat: vertices (geom frame; the System's `mesh_vert` leaf, which
    may be randomized), triangles (vertex indices), normals and each triangle corner's normal index."""
    va, nv = int(model.mesh_vertadr[i]), int(model.mesh_vertnum[i])
    fa, nf = int(model.mesh_faceadr[i]), int(model.mesh_facenum[i])
    na, nn = int(model.mesh_normaladr[i]), int(model.mesh_normalnum[i])
    return {
        "name": mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_MESH, i) or "",
        "vert": _f(np.asarray(getattr(sys, "mesh_vert", model.mesh_vert))[va : va + nv].reshape(-1), 5),
        "face": np.asarray(model.mesh_face)[fa : fa + nf].reshape(-1).astype(int).tolist(),
        "normal": _f(np.asarray(model.mesh_normal)[na : na + nn].reshape(-1), 4),
        "facenormal": np.asarray(model.mesh_facenormal)[fa : fa + nf].reshape(-1).astype(int).tolist(),
    }


def mesh_buffers(mesh: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vertex positions (n, 3), normals (n, 3) and triangle indices (3 nface,) for drawing a mesh
    entry of `describe_system`: one vertex per distinct (position, normal) pair MuJoCo's faces use."""
    vert = np.asarray(mesh["vert"], np.float32).reshape(-1, 3)
    normal = np.asarray(mesh["normal"], np.float32).reshape(-1, 3)
    face = np.asarray(mesh["face"], np.int64)
    fnrm = np.asarray(mesh["facenormal"], np.int64)
    keys, idx = np.unique(face * max(len(normal), 1) + fnrm, return_inverse=True)
    return vert[keys // max(len(normal), 1)], normal[keys % max(len(normal), 1)], idx.astype(np.uint32)


def _hfield(sys: Any, model: Any, i: int) -> dict[str, Any]:
    """Grid size, `hfield_size` (x, y half extents, top elevation, base depth) and the row-major
    elevations in [0, 1] of height field i; the System's leaves when it has them (randomized)."""
    nrow, ncol = int(model.hfield_nrow[i]), int(model.hfield_ncol[i])
    adr = int(model.hfield_adr[i])
    data = np.asarray(getattr(sys, "hfield_data", model.hfield_data))[adr : adr + nrow * ncol]
    size = np.asarray(getattr(sys, "hfield_size", model.hfield_size))[i]
    return {
        "name": mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_HFIELD, i) or "",
        "nrow": nrow,
        "ncol": ncol,
        "size": _f(size),
        "data": _f(data, 5),
    }


def describe_system(sys: Any, dt: float | None = None) -> dict[str, Any]:
    """A JSON-able description of a system's bodies and geoms, with the meshes and height fields its
    geoms use (from the `mujoco.MjModel` the System was loaded from)."""
    ngeom = int(sys.ngeom)
    names = tuple(getattr(sys, "geom_names", ("",) * ngeom))
    body_names = tuple(getattr(sys, "body_names", ()))
    nbody = int(getattr(sys, "nbody", len(body_names)))
    if len(body_names) != nbody:
        body_names = ("",) * nbody
    model = getattr(sys, "mj_model", None)
    size = np.asarray(sys.geom_size)
    pos = np.asarray(sys.geom_pos)
    quat = np.asarray(sys.geom_quat)
    rgba = _rgba(sys, model)
    groups = tuple(getattr(sys, "geom_group", (0,) * ngeom))
    meshes: dict[int, int] = {}
    hfields: dict[int, int] = {}
    out_meshes: list[dict[str, Any]] = []
    out_hfields: list[dict[str, Any]] = []
    geoms = []
    for i in range(ngeom):
        code = int(sys.geom_type[i])
        geom = {
            "name": names[i] if i < len(names) else "",
            "type": GEOM_TYPES.get(code, f"unknown:{code}"),
            "body": int(sys.geom_bodyid[i]),
            "size": _f(size[i]),
            "pos": _f(pos[i]),
            "quat": _f(quat[i]),
            "rgba": _f(rgba[i], 4),
            "group": int(groups[i]),
        }
        dataid = int(model.geom_dataid[i]) if model is not None and code in (_MESH, _HFIELD) else -1
        if dataid >= 0 and code == _MESH:
            if dataid not in meshes:
                meshes[dataid] = len(out_meshes)
                out_meshes.append(_mesh(sys, model, dataid))
            geom["mesh"] = meshes[dataid]
        elif dataid >= 0 and code == _HFIELD:
            if dataid not in hfields:
                hfields[dataid] = len(out_hfields)
                out_hfields.append(_hfield(sys, model, dataid))
            geom["hfield"] = hfields[dataid]
        geoms.append(geom)
    return {
        "dt": float(f"{float(np.asarray(sys.dt if dt is None else dt)):.7g}"),
        "bodies": [{"name": n} for n in body_names],
        "geoms": geoms,
        "meshes": out_meshes,
        "hfields": out_hfields,
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
