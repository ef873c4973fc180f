"""`brax-train doctor`: versions, devices, matmul precision, rendering, and how to fix what is missing.

Every probe that can crash or hang (JAX device discovery, OpenGL context creation) is guarded, and
offscreen rendering is tried in a subprocess with a timeout, so the doctor itself always finishes.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from typing import Any, NamedTuple

import jax

from brax_train._versions import installed_version
from brax_train.cli import _cache
from brax_train.cli._parser import Doctor

REQUIRED = (
    "brax-math", "brax-physics", "brax-envs", "brax-io", "brax-train", "jax", "jaxlib", "numpy", "mujoco",
    "flax", "optax", "orbax-checkpoint",
)
"""Distributions a full brax-train install needs."""
OPTIONAL = {
    "Pillow": ("GIF output of `brax-train render`", "pip install Pillow"),
    "imageio-ffmpeg": ("MP4 output of `brax-train render`", "pip install 'brax-train[video]'"),
}
"""Optional distributions: what they enable and how to install them."""
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
"""Executables that count as a Chromium (for headless checks of the HTML viewer)."""
_GL_FIX = (
    "install an offscreen GL: apt-get install libegl1 (then export MUJOCO_GL=egl) or "
    "apt-get install libosmesa6 (then export MUJOCO_GL=osmesa)"
)


class Problem(NamedTuple):
    """Something missing or misconfigured, the command that fixes it, and whether it is required."""

    what: str
    fix: str
    required: bool = False


def probe_rendering(mujoco_gl: str | None, timeout: float = 60.0) -> tuple[bool, str]:
    """Try the renderer of `brax-train render` in a subprocess with `MUJOCO_GL=mujoco_gl` (None: unset)."""
    env = {k: v for k, v in os.environ.items() if k != "MUJOCO_GL"}
    if mujoco_gl:
        env["MUJOCO_GL"] = mujoco_gl
        if mujoco_gl in ("osmesa", "egl"):
            env.setdefault("PYOPENGL_PLATFORM", mujoco_gl)
    probe = "from brax_io import image; print('ok', image.backend())"
    try:
        cmd = [sys.executable, "-c", probe]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return False, f"timed out after {timeout:g} s"
    if p.returncode == 0 and p.stdout.startswith("ok"):
        return True, p.stdout.strip()
    lines = [ln.strip() for ln in (p.stderr or p.stdout).splitlines() if ln.strip()]
    return False, lines[-1] if lines else f"exit status {p.returncode}"


def _jax_info(problems: list[Problem]) -> dict[str, Any]:
    info: dict[str, Any] = {"backend": None, "devices": []}
    try:
        devices = jax.devices()
        info["devices"] = [f"{d.platform}:{d.id} {getattr(d, 'device_kind', '')}".strip() for d in devices]
        info["backend"] = jax.default_backend()
    except Exception as e:  # e.g. a CUDA jaxlib without a usable driver
        fix = "check the accelerator driver, or force the CPU with JAX_PLATFORMS=cpu"
        problems.append(Problem(f"jax finds no devices: {type(e).__name__}: {e}", fix, True))
    precision = getattr(jax.config, "jax_default_matmul_precision", None)
    info["default_matmul_precision"] = precision or "default (backend-dependent)"
    info["x64"] = bool(getattr(jax.config, "jax_enable_x64", False))
    if info["backend"] == "cpu" and shutil.which("nvidia-smi"):
        what = "an NVIDIA GPU seems present but jax only uses the CPU"
        problems.append(Problem(what, "pip install -U 'jax[cuda12]'"))
    if precision is None and info["backend"] in ("gpu", "cuda", "tpu"):
        what = "jax's default matmul precision on this accelerator may be TF32/bf16 (brax-train sets "
        what += "matmul_precision='highest' while training; your own code does not get that)"
        problems.append(Problem(what, "export JAX_DEFAULT_MATMUL_PRECISION=highest"))
    return info


def report(probe_timeout: float = 60.0) -> dict[str, Any]:
    """Everything the doctor checks, as a JSON-able dict with a `problems` list."""
    versions = {n: installed_version(n) for n in REQUIRED}
    optional = {n: installed_version(n) for n in OPTIONAL}
    missing = [n for n in REQUIRED if not versions[n]]
    problems = [Problem(f"{n} is not installed", f"pip install {n}", True) for n in missing]
    for n, (use, fix) in OPTIONAL.items():
        if not optional[n]:
            problems.append(Problem(f"{n} is not installed: no {use}", fix))
    jax_info = _jax_info(problems)
    gl = os.environ.get("MUJOCO_GL")
    rendering: dict[str, Any] = {"MUJOCO_GL": gl}
    rendering["offscreen"], rendering["detail"] = probe_rendering(gl, probe_timeout)
    if not rendering["offscreen"]:
        others = [c for c in ("egl", "osmesa") if c != gl]
        working = next((c for c in others if probe_rendering(c, probe_timeout)[0]), None)
        what = f"MuJoCo offscreen rendering fails with MUJOCO_GL={gl or '(unset)'}: {rendering['detail']}"
        problems.append(Problem(what, f"export MUJOCO_GL={working}" if working else _GL_FIX))
    rendering["chromium"] = next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)
    if rendering["chromium"] is None:
        what = "no Chromium found (only needed to test the HTML viewer headlessly)"
        problems.append(Problem(what, "apt-get install chromium"))
    platform_ = {"python": sys.version.split()[0], "platform": platform.platform()}
    out = {"versions": versions, "optional": optional, "jax": jax_info, "rendering": rendering,
           "compile_cache": _cache.describe()}
    return {**platform_, **out, "problems": [p._asdict() for p in problems]}


def _cache_text(c: dict[str, Any]) -> str:
    n = c["programs"]
    return f"{c['dir']} ({n} program{'s' if n != 1 else ''}, {c['bytes'] / 1e6:.1f} MB; --compile-cache)"


def format_report(r: dict[str, Any]) -> str:
    """The report as text."""
    j, g = r["jax"], r["rendering"]
    sections = {
        "packages": {n: v or "MISSING" for n, v in {**r["versions"], **r["optional"]}.items()},
        "jax": {
            "backend": j.get("backend"),
            "devices": ", ".join(j.get("devices", [])) or "none",
            "matmul precision": j.get("default_matmul_precision"),
            "x64": j.get("x64"),
            "compile cache": _cache_text(r["compile_cache"]),
        },
        "rendering": {
            "MUJOCO_GL": g.get("MUJOCO_GL") or "(unset)",
            "offscreen": g["detail"] if g["offscreen"] else f"FAILED: {g['detail']}",
            "chromium": g.get("chromium") or "not found",
        },
    }
    lines = [f"python {r['python']} on {r['platform']}"]
    for title, rows in sections.items():
        lines += ["", f"{title}:", *(f"  {k:18} {v}" for k, v in rows.items())]
    lines += ["", "problems:" if r["problems"] else "no problems found"]
    for p in r["problems"]:
        lines += [f"  - {p['what']}{'' if p['required'] else ' (optional)'}", f"    fix: {p['fix']}"]
    return "\n".join(lines)


def cmd_doctor(args: Doctor) -> int:
    """`brax-train doctor`: print the report; always exit status 0."""
    r = report()
    print(json.dumps(r, indent=2) if args.json else format_report(r), flush=True)
    return 0


__all__ = [
    "CHROMIUM_NAMES", "OPTIONAL", "REQUIRED", "Problem", "cmd_doctor", "format_report", "probe_rendering",
    "report",
]
