"""Offscreen RGB images of brax-physics states through MuJoCo's OpenGL renderer; GIF, MP4 and PNG files.

`render_array` draws what MuJoCo itself would draw (materials, lights, cameras, meshes): it needs the
MuJoCo model the `System` was compiled from: `sys.mj_model`, kept by `brax_physics.load_mjcf`, or
`model=` (the MJCF path or XML string, or the `mujoco.MjModel`) for a System built otherwise. The
`System`'s geometry (body and geom poses, sizes, colours) overrides the model's, so a randomized
system renders as simulated.

OpenGL backend: `MUJOCO_GL` when set (`egl`, `osmesa` or `glfw`); otherwise EGL when JAX sees a GPU
and libEGL is installed, else OSMesa (software, CPU; Debian: `apt-get install libosmesa6`). PyOpenGL
binds one platform per process, so the first backend used in a process is the only one it can use.
"""

from __future__ import annotations

import copy
import ctypes.util
import importlib
import io
import math
import os
import pathlib
import shutil
import tempfile
import threading
from collections.abc import Callable, Sequence
from typing import IO, Any

import brax_physics
import jax
import mujoco
import numpy as np
import numpy.typing as npt
from PIL import Image

from brax_io import _atomic, _scene

__all__ = ["RenderingUnavailableError", "backend", "render_array", "save_image", "save_video"]

VIDEO_SUFFIXES = (".gif", ".mp4")
"""File suffixes `save_video` writes."""

_DISABLED = ("disable", "disabled", "off", "false", "0")
_GLFW_ALIASES = ("glfw", "glx", "enable", "enabled", "on", "true", "1")  # what mujoco maps to GLFW
_FIXES = {
    "osmesa": "install Mesa's off-screen OpenGL library (Debian/Ubuntu: apt-get install libosmesa6, "
    "or run tools/ci/system-deps.sh as root), or set MUJOCO_GL=egl on a machine with a GPU",
    "egl": "install the GPU driver's EGL library (Debian/Ubuntu: apt-get install libegl1, plus the "
    "NVIDIA driver's libEGL_nvidia), choose a device with MUJOCO_EGL_DEVICE_ID, or set "
    "MUJOCO_GL=osmesa to render on the CPU",
    "glfw": "GLFW needs a display (set DISPLAY or run under xvfb-run); without one set MUJOCO_GL=egl "
    "(GPU) or MUJOCO_GL=osmesa (CPU)",
}
# One render at a time: a context is current on one thread, and callers share the backend module.
_GL_LOCK = threading.Lock()
# System fields copied into the render model: what `mj_kinematics` and the scene read for the
# placement, size and colour of geoms, so a randomized System renders as it was simulated.
_SYNCED_FIELDS = (
    "body_pos",
    "body_quat",
    "jnt_pos",
    "jnt_axis",
    "geom_pos",
    "geom_quat",
    "geom_size",
    "geom_rgba",
    # meshes and height fields, drawn from the System's (possibly randomized) leaves
    "mesh_vert",
    "hfield_size",
    "hfield_data",
)
_MAX_SCENE_GEOMS = 10_000


class RenderingUnavailableError(RuntimeError):
    """No OpenGL context for offscreen rendering could be made; the message names the backend and the fix."""


def _failure(name: str, reason: str, what: str, err: BaseException) -> RenderingUnavailableError:
    platform = os.environ.get("PYOPENGL_PLATFORM", "").strip().lower()
    hint = _FIXES[name]
    if platform and platform != name and name != "glfw":
        # mujoco.egl / mujoco.osmesa refuse to load once PyOpenGL is bound to another platform.
        hint = (
            f"PyOpenGL is already bound to {platform!r} in this process (PYOPENGL_PLATFORM); "
            f"set MUJOCO_GL before starting Python. Otherwise: {hint}"
        )
    return RenderingUnavailableError(
        f"cannot {what} for offscreen rendering with MUJOCO_GL backend {name!r} "
        f"(chosen because {reason}): {type(err).__name__}: {err}. Fix: {hint}"
    )


