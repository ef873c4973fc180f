"""Physical invariants, gradients and batching."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import brax_physics as bp
from brax_physics._src import models_testutil as tm

# Options.integrator is a static int: the enum's value, not the pybind enum object.
_RK4 = int(mujoco.mjtIntegrator.mjINT_RK4)


def _scan(sys: bp.System, state: bp.State, act: jax.Array, n: int, fn: Any) -> tuple[bp.State, Any]:
    def body(s: bp.State, _: None) -> tuple[bp.State, Any]:
        s = bp.step(sys, s, act)
        return s, fn(s)

    return jax.lax.scan(body, state, None, length=n)


def _energy(sys: bp.System, s: bp.State) -> jax.Array:
    kinetic = 0.5 * s.qd @ s.mass_matrix @ s.qd
    potential = -jnp.sum(sys.body_mass * (s.xipos @ sys.opt.gravity))
    return kinetic + potential


@pytest.mark.parametrize("integrator", ["Euler", "RK4"])
def test_undamped_pendulum_conserves_energy(integrator: str) -> None:
    sys = bp.load_mjcf(tm.PENDULUM)  # no damping
    # semi-implicit Euler is symplectic: energy oscillates with amplitude O(h) but does not drift
    h, steps = (0.002, 2500) if integrator == "Euler" else (0.01, 500)
    opt = sys.opt.replace(timestep=jnp.asarray(h, jnp.float32))
    sys = sys.replace(opt=opt.replace(integrator=_RK4) if integrator == "RK4" else opt)
    s0 = bp.init(sys, jnp.array([1.2], jnp.float32))
    run = jax.jit(lambda s: _scan(sys, s, jnp.zeros(0, jnp.float32), steps, lambda s: _energy(sys, s)))
    _, e = run(s0)  # 5 s
    e0 = _energy(sys, s0)
    swing = float(jnp.max(jnp.abs(e - e0)))
    scale = float(sys.body_mass[1] * 9.81 * 0.25)  # potential energy range scale (com 0.25 m below pivot)
    assert swing < 0.01 * scale


def _angular_momentum(ximat: np.ndarray, inertia: np.ndarray, omega: np.ndarray) -> np.ndarray:
    """World-frame angular momentum about the com of one body: R diag(I) Rᵀ ω."""
    return np.asarray(np.einsum("...ij,j,...kj,...k->...i", ximat, inertia, ximat, omega), dtype=np.float64)


def test_free_body_angular_momentum() -> None:
    # No torque acts (zero gravity), so L about the com is constant in the world frame. Semi-implicit
    # Euler integrates the gyroscopic term ω × Iω explicitly, so L drifts O(h); MuJoCo C drifts the
    # same way. We require our drift to match C's to 1e-4 and stay under 0.5%; RK4
    # (O(h^4)) must conserve L to float32 roundoff level.
    qd = np.array([0.3, -0.2, 0.1, 2.0, -3.0, 1.5])
    m = mujoco.MjModel.from_xml_string(tm.FREE_BODY)
    d = mujoco.MjData(m)
    d.qvel[:] = qd
    mujoco.mj_forward(m, d)
    inertia = m.body_inertia[1]
    l_c = []
    for _ in range(200):
        mujoco.mj_step(m, d)
        mujoco.mj_forward(m, d)  # refresh ximat/cvel at the new qpos
        l_c.append(_angular_momentum(d.ximat[1].reshape(3, 3), inertia, d.cvel[1, :3]))

    sys = bp.load_mjcf(tm.FREE_BODY)
    for integ in ("Euler", "RK4"):
        s = sys if integ == "Euler" else sys.replace(opt=sys.opt.replace(integrator=_RK4))
        s0 = bp.init(s, None, jnp.asarray(qd, jnp.float32))
        _, (xm, w) = jax.jit(lambda st, s=s: _scan(s, st, jnp.zeros(0, jnp.float32), 200,
                                                  lambda x: (x.ximat[1], x.xd.ang[1])))(s0)
        l0 = _angular_momentum(np.asarray(s0.ximat[1], np.float64), inertia,
                               np.asarray(s0.xd.ang[1], np.float64))
        ours = _angular_momentum(np.asarray(xm, np.float64), inertia, np.asarray(w, np.float64))
        drift = np.linalg.norm(ours - l0, axis=-1) / np.linalg.norm(l0)
        if integ == "Euler":
            drift_c = np.linalg.norm(np.asarray(l_c) - l0, axis=-1) / np.linalg.norm(l0)
            assert np.max(np.abs(drift - drift_c)) < 1e-4
            assert np.max(drift) < 5e-3
        else:
            assert np.max(drift) < 1e-5


def _double_pendulum_loss(sys: bp.System, qd0: jax.Array) -> jax.Array:
    s = bp.init(sys, jnp.array([0.3, -0.5], jnp.float32), qd0)
    s, _ = _scan(sys, s, jnp.zeros(0, jnp.float32), 20, lambda x: None)
    weights_q, weights_qd = jnp.array([1.0, 0.5], jnp.float32), jnp.array([0.1, -0.2], jnp.float32)
    return jnp.sum(s.q * weights_q) + jnp.sum(s.qd * weights_qd)


def test_grad_matches_finite_differences() -> None:
    sys = bp.load_mjcf(tm.DOUBLE_PENDULUM)
    qd0 = jnp.array([0.4, -0.7], jnp.float32)

    def loss(qd0: jax.Array, mass: jax.Array) -> jax.Array:
        return _double_pendulum_loss(sys.replace(body_mass=sys.body_mass.at[2].set(mass)), qd0)

    mass = sys.body_mass[2]
    value_and_grad = jax.jit(jax.grad(loss, argnums=(0, 1)))
    g_qd, g_mass = value_and_grad(qd0, mass)
    f = jax.jit(loss)
    eps = 1e-2
    for i in range(2):
        e = jnp.zeros(2, jnp.float32).at[i].set(eps)
        fd = (f(qd0 + e, mass) - f(qd0 - e, mass)) / (2 * eps)
        np.testing.assert_allclose(float(g_qd[i]), float(fd), rtol=1e-2, atol=1e-4)
    fd_mass = (f(qd0, mass + eps) - f(qd0, mass - eps)) / (2 * eps)
    np.testing.assert_allclose(float(g_mass), float(fd_mass), rtol=1e-2, atol=1e-4)
    assert abs(float(g_mass)) > 1e-3  # the check is not vacuous


def test_vmap_over_randomized_masses() -> None:
    sys = bp.load_mjcf(tm.DOUBLE_PENDULUM)
    n = 64
    scale = jax.random.uniform(jax.random.PRNGKey(0), (n, sys.nbody), minval=0.5, maxval=2.0)
    batch = sys.replace(body_mass=sys.body_mass[None, :] * scale)
    # the randomization pattern of brax_envs: a System of in_axes, 0 only on randomized leaves
    in_axes = jax.tree.map(lambda _: None, sys).replace(body_mass=0)
    q0 = jnp.array([0.8, -0.3], jnp.float32)

    def rollout(s: bp.System) -> jax.Array:
        st = bp.init(s, q0)
        st, _ = _scan(s, st, jnp.zeros(0, jnp.float32), 50, lambda x: None)
        return st.q

    batched = jax.jit(jax.vmap(rollout, in_axes=(in_axes,)))(batch)
    single = jax.jit(rollout)
    assert batched.shape == (n, 2)
    want = np.stack([np.asarray(single(sys.replace(body_mass=batch.body_mass[i]))) for i in range(n)])
    np.testing.assert_allclose(np.asarray(batched), want, atol=1e-5)
    assert np.std(want[:, 0]) > 1e-3  # masses really changed the motion
