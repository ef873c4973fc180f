"""Plain-JSON serialization of a system's geometry and a trajectory of body poses.

Schema (`format` "brax-io.trajectory", `version` 2; version 1 had no groups, meshes or hfields)::

    {
      "format": "brax-io.trajectory", "version": 2,
      "dt": 0.01,                      # seconds between frames
      "bodies": [{"name": "world"}, {"name": "pole"}, ...],      # body 0 is the world
      "geoms": [{"name": "floor", "type": "plane",   # plane|hfield|sphere|capsule|ellipsoid|
                                                    # cylinder|box|mesh (MuJoCo's geom types)
                 "body": 0,                          # index into "bodies"
                 "size": [sx, sy, sz],               # MuJoCo geom_size
                 "pos": [x, y, z], "quat": [w, x, y, z],  # pose in the body frame
                 "rgba": [r, g, b, a],               # as MuJoCo draws it (material colour
                                                     # when the geom keeps the default rgba)
                 "group": 0,                         # MuJoCo geom group; viewers show 0-2
                 "mesh": 0,                          # mesh geoms: index into "meshes"
                 "hfield": 0}, ...],                 # hfield geoms: index into "hfields"
      "meshes": [{"name": "hull", "vert": [x, y, z, ...],   # geom frame, as compiled by MuJoCo
                  "face": [i, j, k, ...]}, ...],            # triangles, 0-based vertex indices
      "hfields": [{"name": "terrain", "nrow": R, "ncol": C,
                   "size": [rx, ry, top, base],             # MuJoCo hfield_size
                   "data": [e, ...]}, ...],                 # R*C elevations in [0, 1], row-major;
                                                            # row i at y = ry(2i/(R-1) - 1), column
                                                            # j at x = rx(2j/(C-1) - 1), z = e * top
      "trajectory": {"num_frames": T,
                     "pos": [[[x, y, z] per body] per frame],      # world frame
                     "rot": [[[w, x, y, z] per body] per frame]}
    }
"""

from __future__ import annotations

import json as _json
from typing import Any

import numpy as np

from brax_io import _scene

__all__ = ["FORMAT", "VERSION", "dumps", "loads"]

FORMAT = "brax-io.trajectory"
"""The `format` tag of documents written by `dumps`."""
VERSION = 2
"""The schema version written by `dumps`."""


def dumps(sys: Any, states: Any, dt: float | None = None) -> str:
    """Serialize a system and a trajectory of states (list or time-batched) to a JSON string."""
    desc = _scene.describe_system(sys, dt)
    pos, rot = _scene.trajectory(states)
    _scene.check_frames(desc, pos)
    doc = {
        "format": FORMAT,
        "version": VERSION,
        **desc,
        "trajectory": {
            "num_frames": int(pos.shape[0]),
            "pos": np.round(pos.astype(np.float64), 6).tolist(),
            "rot": np.round(rot.astype(np.float64), 6).tolist(),
        },
    }
    return _json.dumps(doc, separators=(",", ":"))


def loads(s: str | bytes) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Parse `dumps` output into (description without trajectory, {"pos", "rot"} float32 arrays)."""
    doc = _json.loads(s)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} document")
    if int(doc.get("version", 0)) > VERSION:
        raise ValueError(f"{FORMAT} version {doc['version']} is newer than supported ({VERSION})")
    traj = doc.pop("trajectory")
    nbody = len(doc["bodies"])
    arrays = {
        "pos": np.asarray(traj["pos"], dtype=np.float32).reshape(-1, nbody, 3),
        "rot": np.asarray(traj["rot"], dtype=np.float32).reshape(-1, nbody, 4),
    }
    if arrays["pos"].shape[0] != int(traj["num_frames"]):
        raise ValueError("trajectory num_frames does not match the data")
    return doc, arrays