class _Backend:
    """A loaded OpenGL backend: its name, why it was chosen, and its context class."""

    def __init__(self, name: str, reason: str, context: Callable[[int, int], Any]) -> None:
        self.name = name
        self.reason = reason
        self.context = context

    def failure(self, what: str, err: BaseException) -> RenderingUnavailableError:
        return _failure(self.name, self.reason, what, err)


_loaded: dict[str, _Backend] = {}


def _choose() -> tuple[str, str]:
    """The backend name and the reason for it, from the environment and the visible devices."""
    requested = os.environ.get("MUJOCO_GL", "").strip().lower()
    if requested in _DISABLED:
        raise RenderingUnavailableError(
            f"offscreen rendering is disabled by MUJOCO_GL={requested!r}; unset MUJOCO_GL or set it to "
            "egl (GPU), osmesa (CPU) or glfw (with a display)"
        )
    if requested in _GLFW_ALIASES:
        return "glfw", f"MUJOCO_GL={requested}"
    if requested in ("egl", "osmesa"):
        return requested, f"MUJOCO_GL={requested}"
    if requested:
        raise RenderingUnavailableError(
            f"MUJOCO_GL={requested!r} is not a backend brax_io.image can use on this system: set it to egl "
            "(GPU), osmesa (CPU) or glfw (with a display), or unset it to choose automatically"
        )
    platform = os.environ.get("PYOPENGL_PLATFORM", "").strip().lower()
    if platform in ("egl", "osmesa"):
        return platform, f"PYOPENGL_PLATFORM={platform} is already set and PyOpenGL binds one per process"
    if jax.default_backend() == "gpu":
        if ctypes.util.find_library("EGL"):
            return "egl", "MUJOCO_GL is unset and JAX sees a GPU"
        return "osmesa", "MUJOCO_GL is unset and JAX sees a GPU but no libEGL is installed"
    return "osmesa", "MUJOCO_GL is unset and JAX sees no GPU"


def _backend() -> _Backend:
    name, reason = _choose()
    found = _loaded.get(name)
    if found is not None:
        return found
    try:
        # Imported here rather than used through mujoco.Renderer: mujoco fixes its context class
        # from MUJOCO_GL during `import mujoco`, before anything could be chosen for the user.
        module = importlib.import_module(f"mujoco.{name}")
    except Exception as err:  # ImportError, or OSError/RuntimeError while the library initializes
        raise _failure(name, reason, "load the OpenGL library", err) from err
    found = _loaded[name] = _Backend(name, reason, module.GLContext)
    return found


def backend() -> str:
    """Create a tiny OpenGL context and return the backend name ('egl', 'osmesa' or 'glfw') in use."""
    chosen = _backend()
    with _GL_LOCK:
        ctx = _make_context(chosen, 1, 1)
        ctx.free()
    return chosen.name


def _make_context(chosen: _Backend, width: int, height: int) -> Any:
    try:
        ctx = chosen.context(width, height)
    except Exception as err:
        raise chosen.failure("create an OpenGL context", err) from err
    try:
        ctx.make_current()
    except Exception as err:
        ctx.free()
        raise chosen.failure("make the OpenGL context current", err) from err
    return ctx


def _load_model(model: Any) -> Any:
    if isinstance(model, mujoco.MjModel):
        # A copy: the System's geometry and the buffer size are written into it.
        return copy.deepcopy(model)
    if isinstance(model, str) and model.lstrip().startswith("<"):
        return mujoco.MjModel.from_xml_string(model)
    if isinstance(model, str | os.PathLike):
        return mujoco.MjModel.from_xml_path(os.fspath(model))
    raise TypeError(
        f"model must be a mujoco.MjModel, an MJCF XML string or a path to an MJCF file; "
        f"got {type(model).__name__}"
    )


