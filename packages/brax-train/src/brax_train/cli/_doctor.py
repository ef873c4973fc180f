"""`brax-train doctor`: versions, devices, matmul precision, rendering, and how to fix what is missing.

Every probe that can crash or hang (JAX device discovery, OpenGL context creation) is guarded, and
offscreen rendering is tried in a subprocess with a timeout, so the doctor itself always finishes.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import shutil
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from typing import Any, NamedTuple

REQUIRED = (
    "brax-math",
    "brax-physics",
    "brax-envs",
    "brax-io",
    "brax-train",
    "jax",
    "jaxlib",
    "numpy",
    "mujoco",
    "flax",
    "optax",
    "orbax-checkpoint",
)
"""Distributions a full brax-train install needs."""
OPTIONAL = {
    "Pillow": "GIF output of `brax-train render` (pip install Pillow)",
    "imageio-ffmpeg": "MP4 output of `brax-train render` (pip install 'brax-train[video]')",
}
"""Optional distributions and what they enable."""
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
"""Executables that count as a Chromium (for headless checks of the HTML viewer)."""

_RENDER_PROBE = """
try:
    from brax_io import image  # the renderer `brax-train render` uses, with its backend choice
except ImportError:
    image = None
if image is not None:
    print("ok", image.backend())
    raise SystemExit(0)
