"""Tests for brax_io.image: real offscreen renders (OSMesa on CPU) and GIF/MP4/PNG files."""

import pathlib
import re
import subprocess
import sys as pysys
import types
from typing import Any

import jax
import mujoco
import numpy as np
import pytest
from PIL import GifImagePlugin, Image

from brax_io import image
from brax_io.conftest import SCENE_XML

# The shared scene plus a camera 3 m above the origin looking straight down (cameras are not part
# of a System, which is why render_array takes the model).
XML = SCENE_XML.replace(
    "<worldbody>", '<worldbody>\n    <camera name="top" pos="0 0 3" xyaxes="1 0 0 0 1 0"/>', 1
)
W, H = 48, 36
BOX_GEOM = 1  # geom ids: floor, box, rod, ball, cyl, egg


@pytest.fixture(scope="module")
def trajectory(scene: tuple[Any, list[Any]]) -> tuple[Any, list[Any]]:
    """The scene's system and 3 real states whose q differ: the box slides along x, the pendulum swings."""
    sys, states = scene
    base = states[0]  # from bp.init: q, x, ... consistent
    out = []
    for t in range(3):
        q = np.asarray(sys.qpos0).copy()
        q[0] = 0.25 * t
        q[7] = 0.6 * t
        out.append(base.replace(q=jax.numpy.asarray(q)))
    return sys, out


def _red(frame: np.ndarray) -> np.ndarray:
    r, g, b = (frame[..., i].astype(np.int32) for i in range(3))
    # Shading and the headlight's specular term add grey to a lit red face: test dominance.
    mask: np.ndarray = r - np.maximum(g, b) > 60
    return mask


def test_single_state_is_one_nonblank_rgb_image(trajectory: tuple[Any, list[Any]]) -> None:
    sys, states = trajectory
    frame = image.render_array(sys, states[0], width=W, height=H)  # the model kept by load_mjcf
    np.testing.assert_array_equal(frame, image.render_array(sys, states[0], width=W, height=H, model=XML))
    assert frame.shape == (H, W, 3)
    assert frame.dtype == np.uint8
    assert frame.std() > 5.0, "blank image"


def test_sequence_and_time_batched_state_give_the_same_frames(trajectory: tuple[Any, list[Any]]) -> None:
    sys, states = trajectory
    frames = image.render_array(sys, states, W, H, model=XML)
    assert frames.shape == (3, H, W, 3)
    batched = jax.tree.map(lambda *xs: jax.numpy.stack(xs), *states)
    np.testing.assert_array_equal(image.render_array(sys, batched, W, H, model=XML), frames)
    # brax_envs.State-like wrappers are unwrapped through .pipeline_state.
    wrapped = [types.SimpleNamespace(pipeline_state=s) for s in states[:2]]
    np.testing.assert_array_equal(image.render_array(sys, wrapped, W, H, model=XML), frames[:2])


