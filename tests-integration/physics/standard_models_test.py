"""Standard locomotion models (brax-envs MJCF assets) simulated by brax-physics vs MuJoCo C.

Zero control from the initial pose for 1 s: the torso height tracks MuJoCo within 1 cm at every
step and the number of active contacts (rows-producing contacts; MuJoCo's gap-band contacts are
excluded) agrees. The XML files are read by path: brax-physics must not import brax-envs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import brax_physics as bp
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

ASSETS = Path(__file__).resolve().parents[2] / "packages/brax-envs/src/brax_envs/envs/assets"
SECONDS = 1.0
# model -> qpos index of the torso height (free joint z, or the planar model's rootz slide)
MODELS = {"ant": 2, "humanoid": 2, "halfcheetah": 1}

pytestmark = pytest.mark.slow


def _rollout(sys: bp.System, state: bp.State, n: int) -> tuple[jax.Array, jax.Array]:
    act = jnp.zeros(sys.nu, state.q.dtype)

    def body(s: bp.State, _: None) -> tuple[bp.State, tuple[jax.Array, jax.Array]]:
        # record the state the step starts from: its contacts are those MuJoCo's mj_forward sees
        ncon = jnp.sum(s.contact.active.astype(jnp.int32))
        return bp.step(sys, s, act), (s.q, ncon)

    return jax.lax.scan(body, state, None, length=n)[1]


rollout_jit = jax.jit(_rollout, static_argnums=2)
init_jit = jax.jit(bp.init)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_zero_control_tracks_mujoco(name: str) -> None:
    path = ASSETS / f"{name}.xml"
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    sys = bp.load_mjcf(path)
    n = round(SECONDS / m.opt.timestep)
    qs, ncon = rollout_jit(sys, init_jit(sys), n)

    mj_q, mj_ncon = [], []
    for _ in range(n):
        mj_q.append(d.qpos.copy())
        mujoco.mj_forward(m, d)
        mj_ncon.append(sum(1 for i in range(d.ncon) if not d.contact[i].exclude))
        mujoco.mj_step(m, d)
    z = MODELS[name]
    height = np.asarray(qs)[:, z]
    mj_height = np.array(mj_q)[:, z]
    assert np.max(np.abs(height - mj_height)) < 0.01, np.max(np.abs(height - mj_height))
    np.testing.assert_array_equal(np.asarray(ncon), np.array(mj_ncon))
    assert max(mj_ncon) > 0  # the model does touch the floor


def test_batched_ant_tracks_mujoco_per_member() -> None:
    """16 ants under one vmap (the batched solver path), each from its own initial velocity, vs MuJoCo.

    Different velocities make the members touch down at different times, so their Newton solves
    take different iteration counts inside one batched loop; every member must still track its own
    MuJoCo run within 1 cm and agree with its own unbatched run; contact counts agree with MuJoCo at
    90% of the steps or more (a foot hovering at the contact margin flips in float32 vs float64:
    the unbatched run of the same member disagrees at the same rate, ~91% on member 0).
    """
    path = ASSETS / "ant.xml"
    m = mujoco.MjModel.from_xml_path(str(path))
    sys = bp.load_mjcf(path)
    n, batch = round(SECONDS / m.opt.timestep), 16
    qd0 = 0.3 * np.random.default_rng(0).normal(size=(batch, m.nv))
    states = jax.jit(jax.vmap(lambda v: bp.init(sys, qd=v)))(jnp.asarray(qd0, jnp.float32))
    qs, ncon = jax.jit(jax.vmap(lambda s: _rollout(sys, s, n)))(states)
    qs, ncon = np.asarray(qs), np.asarray(ncon)
    single = jax.jit(lambda s: _rollout(sys, s, n))
    for i in (0, 1):  # the batched solver path equals the unbatched (LAPACK) one
        q1, _ = single(jax.tree.map(lambda x, i=i: x[i], states))
        np.testing.assert_allclose(qs[i], np.asarray(q1), atol=2e-3)
    assert len(set(np.argmax(ncon > 0, axis=1))) > 1  # the members touch down at different steps
    for i in range(batch):
        d = mujoco.MjData(m)
        d.qvel[:] = qd0[i]
        mj_z, mj_ncon = [], []
        for _ in range(n):
            mj_z.append(d.qpos[2])
            mujoco.mj_forward(m, d)
            mj_ncon.append(sum(1 for c in range(d.ncon) if not d.contact[c].exclude))
            mujoco.mj_step(m, d)
        err = np.max(np.abs(qs[i, :, 2] - np.array(mj_z)))
        assert err < 0.01, (i, err)
        assert np.mean(ncon[i] == np.array(mj_ncon)) >= 0.9, (i, ncon[i], mj_ncon)


def _child(code: str, what: str, xla_flags: str) -> str:
    """stdout of `code` run by a child Python with `xla_flags` alone (XLA's default CPU scheduler,
    not the suite's flags); a child that does not finish in 400 s fails the test as a hang."""
    env = {**{k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}, "XLA_FLAGS": xla_flags}
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=400,
                              env=env, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what} timed out after 400 s (LAPACK deadlock?)")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.parametrize("name", ["ant", "humanoid"])