def _render_model(sys: brax_physics.System, model: Any) -> Any:
    if model is None:
        model = sys.mj_model  # kept by brax_physics.load_mjcf / from_mjmodel
    if model is None:
        raise TypeError(
            "render_array needs the MuJoCo model sys was compiled from: pass model= (the MJCF path or XML "
            "string given to brax_physics.load_mjcf, or the mujoco.MjModel given to from_mjmodel); a "
            "brax_physics.System keeps no materials, lights, cameras or meshes to draw"
        )
    m = _load_model(model)
    for size in ("nq", "nbody", "njnt", "ngeom"):
        if int(getattr(m, size)) != int(getattr(sys, size)):
            raise ValueError(
                f"model does not match sys: the model has {size}={getattr(m, size)}, "
                f"sys has {size}={getattr(sys, size)} (pass the MJCF sys was loaded from)"
            )
    for field in _SYNCED_FIELDS:
        if not hasattr(sys, field):
            continue  # a System from before the field existed
        value = np.asarray(getattr(sys, field))
        target = getattr(m, field)
        if value.shape != target.shape:
            raise ValueError(
                f"sys.{field} has shape {value.shape} but the model's is {target.shape}; a batched System "
                "(e.g. from domain randomization) must be indexed to one system first"
            )
        target[...] = value
    return m


def _positions(states: Any, nq: int) -> tuple[npt.NDArray[np.float64], bool]:
    """Generalized positions (T, nq) of the frames, and whether `states` was a single state."""

    def q_of(state: Any) -> Any:
        inner = _scene._pipeline_state(state)
        if not hasattr(inner, "q"):
            raise TypeError(
                "states must be brax_physics.State or brax_envs.State objects (or a sequence of them); "
                f"got {type(inner).__name__}"
            )
        return inner.q

    if isinstance(states, Sequence) and not hasattr(states, "q") and not hasattr(states, "pipeline_state"):
        if not states:
            raise ValueError("states is empty: need at least one frame")
        qs = [np.asarray(q_of(s), dtype=np.float64) for s in states]
        if any(q.ndim != 1 for q in qs):
            shapes = sorted({q.shape for q in qs})
            raise ValueError(
                f"each state in a sequence must hold one configuration q of shape ({nq},); got {shapes}"
            )
        q = np.stack(qs)
        single = False
    else:
        q = np.asarray(q_of(states), dtype=np.float64)
        single = q.ndim == 1
        if single:
            q = q[None]
    if q.ndim != 2 or q.shape[1] != nq:
        raise ValueError(
            f"states must give q of shape ({nq},) or (T, {nq}); got {q.shape} (a batch of environments "
            "is not a trajectory: select one environment first)"
        )
    bad = np.flatnonzero(~np.all(np.isfinite(q), axis=1))
    if bad.size:
        raise ValueError(f"frame {int(bad[0])} has a non-finite q; render the frames before it")
    return q, single


def _camera(m: Any, camera: Any) -> Any:
    if isinstance(camera, mujoco.MjvCamera):
        return camera
    cam = mujoco.MjvCamera()
    if camera is None or (
        isinstance(camera, int | np.integer) and not isinstance(camera, bool) and camera == -1
    ):
        mujoco.mjv_defaultFreeCamera(m, cam)
        if camera is None and m.nbody > 1:
            # Follow the first body (the root of the first tree, e.g. a robot's torso) so a walking
            # robot stays in view; distance and angles stay those of MuJoCo's default free camera.
            cam.type = mujoco.mjtCamera.mjCAMERA_TRACKING
            cam.trackbodyid = 1
        return cam
    names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_CAMERA, i) or f"#{i}" for i in range(m.ncam)]
    if isinstance(camera, str):
        camid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_CAMERA, camera)
        if camid < 0:
            raise ValueError(f"camera {camera!r} is not in the model; its cameras are: {names or 'none'}")
    elif isinstance(camera, int | np.integer) and not isinstance(camera, bool):
        camid = int(camera)
        if not 0 <= camid < m.ncam:
            raise ValueError(
                f"camera id {camid} is out of range: the model has {m.ncam} cameras {names} "
                "(-1 or None for a free camera)"
            )
    else:
        raise TypeError(
            "camera must be None, a camera name, a camera id or a mujoco.MjvCamera; "
            f"got {type(camera).__name__}"
        )
    cam.type = mujoco.mjtCamera.mjCAMERA_FIXED
    cam.fixedcamid = camid
    return cam


