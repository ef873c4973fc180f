"""Test helpers: run MuJoCo C on poses and compare its `d.contact` with `collide` (not in the wheel)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from brax_physics._src.collision.contact import Contact, collide
from brax_physics._src.loader import from_mjmodel
from brax_physics._src.system import System


@dataclasses.dataclass
class Batch:
    """MuJoCo results for a batch of poses of one model."""

    m: mujoco.MjModel
    xpos: np.ndarray  # (B, ngeom, 3)
    xmat: np.ndarray  # (B, ngeom, 3, 3)
    contacts: list[list[dict[str, np.ndarray]]]  # per pose: MuJoCo's active contacts


def mj_batch(m: mujoco.MjModel, qposes: Sequence[np.ndarray] | np.ndarray) -> Batch:
    """Run mj_kinematics + mj_collision per qpos and keep the contacts that produce rows."""
    d = mujoco.MjData(m)
    xpos, xmat, contacts = [], [], []
    for q in qposes:
        d.qpos[:] = q
        mujoco.mj_kinematics(m, d)
        mujoco.mj_collision(m, d)
        xpos.append(d.geom_xpos.copy())
        xmat.append(d.geom_xmat.reshape(-1, 3, 3).copy())
        cons = []
        for i in range(d.ncon):
            c = d.contact[i]
            if c.dist < c.includemargin:
                cons.append({
                    "geom": np.array(c.geom), "dist": np.float64(c.dist), "pos": c.pos.copy(),
                    "frame": c.frame.reshape(3, 3).copy(), "dim": np.int32(c.dim),
                    "friction": c.friction.copy(), "solref": c.solref.copy(),
                    "solimp": c.solimp.copy(), "includemargin": np.float64(c.includemargin),
                })
        contacts.append(cons)
    return Batch(m, np.array(xpos), np.array(xmat), contacts)


@jax.jit
def _collide_poses(sys: System, xpos: jax.Array, xmat: jax.Array) -> Contact:
    """`collide` at each pose in turn (`jax.lax.map`: the oracle compares poses, not batching, and a
    mapped program skips vmap's batching of the GJK/EPA loops). One jitted driver for every model:
    Systems with the same structure (pairs, names) share its compiled program, since their sizes and
    contact parameters are leaves."""
    out: Contact = jax.lax.map(lambda a: collide(sys, *a), (xpos, xmat))
    return out


def system_of(m: mujoco.MjModel) -> System:
    """`from_mjmodel(m)` without its MjModel reference, so same-structure models share compiles."""
    return from_mjmodel(m).replace(mj_model_ref=None)


def run_ours(batch: Batch, sys: System | None = None) -> list[list[dict[str, np.ndarray]]]:
    """Our active contacts for every pose of `batch` under `sys` (default: `batch.m`'s), as numpy dicts."""
    out = _collide_poses(
        system_of(batch.m) if sys is None else sys, jnp.asarray(batch.xpos, jnp.float32),
        jnp.asarray(batch.xmat, jnp.float32),
    )
    res = []
    for b in range(batch.xpos.shape[0]):
        act = np.asarray(out.active[b])
        res.append([
            {
                "geom": np.array([out.geom1[b, i], out.geom2[b, i]]), "dist": np.asarray(out.dist[b, i]),
                "pos": np.asarray(out.pos[b, i]), "frame": np.asarray(out.frame[b, i]),
                "dim": np.asarray(out.dim[b, i]), "friction": np.asarray(out.friction[b, i]),
                "solref": np.asarray(out.solref[b, i]), "solimp": np.asarray(out.solimp[b, i]),
                "includemargin": np.asarray(out.includemargin[b, i]),
            }
            for i in np.nonzero(act)[0]
        ])
    return res


def mismatches(
    mj: list[dict[str, np.ndarray]], ours: list[dict[str, np.ndarray]], tol: float = 2e-5,
    tangents: bool = True,
) -> list[str]:
    """Differences between two contact lists, matching contacts by geom pair then position."""
    errs: list[str] = []
    if len(mj) != len(ours):
        errs.append(f"count {len(mj)} (MuJoCo) vs {len(ours)} (ours)")
    used: set[int] = set()
    for c in mj:
        cands = [
            (float(np.linalg.norm(o["pos"] - c["pos"])), j)
            for j, o in enumerate(ours)
            if j not in used and tuple(o["geom"]) == tuple(c["geom"])
        ]
        if not cands:
            errs.append(f"MuJoCo contact {c['geom']} at {c['pos']} (dist {c['dist']:.6f}) missing")
            continue
        _, j = min(cands)
        used.add(j)
        o = ours[j]
        for key in ("dist", "pos", "includemargin"):
            if not np.allclose(o[key], c[key], atol=tol, rtol=0):
                errs.append(f"{key}: MuJoCo {c[key]} vs ours {o[key]}")
        rows = 3 if tangents else 1
        if not np.allclose(o["frame"][:rows], c["frame"][:rows], atol=20 * tol):
            errs.append(f"frame: MuJoCo {c['frame'].tolist()} vs ours {o['frame'].tolist()}")
        for key in ("dim", "friction", "solref", "solimp"):
            if not np.allclose(o[key], c[key], atol=1e-6, rtol=1e-6):
                errs.append(f"{key}: MuJoCo {c[key]} vs ours {o[key]}")
    return errs


def compare_batch(
    batch: Batch, tol: float = 2e-5, tangents: bool = True, sys: System | None = None
) -> list[str]:
    """All mismatches over a batch, prefixed with the pose index (ours under `sys`, default `batch.m`'s)."""
    ours = run_ours(batch, sys)
    return [
        f"pose {b}: {e}"
        for b in range(len(ours))
        for e in mismatches(batch.contacts[b], ours[b], tol, tangents)
    ]
