"""A self-contained, offline HTML page with a WebGL 3D replay of a trajectory.

The page carries everything inline: a small hand-written WebGL renderer, the geoms of the system
(MJCF colours included) and the trajectory as base64 float32 body poses. Controls: play/pause
(or the space bar), a speed selector, a time scrubber stepping by `dt`; drag to orbit, right-drag
or shift-drag to pan, wheel to zoom, double-click to reset the camera. Mesh and height-field geoms
are not drawn (the system carries no vertex data for them).
"""

from __future__ import annotations

import base64
import itertools
import json as _json
import os
from importlib import resources
from typing import Any

import numpy as np

from brax_io import _atomic, _scene

__all__ = ["render", "save"]

_ids = itertools.count()

_CSS = """
.brax-viewer{font:13px system-ui,sans-serif;color:#222;position:relative;max-width:100%}
.brax-viewer canvas{display:block;width:100%;outline:none;cursor:grab;background:#eef2f6}
.brax-viewer .bv-bar{display:flex;gap:8px;align-items:center;padding:4px 0}
.brax-viewer .bv-scrub{flex:1}
.brax-viewer .bv-time{font-variant-numeric:tabular-nums;min-width:9em;text-align:right}
.brax-viewer .bv-msg{display:none;position:absolute;left:8px;top:8px;padding:6px 8px;
 background:#fee;border:1px solid #c33;color:#900}
"""


def _script_json(obj: Any) -> str:
    # Safe to embed in <script>: no "</script>" or "<!--" can appear.
    return _json.dumps(obj, separators=(",", ":")).replace("<", "\\u003c")


def _b64(values: Any, dtype: str) -> str:
    """Base64 of a flat little-endian array: meshes and height fields travel as binary, not JSON numbers."""
    return base64.b64encode(np.asarray(values, dtype=dtype).tobytes()).decode("ascii")


def _mesh_payload(mesh: dict[str, Any]) -> dict[str, str]:
    """A mesh entry as the viewer draws it: positions, normals and uint32 triangle indices."""
    pos, nrm, idx = _scene.mesh_buffers(mesh)
    return {"pos": _b64(pos, "<f4"), "nrm": _b64(nrm, "<f4"), "idx": _b64(idx, "<u4")}


def render(sys: Any, states: Any, height: int = 480, colab: bool = False, dt: float | None = None) -> str:
    """HTML for a 3D replay of `states` (list or time-batched); `colab=True` gives a fragment."""
    desc = _scene.describe_system(sys, dt)
    pos, rot = _scene.trajectory(states)
    _scene.check_frames(desc, pos)
    frames = np.concatenate([pos, rot], axis=-1).astype("<f4")
    data = {
        "dt": desc["dt"],
        "num_frames": int(frames.shape[0]),
        "bodies": [b["name"] for b in desc["bodies"]],
        "geoms": desc["geoms"],
        "meshes": [_mesh_payload(m) for m in desc["meshes"]],
        "hfields": [
            {"nrow": h["nrow"], "ncol": h["ncol"], "size": h["size"], "data": _b64(h["data"], "<f4")}
            for h in desc["hfields"]
        ],
        "frames": base64.b64encode(frames.tobytes()).decode("ascii"),
    }
    uid = f"brax-viewer-{os.getpid()}-{next(_ids)}"
    speeds = "".join(
        f'<option value="{s}"{" selected" if s == 1 else ""}>{s}x</option>' for s in (0.1, 0.25, 0.5, 1, 2, 4)
    )
    viewer_js = resources.files("brax_io").joinpath("viewer.js").read_text(encoding="utf-8")
    fragment = (
        f"<style>{_CSS}</style>\n"
        f'<div class="brax-viewer" id="{uid}" data-page="{0 if colab else 1}">\n'
        f'<canvas tabindex="0" style="height:{int(height)}px"></canvas>\n'
        '<div class="bv-msg"></div>\n'
        '<div class="bv-bar"><button class="bv-play" type="button">Play</button>'
        f'<select class="bv-speed" title="playback speed">{speeds}</select>'
        f'<input class="bv-scrub" type="range" min="0" max="0" step="1" value="0" '
        f'title="time (steps of {desc["dt"]:g} s)">'
        '<span class="bv-time"></span></div>\n'
        "</div>\n"
        f"<script>\n{viewer_js}\n"
        f'braxViewer(document.getElementById("{uid}"), {_script_json(data)});\n</script>\n'
    )
    if colab:
        return fragment
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        "<title>brax trajectory</title>"
        "<style>body{margin:8px;background:#fff}</style></head>\n<body>\n"
        f"{fragment}</body></html>\n"
    )


def save(
    path: str | os.PathLike[str], sys: Any, states: Any, height: int = 480, dt: float | None = None
) -> None:
    """Write `render(sys, states)` to `path` (atomically replacing any existing file)."""
    page = render(sys, states, height=height, dt=dt)
    _atomic.write_atomic(path, lambda f: f.write(page.encode("utf-8")))