def render_array(
    sys: brax_physics.System,
    states: Any,
    width: int = 320,
    height: int = 240,
    camera: str | int | mujoco.MjvCamera | None = None,
    *,
    model: mujoco.MjModel | str | os.PathLike[str] | None = None,
) -> npt.NDArray[np.uint8]:
    """RGB uint8 frames of `states`: (height, width, 3) for one state, (T, height, width, 3) for several.

    `states`: one `brax_physics.State` or `brax_envs.State`, a sequence of them, or one state batched
    along a leading time axis (only `q` is read). `camera`: None (a free camera following body 1), a
    camera name or id from the model, or a `mujoco.MjvCamera`. `model`: the MJCF path, XML string or
    `mujoco.MjModel` that `sys` was compiled from (default: `sys.mj_model`). Raises
    `RenderingUnavailableError` when no OpenGL context can be created, naming the backend tried and
    how to fix it.
    """
    for label, value in (("width", width), ("height", height)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise ValueError(f"{label} must be a positive integer; got {value!r}")
    width, height = int(width), int(height)
    m = _render_model(sys, model)
    # The offscreen framebuffer is sized from these when the MuJoCo render context is made.
    m.vis.global_.offwidth = max(int(m.vis.global_.offwidth), width)
    m.vis.global_.offheight = max(int(m.vis.global_.offheight), height)
    qs, single = _positions(states, int(m.nq))
    cam = _camera(m, camera)
    chosen = _backend()
    data = mujoco.MjData(m)
    opt = mujoco.MjvOption()
    pert = mujoco.MjvPerturb()
    scene = mujoco.MjvScene(m, maxgeom=_MAX_SCENE_GEOMS)
    rect = mujoco.MjrRect(0, 0, width, height)
    frames = np.empty((qs.shape[0], height, width, 3), dtype=np.uint8)
    pixels = np.empty((height, width, 3), dtype=np.uint8)
    with _GL_LOCK:
        ctx = _make_context(chosen, width, height)
        try:
            try:
                con = mujoco.MjrContext(m, mujoco.mjtFontScale.mjFONTSCALE_100)
            except Exception as err:  # mujoco.FatalError when the context has no usable OpenGL
                raise chosen.failure("initialize MuJoCo's OpenGL renderer", err) from err
            try:
                mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, con)
                for i, q in enumerate(qs):
                    data.qpos[:] = q
                    # Poses, centres of mass (tracking camera) and camera/light frames; no dynamics.
                    mujoco.mj_kinematics(m, data)
                    mujoco.mj_comPos(m, data)
                    mujoco.mj_camlight(m, data)
                    mujoco.mjv_updateScene(m, data, opt, pert, cam, mujoco.mjtCatBit.mjCAT_ALL, scene)
                    mujoco.mjr_render(rect, scene, con)
                    mujoco.mjr_readPixels(pixels, None, rect, con)
                    frames[i] = pixels[::-1]  # OpenGL rows run bottom-up
            finally:
                con.free()
        finally:
            ctx.free()
    return frames[0] if single else frames


def _as_frames(frames: Any) -> npt.NDArray[np.uint8]:
    arr = np.asarray(frames)
    if arr.ndim == 3:
        arr = arr[None]  # a single frame is a one-frame video
    if arr.ndim != 4 or arr.shape[-1] != 3 or arr.shape[0] == 0 or 0 in arr.shape[1:3]:
        raise ValueError(
            f"frames must be RGB images of shape (T, height, width, 3) with T >= 1; got {arr.shape}"
        )
    if arr.dtype != np.uint8:
        raise ValueError(f"frames must be uint8 (as render_array returns); got {arr.dtype}")
    return arr