import mujoco
m = mujoco.MjModel.from_xml_string('<mujoco><worldbody><geom size=".1"/></worldbody></mujoco>')
r = mujoco.Renderer(m, 16, 16)
d = mujoco.MjData(m)
mujoco.mj_forward(m, d)
r.update_scene(d)
print("ok", r.render().shape)
"""


class Problem(NamedTuple):
    """Something missing or misconfigured, and the command that fixes it."""

    what: str
    """What is wrong."""
    fix: str
    """How to fix it."""
    required: bool
    """False for optional features."""


def _version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def probe_rendering(mujoco_gl: str | None, timeout: float = 60.0) -> tuple[bool, str]:
    """Try a 16x16 MuJoCo offscreen render in a subprocess with `MUJOCO_GL=mujoco_gl` (None: unset)."""
    env = dict(os.environ)
    env.pop("MUJOCO_GL", None)
    if mujoco_gl:
        env["MUJOCO_GL"] = mujoco_gl
        if mujoco_gl == "osmesa":
            env.setdefault("PYOPENGL_PLATFORM", "osmesa")
        elif mujoco_gl == "egl":
            env.setdefault("PYOPENGL_PLATFORM", "egl")
    try:
        p = subprocess.run(
            [sys.executable, "-c", _RENDER_PROBE],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return False, f"timed out after {timeout:g} s"
    if p.returncode == 0 and p.stdout.startswith("ok"):
        return True, p.stdout.strip()
    lines = [ln for ln in (p.stderr or p.stdout).strip().splitlines() if ln.strip()]
    return False, lines[-1].strip() if lines else f"exit status {p.returncode}"


def _jax_info() -> tuple[dict[str, Any], list[Problem]]:
    info: dict[str, Any] = {}
    problems: list[Problem] = []
    try:
        import jax
    except Exception as e:  # a broken jaxlib raises all kinds of errors at import
        problems.append(
            Problem(f"jax does not import: {type(e).__name__}: {e}", "pip install -U jax jaxlib", True)
        )
        return info, problems
    try:
        devices = jax.devices()
        info["backend"] = jax.default_backend()
        info["devices"] = [f"{d.platform}:{d.id} {getattr(d, 'device_kind', '')}".strip() for d in devices]
    except Exception as e:  # e.g. a CUDA jaxlib without a usable driver
        problems.append(
            Problem(
                f"jax finds no devices: {type(e).__name__}: {e}",
                "check the accelerator driver, or force the CPU with JAX_PLATFORMS=cpu",
                True,
            )
        )
        info["backend"] = None
        info["devices"] = []
    precision = getattr(jax.config, "jax_default_matmul_precision", None)
    info["default_matmul_precision"] = precision if precision is not None else "default (backend-dependent)"
    info["x64"] = bool(getattr(jax.config, "jax_enable_x64", False))
    if info.get("backend") == "cpu" and shutil.which("nvidia-smi"):
        problems.append(
            Problem(
                "an NVIDIA GPU seems present but jax only uses the CPU", "pip install -U 'jax[cuda12]'", False
            )
        )
    if precision is None and info.get("backend") in ("gpu", "cuda", "tpu"):
        problems.append(
            Problem(
                "jax's default matmul precision on this accelerator may be TF32/bf16 (brax-train sets "
                "matmul_precision='highest' while training; your own code does not get that)",
                "export JAX_DEFAULT_MATMUL_PRECISION=highest",
                False,
            )
        )
    return info, problems


def report(probe_timeout: float = 60.0) -> dict[str, Any]:
    """Everything the doctor checks, as a JSON-able dict with a `problems` list."""
    problems: list[Problem] = []
    versions = {n: _version(n) for n in REQUIRED}
    for n, v in versions.items():
        if v is None:
            problems.append(Problem(f"{n} is not installed", f"pip install {n}", True))
    optional = {n: _version(n) for n in OPTIONAL}
    for n, v in optional.items():
        if v is None:
            problems.append(
                Problem(
                    f"{n} is not installed: no {OPTIONAL[n].split(' (')[0]}",
                    OPTIONAL[n].split("(")[-1].rstrip(")"),
                    False,
                )
            )
    jax_info, jax_problems = _jax_info()
    problems += jax_problems

    gl = os.environ.get("MUJOCO_GL")
    rendering: dict[str, Any] = {"MUJOCO_GL": gl}
    if versions["mujoco"] is not None:
        ok, detail = probe_rendering(gl, probe_timeout)
        rendering["offscreen"] = ok
        rendering["detail"] = detail
        if not ok:
            working = None
            for candidate in ("egl", "osmesa"):
                if candidate != gl and probe_rendering(candidate, probe_timeout)[0]:
                    working = candidate
                    break
            fix = (
                f"export MUJOCO_GL={working}"
                if working
                else "install an offscreen GL: apt-get install libegl1 (then export MUJOCO_GL=egl) or "
                "apt-get install libosmesa6 (then export MUJOCO_GL=osmesa)"
            )
            problems.append(
                Problem(
                    f"MuJoCo offscreen rendering fails with MUJOCO_GL={gl or '(unset)'}: {detail}", fix, False
                )
            )
    try:
        importlib.import_module("brax_io.image")
        rendering["brax_io.image"] = True
    except ImportError:
        rendering["brax_io.image"] = False
        problems.append(
            Problem(
                "brax_io.image is missing: no .gif/.mp4 from `brax-train render`",
                "pip install -U brax-io",
                False,
            )
        )
    chromium = next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)
    rendering["chromium"] = chromium
    if chromium is None:
        problems.append(
            Problem(
                "no Chromium found (only needed to test the HTML viewer headlessly)",
                "apt-get install chromium",
                False,
            )
        )
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "versions": versions,
        "optional": optional,
        "jax": jax_info,
        "rendering": rendering,
        "problems": [p._asdict() for p in problems],
    }


def format_report(r: dict[str, Any]) -> str:
    """The report as text."""
    lines = [f"python {r['python']} on {r['platform']}", "", "packages:"]
    for n, v in {**r["versions"], **r["optional"]}.items():
        lines.append(f"  {n:18} {v or 'MISSING'}")
    j = r["jax"]
    lines += ["", "jax:"]
    lines.append(f"  backend            {j.get('backend')}")
    lines.append(f"  devices            {', '.join(j.get('devices', [])) or 'none'}")
    lines.append(f"  matmul precision   {j.get('default_matmul_precision')}")
    lines.append(f"  x64                {j.get('x64')}")
    g = r["rendering"]
    lines += ["", "rendering:"]
    lines.append(f"  MUJOCO_GL          {g.get('MUJOCO_GL') or '(unset)'}")
    if "offscreen" in g:
        lines.append(f"  offscreen          {g['detail'] if g['offscreen'] else 'FAILED: ' + g['detail']}")
    lines.append(f"  brax_io.image      {'ok' if g['brax_io.image'] else 'missing'}")
    lines.append(f"  chromium           {g.get('chromium') or 'not found'}")
    lines.append("")
    if not r["problems"]:
        lines.append("no problems found")
    else:
        lines.append("problems:")
        for p in r["problems"]:
            tag = "" if p["required"] else " (optional)"
            lines.append(f"  - {p['what']}{tag}")
            lines.append(f"    fix: {p['fix']}")
    return "\n".join(lines)


def cmd_doctor(args: argparse.Namespace) -> int:
    """`brax-train doctor`: print the report; always exit status 0."""
    r = report()
    print(json.dumps(r, indent=2) if args.json else format_report(r), flush=True)
    return 0


__all__ = [
    "CHROMIUM_NAMES",
    "OPTIONAL",
    "REQUIRED",
    "Problem",
    "cmd_doctor",
    "format_report",
    "probe_rendering",
    "report",
]
