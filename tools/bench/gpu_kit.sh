#!/usr/bin/env bash
# The GPU benchmark of issue #22, prepared for a lent device machine (the `device` tool), which
# has CUDA JAX, flax, optax and orbax but no MuJoCo, no Google brax and no network.
#
#   bash tools/bench/gpu_kit.sh fetch     # here: the missing wheels into .whl/ (git-ignored locally)
#   run(command="bash tools/bench/gpu_kit.sh physics", carry=[".whl"], timeout_s=420)
#   run(command="bash tools/bench/gpu_kit.sh ppo", carry=[".whl"], timeout_s=480)
#
# `physics`: `tools/bench/physics.py` for ant and humanoid, ours (MuJoCo's default solver settings
# and Google brax's env settings for MJX) and MJX (its env settings) at 1024 and 8192 envs; `ppo`:
# `tools/bench/train.py` PPO on ant, ours and Google brax's. JSON lines go to $OUT (they come back with the call) and to stdout. The machine's Python
# is 3.12 (the wheels are fetched for it); each step prints what it runs, so a failure names itself.
set -euo pipefail
cd "$(dirname "$0")/../.."
WHEELS=.whl
# What the device image lacks (checked against its package list, 2026-11-17): MuJoCo and its
# viewer libraries, MJX and Google brax with their own dependencies, and brax-train's CLI ones.
PACKAGES=(mujoco==4.0.0 mujoco-core==4.0.0 mujoco-studio==4.0.0 glfw pyopengl mujoco-mjx==3.17.0
          brax==0.14.2 jaxopt ml-collections flask flask-cors blinker itsdangerous trimesh tyro
          docstring-parser typeguard tensorboardX)

setup() {
  local site=/tmp/brax_site
  python3 -m pip install -q --no-index --no-deps --target "$site" "$WHEELS"/*.whl
  PYTHONPATH="$site:$(ls -d packages/*/src | tr '\n' ':')"
  export PYTHONPATH
  export MUJOCO_GL=egl
  python3 -c "import jax, mujoco, brax; print('jax', jax.__version__, jax.devices(), 'mujoco', mujoco.__version__)"
  mkdir -p "${OUT:-/tmp/out}"
}

case "${1:-}" in
  fetch)
    grep -qx "/$WHEELS/" .git/info/exclude 2>/dev/null || echo "/$WHEELS/" >> .git/info/exclude
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      --dest "$WHEELS" "${PACKAGES[@]}"
    du -sh "$WHEELS"
    ;;
  physics)
    setup
    python3 tools/bench/physics.py --models ant,humanoid \
      --backends brax_physics,brax_physics_mjx_env,brax_mjx_env --batches 1024,8192 --steps 200 \
      --repeats 3 --timeout 150 | tee "${OUT:-/tmp/out}/physics.jsonl"
    ;;
  ppo)
    setup
    python3 tools/bench/train.py --agents ppo --envs ant --impls ours,brax --num-timesteps 2000000 \
      --timeout 220 | tee "${OUT:-/tmp/out}/ppo.jsonl"
    ;;
  *)
    echo "usage: bash tools/bench/gpu_kit.sh fetch|physics|ppo" >&2
    exit 2
    ;;
esac