def test_red_geom_shows_red_pixels_and_sys_colours_win(trajectory: tuple[Any, list[Any]]) -> None:
    sys, states = trajectory
    frame = image.render_array(sys, states[0], W, H, camera="top", model=XML)
    red = _red(frame)
    # The box (0.3 m wide, 2.4 m below the camera) sits in the middle of the view.
    assert red[H // 2, W // 2]
    assert 0.02 < red.mean() < 0.5
    # A randomized colour in the System overrides the MJCF's.
    green = sys.replace(geom_rgba=sys.geom_rgba.at[BOX_GEOM].set(jax.numpy.array([0.0, 1.0, 0.0, 1.0])))
    frame = image.render_array(green, states[0], W, H, camera="top", model=XML)
    assert not _red(frame).any()
    r, g, b = frame[H // 2, W // 2].astype(int)
    assert g - max(r, b) > 60


def test_different_states_give_different_images(trajectory: tuple[Any, list[Any]]) -> None:
    sys, states = trajectory
    for camera in (None, "top"):
        a, b = image.render_array(sys, states[::2], W, H, camera=camera, model=XML)
        assert np.abs(a.astype(int) - b.astype(int)).mean() > 1.0, camera
    # The top camera is fixed: the box moved right by 0.5 m, so its red blob moved right.
    a, b = image.render_array(sys, states[::2], W, H, camera="top", model=XML)
    cols_a, cols_b = np.nonzero(_red(a))[1], np.nonzero(_red(b))[1]
    assert cols_b.mean() > cols_a.mean() + 3


def test_camera_by_name_id_or_mjvcamera(trajectory: tuple[Any, list[Any]]) -> None:
    sys, states = trajectory
    by_name = image.render_array(sys, states[0], W, H, camera="top", model=XML)
    np.testing.assert_array_equal(image.render_array(sys, states[0], W, H, camera=0, model=XML), by_name)
    cam = mujoco.MjvCamera()
    cam.type = mujoco.mjtCamera.mjCAMERA_FIXED
    cam.fixedcamid = 0
    np.testing.assert_array_equal(image.render_array(sys, states[0], W, H, camera=cam, model=XML), by_name)
    model = mujoco.MjModel.from_xml_string(XML)
    np.testing.assert_array_equal(
        image.render_array(sys, states[0], W, H, camera="top", model=model), by_name
    )
    assert model.vis.global_.offwidth == 640  # the caller's model is not modified


def test_bad_camera_names_the_camera(trajectory: tuple[Any, list[Any]]) -> None:
    sys, states = trajectory
    with pytest.raises(ValueError, match=r"camera 'side' is not in the model; its cameras are: \['top'\]"):
        image.render_array(sys, states[0], W, H, camera="side", model=XML)
    with pytest.raises(ValueError, match="camera id 3 is out of range"):
        image.render_array(sys, states[0], W, H, camera=3, model=XML)


def test_model_is_required_and_must_match(trajectory: tuple[Any, list[Any]]) -> None:
    sys, states = trajectory
    with pytest.raises(TypeError, match="pass model="):
        image.render_array(sys.replace(mj_model_ref=None), states[0], W, H)
    other = "<mujoco><worldbody><body><freejoint/><geom size='0.1'/></body></worldbody></mujoco>"
    with pytest.raises(ValueError, match="model does not match sys: the model has nq=7, sys has nq=8"):
        image.render_array(sys, states[0], W, H, model=other)
    with pytest.raises(ValueError, match="q of shape"):
        image.render_array(sys, jax.tree.map(lambda x: x[None, None], states[0]), W, H, model=XML)
    with pytest.raises(ValueError, match="width must be a positive integer"):
        image.render_array(sys, states[0], 0, H, model=XML)


def test_disabled_or_unknown_backend_is_explained(
    trajectory: tuple[Any, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    sys, states = trajectory
    monkeypatch.setenv("MUJOCO_GL", "off")
    with pytest.raises(image.RenderingUnavailableError, match="disabled by MUJOCO_GL='off'"):
        image.render_array(sys, states[0], W, H, model=XML)
    monkeypatch.setenv("MUJOCO_GL", "vulkan")
    with pytest.raises(image.RenderingUnavailableError, match=r"MUJOCO_GL='vulkan'.*egl.*osmesa"):
        image.backend()


def test_backend_on_cpu_is_osmesa(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MUJOCO_GL", raising=False)
    if jax.default_backend() == "gpu":
        pytest.skip("a GPU is visible: the automatic choice is EGL")
    assert image.backend() == "osmesa"
    # PyOpenGL is now bound to OSMesa for this process: asking for EGL fails and says why.
    monkeypatch.setenv("MUJOCO_GL", "egl")
    with pytest.raises(image.RenderingUnavailableError) as info:
        image.backend()
    message = str(info.value)
    assert "backend 'egl' (chosen because MUJOCO_GL=egl)" in message
    assert "already bound to 'osmesa'" in message


def _frames(t: int = 4) -> np.ndarray:
    rng = np.random.default_rng(0)
    base = rng.integers(0, 256, size=(1, H, W, 3), dtype=np.uint8)
    # Each frame differs (Pillow would merge identical neighbours).
    return np.concatenate([np.roll(base, 5 * i, axis=2) for i in range(t)])


def test_gif_round_trips(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "clip.gif"
    image.save_video(path, _frames(4), fps=20)
    with Image.open(path) as gif:
        assert isinstance(gif, GifImagePlugin.GifImageFile)
        assert gif.size == (W, H)
        assert gif.n_frames == 4
        assert gif.info["loop"] == 0
        assert gif.info["duration"] == 50
    assert [p.name for p in tmp_path.iterdir()] == ["clip.gif"]  # no temp file left behind


def test_rendered_frames_save_as_gif_and_png(
    trajectory: tuple[Any, list[Any]], tmp_path: pathlib.Path
) -> None:
    sys, states = trajectory
    frames = image.render_array(sys, states, W, H, model=XML)
    image.save_video(tmp_path / "run.GIF", frames, fps=10)
    with Image.open(tmp_path / "run.GIF") as gif:
        assert isinstance(gif, GifImagePlugin.GifImageFile)
        assert (gif.n_frames, gif.size) == (3, (W, H))
    image.save_image(tmp_path / "first.png", frames[0])
    with Image.open(tmp_path / "first.png") as png:
        np.testing.assert_array_equal(np.asarray(png.convert("RGB")), frames[0])


def test_bad_suffixes_and_frames_are_named(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ValueError, match=r"suffix '\.avi' is not one of \('\.gif', '\.mp4'\)"):
        image.save_video(tmp_path / "clip.avi", _frames(2), fps=10)
    with pytest.raises(ValueError, match=r"suffix '\(none\)'"):
        image.save_video(tmp_path / "clip", _frames(2), fps=10)
    with pytest.raises(ValueError, match=r"suffix '\.jpg' is not '\.png'"):
        image.save_image(tmp_path / "frame.jpg", _frames(1)[0])
    with pytest.raises(ValueError, match="must be uint8"):
        image.save_video(tmp_path / "clip.gif", _frames(2).astype(np.float32), fps=10)
    with pytest.raises(ValueError, match="fps must be a positive"):
        image.save_video(tmp_path / "clip.gif", _frames(2), fps=0)
    assert list(tmp_path.iterdir()) == []


def test_mp4_without_the_extra_names_it(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(pysys.modules, "imageio_ffmpeg", None)  # makes the import fail
    with pytest.raises(ImportError, match=r"pip install 'brax-io\[video\]'"):
        image.save_video(tmp_path / "clip.mp4", _frames(2), fps=10)
    assert list(tmp_path.iterdir()) == []


def test_mp4_round_trips(tmp_path: pathlib.Path) -> None:
    ffmpeg = pytest.importorskip("imageio_ffmpeg")
    path = tmp_path / "clip.mp4"
    frames = _frames(5)[:, :35, :47]  # odd sides are padded to even ones
    image.save_video(path, frames, fps=10)
    # ffmpeg's own probe (imageio_ffmpeg.read_frames leaves its pipes to the garbage collector).
    probe = subprocess.run(
        [ffmpeg.get_ffmpeg_exe(), "-hide_banner", "-i", str(path)], capture_output=True, text=True
    )
    assert re.search(r"Video: h264 .*yuv420p.*, 48x36", probe.stderr), probe.stderr
    assert ffmpeg.count_frames_and_secs(str(path))[0] == 5


def test_randomized_mesh_vertices_are_drawn(terrain: tuple[Any, Any]) -> None:
    """A System whose mesh_vert leaf was scaled draws the scaled mesh (the model keeps the original)."""
    sys, state = terrain
    cam = mujoco.MjvCamera()
    cam.lookat[:] = [0.1, -0.2, 0.7]
    cam.distance, cam.elevation, cam.azimuth = 1.5, -30.0, 90.0

    def emerald(s: Any) -> int:
        frame = image.render_array(s, state, 96, 72, camera=cam).astype(np.int32)
        r, g, b = frame[..., 0], frame[..., 1], frame[..., 2]
        return int(((g > r + 20) & (g > b + 15)).sum())  # green over the orange terrain

    small = emerald(sys)
    big = emerald(sys.replace(mesh_vert=sys.mesh_vert * 1.6))
    assert small > 100 and big > 2 * small, (small, big)
