#!/usr/bin/env bash
# The GPU benchmark of issue #22, prepared for a lent device machine (the `device` tool), which
# has CUDA JAX, flax, optax and orbax but no MuJoCo, no Google brax and no network.
#
#   bash tools/bench/gpu_kit.sh fetch     # here: the missing wheels into .whl/ (git-ignored locally)
#   run(command="bash tools/bench/gpu_kit.sh physics", carry=[".whl"], timeout_s=420)
#   run(command="bash tools/bench/gpu_kit.sh ppo", carry=[".whl"], timeout_s=480)
#   run(command="bash tools/bench/gpu_kit.sh all", carry=[".whl"], timeout_s=540)   # both, one start
#   run(command="bash tools/bench/gpu_kit.sh probe", carry=[".whl"], timeout_s=590) # why ours is slow there
#   run(command="bash tools/bench/gpu_kit.sh profile", carry=[".whl"], timeout_s=440) # kernels + our PPO
#   run(command="bash tools/bench/gpu_kit.sh graphs", carry=[".whl"], timeout_s=300)  # host time, graphs
#   run(command="bash tools/bench/gpu_kit.sh fused", carry=[".whl"], timeout_s=590)   # dots, AUGMENT
#
# `physics`: `tools/bench/physics.py` for ant and humanoid, ours (MuJoCo's default solver settings
# and Google brax's env settings for MJX) and MJX (its env settings) at 1024 and 8192 envs; `ppo`:
# `tools/bench/train.py` PPO on ant, ours and Google brax's; `probe`: the work queue's A/B, a
# kernel-level profile and humanoid's rows (a lease of 15 minutes: `probe`, then `ppo` at once,
# before the machine's 30 s idle release). JSON lines go to $OUT (they come back with the call)
# and to stdout. The machine's Python is 3.12 (the wheels are fetched for it); each step prints
# what it runs, so a failure names itself. MUJOCO_GL=disable: the image has no libEGL.
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
  rm -rf "$site"
  python3 -m pip install -q --no-index --no-deps --target "$site" "$WHEELS"/*.whl
  PYTHONPATH="$site:$(ls -d packages/*/src | tr '\n' ':')"
  export PYTHONPATH
  export MUJOCO_GL=disable  # no libEGL there; the benchmarks render nothing
  python3 -c "import jax, mujoco, brax; print('jax', jax.__version__, jax.devices(), 'mujoco', mujoco.__version__)"
  mkdir -p "${OUT:-/tmp/out}"
  export PYTHONUNBUFFERED=1  # rows print as they finish, so a part cut by its time limit keeps them
  o="${OUT:-/tmp/out}"
}

# PPO on ant, ours then Google's, with the batch sizes of Google's training notebook (SETTINGS
# scale them down for a 2-core CPU): 4096 envs, 32 minibatches of 2048, 128 eval envs. $1: seconds
# per run.
ppo_pair() {
  python3 tools/bench/train.py --agents ppo --envs ant --impls ours,brax \
    --num-timesteps "${PPO_STEPS:-3000000}" --timeout "$1" ${PPO_SET:---set num_envs=4096 \
    --set batch_size=2048 --set num_minibatches=32 --set num_eval_envs=128} \
    | tee "${OUT:-/tmp/out}/ppo.jsonl"
}

