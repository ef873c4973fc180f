"""GAE against a direct Python implementation."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from brax_train.ppo.losses import compute_gae


def reference_gae(
    trunc: np.ndarray,
    term: np.ndarray,
    r: np.ndarray,
    v: np.ndarray,
    boot: np.ndarray,
    lam: float,
    gamma: float,
) -> tuple[np.ndarray, np.ndarray]:
    T = r.shape[0]
    nxt = np.concatenate([v[1:], boot[None]])
    adv_acc = np.zeros_like(boot)
    vs_minus_v = np.zeros_like(r)
    for t in reversed(range(T)):
        delta = (r[t] + gamma * (1 - term[t]) * nxt[t] - v[t]) * (1 - trunc[t])
        adv_acc = delta + gamma * lam * (1 - term[t]) * (1 - trunc[t]) * adv_acc
        vs_minus_v[t] = adv_acc
    vs = vs_minus_v + v
    nvs = np.concatenate([vs[1:], boot[None]])
    adv = (r + gamma * (1 - term) * nvs - v) * (1 - trunc)
    return vs, adv


def test_gae_matches_reference_with_truncation_and_termination() -> None:
    rng = np.random.default_rng(0)
    T, B = 7, 3
    r = rng.normal(size=(T, B)).astype(np.float32)
    v = rng.normal(size=(T, B)).astype(np.float32)
    boot = rng.normal(size=(B,)).astype(np.float32)
    term = np.zeros((T, B), np.float32)
    trunc = np.zeros((T, B), np.float32)
    term[2, 0] = 1.0
    trunc[4, 1] = 1.0
    vs, adv = compute_gae(
        jnp.asarray(trunc), jnp.asarray(term), jnp.asarray(r), jnp.asarray(v), jnp.asarray(boot), 0.9, 0.97
    )
    evs, eadv = reference_gae(trunc, term, r, v, boot, 0.9, 0.97)
    np.testing.assert_allclose(np.asarray(vs), evs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(adv), eadv, rtol=1e-5, atol=1e-5)
    assert adv[4, 1] == 0.0  # truncated steps carry no signal
    # a terminal step does not bootstrap: advantage is r - V
    np.testing.assert_allclose(float(adv[2, 0]), r[2, 0] - v[2, 0], rtol=1e-5)
