"""Tests for brax_io.html: page contents and size, and a real render in headless Chromium."""

import os
import pathlib
import re
import shutil
import struct
import subprocess
import types
import zlib
from typing import Any

import mujoco
import numpy as np
import pytest

from brax_io import html

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--use-angle=swiftshader",  # software WebGL: no GPU needed
    "--enable-unsafe-swiftshader",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--virtual-time-budget=1500",
]


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name) or (f"/usr/bin/{name}" if os.path.exists(f"/usr/bin/{name}") else None)
        if found:
            return found
    # The viewer is only tested for real: no browser is a failure, never a skip.
    pytest.fail("chromium not found; run tools/ci/system-deps.sh (the README's test command does)")


def _read_png(data: bytes) -> np.ndarray:
    """Decode an 8-bit, non-interlaced RGB/RGBA PNG (what Chromium writes) to (H, W, C) uint8."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and interlace == 0 and color in (2, 6), (depth, color, interlace)
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
    raw = zlib.decompress(idat)
    stride = width * channels
    out = np.zeros((height, stride), np.int32)
    prev = np.zeros(stride, np.int32)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = np.frombuffer(raw, np.uint8, stride, y * (stride + 1) + 1).astype(np.int32)
        if f == 0:
            cur = line
        elif f == 2:
            cur = (line + prev) & 255
        else:  # 1 sub, 3 average, 4 Paeth: depend on the left neighbour, decode per byte
            cur = np.zeros(stride, np.int32)
            for x in range(stride):
                a = int(cur[x - channels]) if x >= channels else 0
                b = int(prev[x])
                c = int(prev[x - channels]) if x >= channels else 0
                if f == 1:
                    pred = a
                elif f == 3:
                    pred = (a + b) // 2
                else:
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                cur[x] = (int(line[x]) + pred) & 255
        out[y] = cur
        prev = cur
    return out.reshape(height, width, channels)[..., :3].astype(np.uint8)


def test_page_is_self_contained(scene: tuple[Any, list[Any]]) -> None:
    sys, states = scene
    page = html.render(sys, states)
    assert page.startswith("<!DOCTYPE html>")
    assert "http://" not in page and "https://" not in page  # nothing fetched from the network
    assert "<script src" not in page
    frag = html.render(sys, states, colab=True, height=300)
    assert "<html" not in frag and "height:300px" in frag
    assert re.search(r'id="(brax-viewer-[\d-]+)"', frag)


def test_page_size_for_long_trajectory() -> None:
    nbody, frames = 11, 1000
    sys = types.SimpleNamespace(
        ngeom=10,
        nbody=nbody,
        dt=0.05,
        geom_type=(int(mujoco.mjtGeom.mjGEOM_CAPSULE),) * 10,
        geom_bodyid=tuple(range(1, 11)),
        geom_size=np.full((10, 3), 0.1),
        geom_pos=np.zeros((10, 3)),
        geom_quat=np.tile([1.0, 0, 0, 0], (10, 1)),
        geom_rgba=np.ones((10, 4)),
        body_names=tuple(f"b{i}" for i in range(nbody)),
        geom_names=("",) * 10,
    )
    rng = np.random.default_rng(0)
    x = types.SimpleNamespace(
        pos=rng.normal(size=(frames, nbody, 3)).astype(np.float32),
        rot=rng.normal(size=(frames, nbody, 4)).astype(np.float32),
    )
    page = html.render(sys, types.SimpleNamespace(x=x))
    assert len(page.encode()) < 1_000_000


def test_renders_in_headless_chromium(scene: tuple[Any, list[Any]], tmp_path: pathlib.Path) -> None:
    chromium = _chromium()
    sys, states = scene
    page = tmp_path / "replay.html"
    html.save(page, sys, states)
    flags = [*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]

    dom = subprocess.run(
        [chromium, *flags, "--enable-logging=stderr", "--v=0", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    body = re.search(r"<body[^>]*>", dom.stdout)
    assert body, dom.stdout[:500]
    assert 'data-ready="1"' in body.group(0), (body.group(0), dom.stderr[-2000:])
    assert "data-error" not in body.group(0)
    console = [ln for ln in dom.stderr.splitlines() if ":CONSOLE" in ln]
    assert not console, console  # the viewer logs nothing; anything here is an error

    shot = tmp_path / "shot.png"
    subprocess.run(
        [chromium, *flags, "--window-size=640,560", f"--screenshot={shot}", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    img = _read_png(shot.read_bytes())[:480].astype(np.int32)  # the canvas area
    assert img.std() > 20  # not blank
    colours = {tuple(c) for c in (img[::4, ::4] // 16).reshape(-1, 3)}
    assert len(colours) > 20
    r, g, b = img[..., 0], img[..., 1], img[..., 2]
    red_box = (r > 120) & (g < 70) & (b < 70)  # geom "box", rgba 0.9 0.1 0.1
    blue_ball = (b > 100) & (r < 60) & (g < 100)  # geom "ball", rgba 0.1 0.3 0.9
    assert red_box.sum() > 100, red_box.sum()
    assert blue_ball.sum() > 20, blue_ball.sum()


def test_meshes_and_height_fields_render(terrain: tuple[Any, Any], tmp_path: pathlib.Path) -> None:
    chromium = _chromium()
    sys, state = terrain
    page = tmp_path / "terrain.html"
    html.save(page, sys, state)
    flags = [*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([chromium, *flags, "--enable-logging=stderr", "--v=0", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=60, check=True)
    body = re.search(r"<body[^>]*>", dom.stdout)
    assert body and 'data-ready="1"' in body.group(0), (dom.stdout[:300], dom.stderr[-2000:])
    assert 'data-skipped="0"' in body.group(0)  # the mesh and the height field are drawn
    shot = tmp_path / "shot.png"
    subprocess.run([chromium, *flags, "--window-size=640,560", f"--screenshot={shot}", page.as_uri()],
                   capture_output=True, text=True, timeout=60, check=True)
    img = _read_png(shot.read_bytes())[:480].astype(np.int32)
    r, g, b = img[..., 0], img[..., 1], img[..., 2]
    emerald = (g > 120) & (r < 60) & (b < 90)  # the mesh, coloured by its material
    hills = (r > 120) & (g > 60) & (g < r - 30) & (b < 60)  # the height field, rgba 0.85 0.55 0.1
    magenta = (r > 150) & (b > 150) & (g < 80)  # the group-3 box: hidden, as in MuJoCo
    assert emerald.sum() > 100, emerald.sum()
    assert hills.sum() > 1000, hills.sum()
    assert magenta.sum() == 0, magenta.sum()