def test_large_batches_on_one_and_two_cpu_devices_do_not_hang(name: str) -> None:
    """1024 envs under XLA's default CPU scheduler, in a child process with two forced CPU devices.

    Each step factors its mass matrices with LAPACK (the humanoid its Newton Hessians too). Before
    the pipeline kept its batched LAPACK calls off XLA's thread pool
    (brax_physics._src.lowering.factor), a potrf and a trsm ran side by side and jaxlib 0.10's CPU
    kernels deadlocked on a 2-core machine, typically on the first call at this batch (10 calls of
    a 10-step rollout on one device here); and split over two devices by `jax.shard_map`, the two
    devices' calls waited on each other and hung on the first call (3 calls here). The sharded
    rollout must match the one-device rollout. One child runs both (one compile of the one-device
    rollout); a hang shows as a timeout here, not a stuck suite.
    """
    code = textwrap.dedent(f"""
        import jax, jax.numpy as jnp, numpy as np
        from jax.sharding import Mesh, PartitionSpec as P
        import brax_physics as bp
        sys_ = bp.load_mjcf(open({str(ASSETS / f"{name}.xml")!r}).read())
        batch = 1024
        ctrl = jax.random.uniform(jax.random.PRNGKey(0), (batch, sys_.nu), minval=-1.0, maxval=1.0)
        state = jax.jit(jax.vmap(lambda _: bp.init(sys_)))(jnp.arange(batch))
        def roll(s, u):
            step = jax.vmap(lambda a, c: bp.step(sys_, a, c))
            return jax.lax.scan(lambda s, _: (step(s, u), None), s, None, length=10)[0]
        one = jax.jit(roll)
        single = state
        for i in range(10):
            single = jax.block_until_ready(one(single, ctrl))
            if i == 2:
                third = single
        finite = jnp.isfinite(single.q).all() & jnp.isfinite(single.qd).all()
        mesh = Mesh(np.array(jax.devices()), ("batch",))
        two = jax.jit(jax.shard_map(roll, mesh=mesh, in_specs=P("batch"), out_specs=P("batch"),
                                    check_vma=False))
        sharded = state
        for _ in range(3):
            sharded = jax.block_until_ready(two(sharded, ctrl))
        shards = {{s.device for s in sharded.q.addressable_shards}}
        print(int(finite), float(jnp.max(jnp.abs(single.q[:, 2]))), len(shards),
              float(jnp.max(jnp.abs(sharded.q - third.q))))
    """)
    out = _child(code, f"{name}: 1024 envs, one and two devices", "--xla_force_host_platform_device_count=2")
    finite, max_height, devices, diff = out.split()
    # 0.5 s of random control: every member finite, and none has flown off (|z| < 3 m)
    assert finite == "1" and float(max_height) < 3.0, out
    assert devices == "2", out
    # the same 30 steps per member; float32 reductions vectorized over a different batch may
    # differ in the last bit, which 30 steps of contact dynamics grow to well below 1e-3
    assert float(diff) < 1e-3, out


@pytest.mark.parametrize("name", ["ant", "humanoid"])
def test_step_lowers_for_gpu_and_tpu(name: str) -> None:
    """The vmapped step lowers for CUDA and TPU (no accelerator needed: `jax.export`): nothing in it
    is CPU-only, and the CPU's LAPACK chunking (brax_physics linalg) stays on the CPU: cuSOLVER
    factors the whole batch per call, and for n <= `Lowering.graph_max_n` (the ant) not at all. On a
    GPU every loop trip is a host round trip: the CUDA program's only loops are the Newton solve's
    and, inside it, MuJoCo's line search's, and no product of matrices batched on both sides is a
    dot (cuBLAS's call and workspace)."""
    sys = bp.load_mjcf(ASSETS / f"{name}.xml")
    batch = 1024
    state = jax.eval_shape(lambda: jax.vmap(lambda _: bp.init(sys))(jnp.arange(batch)))
    ctrl = jax.ShapeDtypeStruct((batch, sys.nu), jnp.float32)  # type: ignore[no-untyped-call]
    step = jax.jit(jax.vmap(lambda s, u: bp.step(sys, s, u)))
    targets, loops = {}, {}
    for platform in ("cuda", "tpu"):
        text = jax.export.export(step, platforms=[platform])(state, ctrl).mlir_module()
        targets[platform] = re.findall(r"custom_call @(\w+)\(.*?: \(tensor<([\dx]+)", text)
        loops[platform] = text.count("stablehlo.while")
        if platform == "cuda":
            batched = re.findall(r"dot_general [^\n]*batching_dims[^\n]*-> tensor<((?:\d+x)+)f32", text)
            assert batched and all(out.count("x") <= 2 for out in batched), batched  # (batch, n) at most
    assert loops["cuda"] == 2, loops
    assert targets["tpu"] == [], targets["tpu"]  # plain HLO throughout
    # mass-matrix factors take the whole batch, the Newton solve's factors (n > 16) its work
    # queue's slots, a quarter of it: no call takes a CPU-sized chunk
    if sys.nv <= sys.lowering.graph_max_n:  # factors and solves written out, no library call
        assert targets["cuda"] == [], targets["cuda"]
        return
    assert {t for t, _ in targets["cuda"]} == {"cusolver_potrf_ffi"}, targets["cuda"]
    assert {int(shape.split("x")[0]) for _, shape in targets["cuda"]} <= {batch, batch // 4}, targets["cuda"]