def save_video(path: str | os.PathLike[str], frames: Any, fps: float = 30.0) -> None:
    """Write RGB uint8 frames (T, H, W, 3) as a `.gif` (Pillow, loops forever) or `.mp4` (`video` extra)."""
    suffix = pathlib.Path(path).suffix.lower()
    if suffix not in VIDEO_SUFFIXES:
        raise ValueError(
            f"cannot write video {os.fspath(path)!r}: suffix {suffix or '(none)'!r} "
            f"is not one of {VIDEO_SUFFIXES}"
        )
    if isinstance(fps, bool) or not isinstance(fps, int | float) or not math.isfinite(fps) or fps <= 0:
        raise ValueError(f"fps must be a positive finite number; got {fps!r}")
    arr = _as_frames(frames)
    if suffix == ".gif":
        _write_gif(path, arr, float(fps))
    else:
        _write_mp4(path, arr, float(fps))


def _write_gif(path: str | os.PathLike[str], frames: npt.NDArray[np.uint8], fps: float) -> None:
    images = [Image.fromarray(f) for f in frames]
    # GIF delays are whole hundredths of a second, and browsers slow 0.01 s delays down to 0.1 s:
    # round to hundredths and play at most 50 frames per second.
    duration_ms = max(20, round(100.0 / fps) * 10)

    def write(f: IO[bytes]) -> None:
        # Pillow merges identical consecutive frames (adding up their delays), so a still stretch
        # reads back as fewer, longer frames.
        images[0].save(f, format="GIF", save_all=True, append_images=images[1:], loop=0, duration=duration_ms)

    _atomic.write_atomic(path, write)


def _write_mp4(path: str | os.PathLike[str], frames: npt.NDArray[np.uint8], fps: float) -> None:
    try:
        ffmpeg = importlib.import_module("imageio_ffmpeg")
    except ImportError as err:
        raise ImportError(
            f"writing {os.fspath(path)!r} needs the video extra: pip install 'brax-io[video]' "
            "(imageio-ffmpeg, with its own ffmpeg binary); .gif needs nothing extra"
        ) from err
    # H.264 with yuv420p (what browsers and players accept) needs even sides: repeat the last row/column.
    _, h, w, _ = frames.shape
    frames = np.pad(frames, ((0, 0), (0, h % 2), (0, w % 2), (0, 0)), mode="edge")
    with tempfile.TemporaryDirectory(prefix="brax-io-video-") as tmp:
        # ffmpeg writes (and seeks in) a named file; copy the finished file into place atomically.
        out = os.path.join(tmp, "video.mp4")
        writer = ffmpeg.write_frames(
            out,
            (frames.shape[2], frames.shape[1]),
            fps=fps,
            codec="libx264",
            pix_fmt_in="rgb24",
            pix_fmt_out="yuv420p",
            macro_block_size=1,
            ffmpeg_log_level="error",
        )
        writer.send(None)  # start ffmpeg
        try:
            for frame in frames:
                writer.send(np.ascontiguousarray(frame))
        finally:
            writer.close()

        def copy_into(f: IO[bytes]) -> None:
            with open(out, "rb") as src:
                shutil.copyfileobj(src, f)

        _atomic.write_atomic(path, copy_into)


def save_image(path: str | os.PathLike[str], frame: Any) -> None:
    """Write one RGB (H, W, 3) or RGBA (H, W, 4) uint8 image as a `.png` file, atomically."""
    suffix = pathlib.Path(path).suffix.lower()
    if suffix != ".png":
        raise ValueError(
            f"cannot write image {os.fspath(path)!r}: suffix {suffix or '(none)'!r} is not '.png'"
        )
    arr = np.asarray(frame)
    if arr.ndim != 3 or arr.shape[-1] not in (3, 4) or 0 in arr.shape[:2]:
        raise ValueError(f"frame must have shape (height, width, 3) or (height, width, 4); got {arr.shape}")
    if arr.dtype != np.uint8:
        raise ValueError(f"frame must be uint8 (as render_array returns); got {arr.dtype}")
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    _atomic.write_atomic(path, lambda f: f.write(buf.getvalue()))
