"""A physics-only install: brax-math + brax-physics in a fresh virtual environment simulate an MJCF model
without flax, optax or orbax present (DESIGN §1: brax-physics never pulls the training libraries).

The venv is created without `--system-site-packages` and the two packages are installed from their
source directories with the venv's own pip (which reads the machine's pip configuration, so a local
wheelhouse or index mirror is used when one is configured; otherwise PyPI).
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import venv

import pytest

pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parents[2]

SCRIPT = r'''
import importlib.metadata as md
import importlib.util

import jax
import jax.numpy as jnp
import numpy as np

import brax_physics as bp

XML = """
<mujoco>
  <option timestep="0.01"/>
  <worldbody>
    <body name="pole">
      <joint name="hinge" type="hinge" axis="0 1 0" damping="0.01"/>
      <geom type="capsule" fromto="0 0 0 0 0 0.5" size="0.03" mass="0.2" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
</mujoco>
"""
sys_ = bp.load_mjcf(XML)
state = bp.init(sys_, jnp.array([0.3], jnp.float32), jnp.zeros(1, jnp.float32))
step = jax.jit(lambda s: bp.step(sys_, s, jnp.zeros(0, jnp.float32)))
for _ in range(50):
    state = step(state)
q = float(np.asarray(state.q)[0])
assert np.isfinite(q) and abs(q - 0.3) > 1e-3, q  # the pole fell under gravity

for module in ("flax", "optax", "orbax", "brax_envs", "brax_io", "brax_train"):
    assert importlib.util.find_spec(module) is None, f"{module} is importable in a physics-only install"
    try:
        __import__(module)
    except ImportError:
        pass
    else:
        raise AssertionError(f"import {module} succeeded")
installed = {d.metadata["Name"].lower() for d in md.distributions()}
assert not installed & {"flax", "optax", "orbax-checkpoint"}, installed
print("PHYSICS-ONLY OK", q, sorted(installed))
print("FILE", bp.__file__)
'''


def test_physics_only_install_has_no_training_libraries(tmp_path: pathlib.Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=False, clear=True).create(env_dir)
    python = env_dir / "bin" / "python"
    # The suite's compilation cache settings stay out too: the fresh venv has no filelock.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")
           and not k.startswith(("JAX_COMPILATION_CACHE", "JAX_PERSISTENT_CACHE"))}
    env.update(JAX_PLATFORMS="cpu", PIP_DISABLE_PIP_VERSION_CHECK="1")
    install = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            str(ROOT / "packages" / "brax-math"),
            str(ROOT / "packages" / "brax-physics"),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        check=False,
    )
    assert install.returncode == 0, install.stderr[-4000:]
    p = subprocess.run(
        [str(python), "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert p.returncode == 0, p.stderr[-4000:]
    assert "PHYSICS-ONLY OK" in p.stdout
    # brax_physics came from the fresh venv, not from the test's own environment.
    (file_line,) = [line for line in p.stdout.splitlines() if line.startswith("FILE ")]
    assert pathlib.Path(file_line.removeprefix("FILE ")).resolve().is_relative_to(env_dir.resolve())