# `ab.py` on the GPU, its line appended to $OUT/$4: $1 seconds, $2 model, $3 batch, $5 setting, the
# rest its values (5 rounds).
ab_gpu() {
  local limit=$1 model=$2 batch=$3 out=$4 setting=$5
  shift 5
  timeout "$limit" python3 tools/bench/ab.py --model "$model" --batch "$batch" --setting "$setting" \
    --values "$@" --rounds 5 | tee -a "${OUT:-/tmp/out}/$out" || true
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
  all)
    # Both in one call (a machine's start costs minutes of a 15-minute lease), each under its own
    # wall limit so the physics rows cannot eat the PPO pair's time; rows already printed come back.
    setup
    timeout "${PHYSICS_S:-300}" python3 tools/bench/physics.py --models ant,humanoid \
      --backends brax_physics,brax_mjx_env,brax_physics_mjx_env --batches "${BATCHES:-1024,8192}" \
      --steps "${STEPS:-200}" --repeats 3 --timeout 100 | tee "${OUT:-/tmp/out}/physics.jsonl" || true
    timeout "${PPO_S:-240}" bash -c "$(declare -f ppo_pair); ppo_pair 115" || true
    ;;
  probe)
    # Where our GPU step's time goes (the first lease found it launch-bound, RESULTS.md): the two
    # GPU-only lowerings against the CPU's, a kernel-level profile of ours and MJX, and the
    # humanoid rows that lease could not reach. Each part under its own wall limit.
    setup
    # A: this session's GPU programs; B: the CPU's row loops (linalg) or work queue (solver) there too.
    for setting in loop_platforms queue_platforms; do
      for m in ant humanoid; do
        timeout 100 python3 tools/bench/ab.py --model "$m" --batch "${PROBE_BATCH:-1024}" \
          --setting "$setting" --values "('cpu',)" "('cpu','cuda')" --rounds 5 | tee -a "$o/ab.jsonl" || true
      done
    done
    timeout 200 python3 tools/bench/physics.py --models ant --backends brax_physics,brax_mjx_env \
      --batches "${PROBE_BATCH:-1024}" --steps 100 --repeats 3 --timeout 95 --profile | tee "$o/profile.jsonl" || true
    timeout 130 python3 tools/bench/physics.py --models humanoid \
      --backends brax_physics,brax_mjx_env,brax_physics_mjx_env --batches "${PROBE_BATCH:-1024}" --steps 100 \
      --repeats 3 --timeout 60 | tee "$o/humanoid.jsonl" || true
    ;;
  profile)
    # One lease's worth (about 420 s of a 15-minute budget): the kernel-level profile of ours and MJX
    # on ant and humanoid at $PROBE_BATCH envs, then our PPO alone (Google's did not finish in
    # 115 s on the first lease). Each part under its own wall limit.
    setup
    for m in ant humanoid; do
      timeout 130 python3 tools/bench/physics.py --models "$m" --backends brax_physics,brax_mjx_env \
        --batches "${PROBE_BATCH:-1024}" --steps 100 --repeats 3 --timeout 60 --profile \
        | tee "$o/profile_$m.jsonl" || true
    done
    timeout 140 python3 tools/bench/train.py --agents ppo --envs ant --impls ours \
      --num-timesteps "${PPO_STEPS:-3000000}" --timeout 130 --set num_envs=4096 --set batch_size=2048 \
      --set num_minibatches=32 --set num_eval_envs=128 | tee "$o/ppo.jsonl" || true
    ;;
  graphs)
    # The `profile` lease found our GPU step bound by the host, not the kernels (ant at 1024 envs:
    # 285 us of kernels in an 852 us step; MJX 343 in 350). Where the host's time goes (the
    # profile's host_top), with MJX's settings as a second row (fewer Newton trips), and with XLA's
    # while loops and conditionals inside CUDA graphs (no host round trip per trip).
    setup
    timeout 110 python3 tools/bench/physics.py --models ant --backends brax_physics,brax_physics_mjx_env \
      --batches "${PROBE_BATCH:-1024}" --steps 100 --repeats 3 --timeout 50 --profile \
      | tee "$o/host.jsonl" || true
    export XLA_FLAGS="--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL"
    timeout 110 python3 tools/bench/physics.py --models ant --backends brax_physics,brax_mjx_env \
      --batches "${PROBE_BATCH:-1024}" --steps 100 --repeats 3 --timeout 50 --profile \
      | tee "$o/graphs.jsonl" || true
    timeout 60 python3 tools/bench/physics.py --models humanoid --backends brax_physics \
      --batches "${PROBE_BATCH:-1024}" --steps 100 --repeats 3 --timeout 55 \
      | tee -a "$o/graphs.jsonl" || true
    ;;
  graphab)
    # linalg.GRAPH_PLATFORMS on the GPU: the factors and solves written out without loops or
    # cuSOLVER/cuBLAS calls (the `graphs` lease: those calls are launched by the host between
    # CUDA graphs), then the same with XLA's while loops inside CUDA graphs.
    setup
    for m in ant humanoid; do
      ab_gpu 95 "$m" "${PROBE_BATCH:-1024}" graphab.jsonl graph_platforms \
        "()" "('cuda',)"
    done
    XLA_FLAGS="--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL" ab_gpu 85 ant "${PROBE_BATCH:-1024}" \
      graphab_while.jsonl graph_platforms "()" "('cuda',)"
    ;;
  graphscale)
    # GRAPH_PLATFORMS (now on for CUDA) off and on at 128 and 8192 ants, then ant at 1024 beside
    # MJX: about 200 s, the last of a lease's budget.
    setup
    for b in 128 8192; do
      ab_gpu 60 ant "$b" graphscale.jsonl graph_platforms "()" "('cuda',)"
    done
    timeout 65 python3 tools/bench/physics.py --models ant --backends brax_physics,brax_mjx_env \
      --batches 1024 --steps 100 --repeats 3 --timeout 32 | tee -a "$o/graphscale.jsonl" || true
    ;;
  fused)
    # The third loan's buffer assignment: the humanoid's 41.8 MB at 1024 envs held a cuBLAS
    # workspace of 32 MiB for one batched dot (the mass matrix's), whatever the batch.
    # com.FUSED_PLATFORMS (on for CUDA) writes such dots out as k products added. The third loan
    # measured a multiply-and-reduce form (16.3 MB, but 18 KB per env against MJX's 11); this runs
    # the written-out sum's A/B (ab.py now prints each program's buffer bytes) at 1024 and 8192
    # envs, then the bytes per env split into per-env and fixed parts, ours and MJX. About 550 s.
    setup
    for b in 1024 8192; do
      ab_gpu 110 humanoid "$b" fused.jsonl fused_platforms "()" "('cuda',)"
    done
    ab_gpu 90 ant 1024 fused.jsonl fused_platforms "()" "('cuda',)"
    # linalg.AUGMENT: the humanoid's Newton factor (cuSOLVER) also does the forward substitution,
    # one host-launched cuBLAS solve per Newton trip fewer
    ab_gpu 100 humanoid 1024 augment.jsonl augment False True
    timeout 130 python3 tools/bench/physics.py --models humanoid --backends brax_physics,brax_mjx_env \
      --batches "${PROBE_BATCH:-1024}" --steps 20 --repeats 1 --timeout 64 --memory \
      | tee -a "$o/memory.jsonl" || true
    ;;
  ppo)
    setup
    ppo_pair 220
    ;;
  *)
    echo "usage: bash tools/bench/gpu_kit.sh fetch|physics|ppo|all|probe|profile|graphs|graphab|graphscale|fused" >&2
    exit 2
    ;;
esac
