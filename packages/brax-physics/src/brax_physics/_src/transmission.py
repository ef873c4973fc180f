"""Actuator transmissions (MuJoCo mj_transmission): actuator_length (nu,) and actuator_moment (nu, nv).

Each actuator maps its scalar force to generalized forces through its moment row, and its length
and velocity (moment · qd) are what gains, biases and sensors read. Transmissions of one kind are
computed together by gathers with static index arrays; a model whose actuators all drive hinge or
slide joints takes the gather/scatter fast path (`joint_only`) and never forms a Jacobian.
"""

from __future__ import annotations

import functools
from typing import Final, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from brax_math import cross, normalize, point_velocity, quat_conj, quat_log, quat_mul, rotate
from mujoco import mjtJoint, mjtTrn

from brax_physics._src.kinematics import Frames, site_frames
from brax_physics._src.structure import structure
from brax_physics._src.system import System

_JOINTS: Final = (mjtTrn.mjTRN_JOINT, mjtTrn.mjTRN_JOINTINPARENT)
_SCALAR: Final = (mjtJoint.mjJNT_HINGE, mjtJoint.mjJNT_SLIDE)


class Transmission(NamedTuple):
    """Position-stage actuator quantities."""

    length: jax.Array  # (nu,) actuator_length
    moment: jax.Array  # (nu, nv) actuator_moment (dense)


def joint_only(sys: System) -> bool:
    """Whether every actuator drives a hinge or slide joint: one dof each, moment = gear[0] there."""
    return all(t in _JOINTS and sys.jnt_type[sys.actuator_trnid[i][0]] in _SCALAR
               for i, t in enumerate(sys.actuator_trntype))


def velocity(sys: System, moment: jax.Array, qd: jax.Array) -> jax.Array:
    """(nu,) actuator_velocity: moment · qd (a gather on the joint-only fast path)."""
    if joint_only(sys):
        return sys.actuator_gear[:, 0] * qd[structure(sys).act_dof]
    return jnp.dot(moment, qd, precision=jax.lax.Precision.HIGHEST)


class _Groups(NamedTuple):
    """Actuator ids of each transmission kind (static)."""

    scalar: np.ndarray  # joint/jointinparent on hinge or slide
    ball: np.ndarray
    free: np.ndarray
    site: np.ndarray  # site without refsite
    refsite: np.ndarray
    crank: np.ndarray  # slider-crank
    tendon: np.ndarray


def _groups(sys: System) -> _Groups:
    kinds: dict[str, list[int]] = {k: [] for k in _Groups._fields}
    for i, t in enumerate(sys.actuator_trntype):
        target, ref = sys.actuator_trnid[i]
        if t in _JOINTS:
            jt = sys.jnt_type[target]
            kinds["scalar" if jt in _SCALAR else "ball" if jt == mjtJoint.mjJNT_BALL else "free"].append(i)
        elif t == mjtTrn.mjTRN_SITE:
            kinds["site" if ref < 0 else "refsite"].append(i)
        elif t == mjtTrn.mjTRN_SLIDERCRANK:
            kinds["crank"].append(i)
        elif t == mjtTrn.mjTRN_TENDON:
            kinds["tendon"].append(i)
        else:
            raise ValueError(f"transmission type {t} of actuator {i} is not supported")
    return _Groups(**{k: np.asarray(v, np.int32) for k, v in kinds.items()})


def _point_jacobians(sys: System, cdof: jax.Array, subtree_com: jax.Array, bodies: np.ndarray,
                     points: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(n, nv, 3) translational and rotational Jacobians of world `points` (n, 3) fixed to `bodies`."""
    st = structure(sys)
    mask = jnp.asarray(st.body_dof[bodies], cdof.dtype)[..., None]  # (n, nv, 1)
    off = points - subtree_com[st.root[bodies]]
    jacp = point_velocity(cdof[None], off[:, None, :]) * mask
    return jacp, cdof[None, :, :3] * mask


@functools.lru_cache(maxsize=64)
def _common_chain(site_bodyid: tuple[int, ...], body_weldid: tuple[int, ...], body_dofadr: tuple[int, ...],
                  body_dofnum: tuple[int, ...], dof_parentid: tuple[int, ...],
                  pairs: tuple[tuple[int, int], ...]) -> np.ndarray:
    """(n, nv) float mask: 0 on the dofs that move both sites of each (site, refsite) pair, else 1.

    MuJoCo drops the common ancestral dof chain from a refsite transmission's relative Jacobian.
    """
    nv = len(dof_parentid)
    keep = np.ones((len(pairs), nv), np.float32)
    for k, (s0, s1) in enumerate(pairs):
        b0, b1 = body_weldid[site_bodyid[s0]], body_weldid[site_bodyid[s1]]
        d0, d1 = body_dofadr[b0] + body_dofnum[b0] - 1, body_dofadr[b1] + body_dofnum[b1] - 1
        if body_dofnum[b0] == 0 or body_dofnum[b1] == 0:
            continue
        while d0 != d1 and d0 >= 0 and d1 >= 0:
            if d0 < d1:
                d1 = dof_parentid[d1]
            else:
                d0 = dof_parentid[d0]
        da = d0 if d0 == d1 else -1
        while da >= 0:
            keep[k, da] = 0.0
            da = dof_parentid[da]
    return keep


def _rows(n: int, nv: int, cols: np.ndarray, values: jax.Array) -> jax.Array:
    """(n, nv) rows with `values` (n, k) at the static columns `cols` (n, k)."""
    out = jnp.zeros((n, nv), values.dtype)
    return out.at[np.arange(n)[:, None], cols].set(values)


def transmission(sys: System, fr: Frames, q: jax.Array, cdof: jax.Array, subtree_com: jax.Array,
                 ten_length: jax.Array | None = None, ten_J: jax.Array | None = None) -> Transmission:
    """Actuator lengths and moments at positions `q` (MuJoCo mj_transmission)."""
    st = structure(sys)
    nu, nv, dtype = sys.nu, sys.nv, q.dtype
    gear = sys.actuator_gear
    if joint_only(sys):
        length = gear[:, 0] * q[st.act_qpos]
        moment = jnp.zeros((nu, nv), dtype).at[np.arange(nu), st.act_dof].set(gear[:, 0])
        return Transmission(length, moment)

    g = _groups(sys)
    trnid = np.asarray(sys.actuator_trnid, np.int32).reshape(nu, 2)
    in_parent = np.asarray(sys.actuator_trntype, np.int32) == mjtTrn.mjTRN_JOINTINPARENT
    jnt_qposadr, jnt_dofadr = np.asarray(sys.jnt_qposadr, np.int32), np.asarray(sys.jnt_dofadr, np.int32)
    site_body = np.asarray(sys.site_bodyid, np.int32)
    lengths: list[jax.Array] = []
    moments: list[jax.Array] = []
    order: list[np.ndarray] = []

    def add(ids: np.ndarray, length: jax.Array, moment: jax.Array) -> None:
        lengths.append(length)
        moments.append(moment)
        order.append(ids)

    if g.scalar.size:
        a = g.scalar
        j = trnid[a, 0]
        add(a, gear[a, 0] * q[jnt_qposadr[j]], _rows(a.size, nv, jnt_dofadr[j][:, None], gear[a, :1]))
    if g.ball.size:
        a = g.ball
        j = trnid[a, 0]
        quat = q[jnt_qposadr[j][:, None] + np.arange(4)]
        axis = quat_log(quat)  # MuJoCo's mju_quat2Vel of the normalized quaternion
        # jointinparent: the gear is given in the parent frame, so express it in the child's
        gear_axis = jnp.where(in_parent[a][:, None], rotate(gear[a, :3], quat_conj(normalize(quat))),
                              gear[a, :3])
        add(a, jnp.sum(axis * gear_axis, axis=-1), _rows(a.size, nv, jnt_dofadr[j][:, None] + np.arange(3),
                                                         gear_axis))
    if g.free.size:
        a = g.free
        j = trnid[a, 0]
        quat = q[jnt_qposadr[j][:, None] + 3 + np.arange(4)]
        gear_axis = jnp.where(in_parent[a][:, None], rotate(gear[a, 3:], quat_conj(normalize(quat))),
                              gear[a, 3:])
        cols = jnt_dofadr[j][:, None] + np.arange(6)
        rows = _rows(a.size, nv, cols, jnp.concatenate([gear[a, :3], gear_axis], -1))
        add(a, jnp.zeros(a.size, dtype), rows)
    if g.site.size:
        a = g.site
        s = trnid[a, 0]
        pos, mat = site_frames(sys, fr, s)
        jacp, jacr = _point_jacobians(sys, cdof, subtree_com, site_body[s], pos)
        wt = jnp.einsum("nij,nj->ni", mat, gear[a, :3])  # gear in the world frame
        wr = jnp.einsum("nij,nj->ni", mat, gear[a, 3:])
        moment = jnp.einsum("nvi,ni->nv", jacp, wt) + jnp.einsum("nvi,ni->nv", jacr, wr)
        add(a, jnp.zeros(a.size, dtype), moment)
    if g.refsite.size:
        a = g.refsite
        s, r = trnid[a, 0], trnid[a, 1]
        pairs = tuple(zip(s.tolist(), r.tolist(), strict=True))
        keep = jnp.asarray(_common_chain(sys.site_bodyid, sys.body_weldid, sys.body_dofadr, sys.body_dofnum,
                                         sys.dof_parentid, pairs), dtype)
        pos, _ = site_frames(sys, fr, s)
        rpos, rmat = site_frames(sys, fr, r)
        jacp, jacr = _point_jacobians(sys, cdof, subtree_com, site_body[s], pos)
        rjacp, rjacr = _point_jacobians(sys, cdof, subtree_com, site_body[r], rpos)
        # translation: site position in the refsite frame, along the gear
        vec = jnp.einsum("nji,nj->ni", rmat, pos - rpos)
        length = jnp.sum(vec * gear[a, :3], axis=-1)
        wt = jnp.einsum("nij,nj->ni", rmat, gear[a, :3])
        moment = jnp.einsum("nvi,ni->nv", jacp - rjacp, wt)
        # rotation: relative orientation of the two site frames as a rotation vector
        quat = quat_mul(fr.xquat[site_body[s]], sys.site_quat[s])
        rquat = quat_mul(fr.xquat[site_body[r]], sys.site_quat[r])
        rvec = quat_log(quat_mul(quat_conj(rquat), quat))
        length = length + jnp.sum(rvec * gear[a, 3:], axis=-1)
        wr = jnp.einsum("nij,nj->ni", rmat, gear[a, 3:])
        moment = moment + jnp.einsum("nvi,ni->nv", jacr - rjacr, wr)
        add(a, length, moment * keep)
    if g.crank.size:
        a = g.crank
        crank, slider = trnid[a, 0], trnid[a, 1]
        cpos, _ = site_frames(sys, fr, crank)
        spos, smat = site_frames(sys, fr, slider)
        axis = smat[:, :, 2]
        vec = cpos - spos
        rod = sys.actuator_cranklength[a]
        av = jnp.sum(vec * axis, axis=-1)
        det = av * av + rod * rod - jnp.sum(vec * vec, axis=-1)
        ok = det > 0
        sdet = jnp.sqrt(jnp.where(ok, det, 1.0))
        length = jnp.where(ok, av - sdet, av)
        c = jnp.where(ok, 1 - av / sdet, 1.0)[:, None]
        dldv = jnp.where(ok[:, None], axis * c + vec / sdet[:, None], axis)
        dlda = vec * c
        sjacp, sjacr = _point_jacobians(sys, cdof, subtree_com, site_body[slider], spos)
        cjacp, _ = _point_jacobians(sys, cdof, subtree_com, site_body[crank], cpos)
        jac_axis = cross(sjacr, axis[:, None, :])  # d axis / d q (columns ω × axis)
        moment = jnp.einsum("nvi,ni->nv", jac_axis, dlda) + jnp.einsum("nvi,ni->nv", cjacp - sjacp, dldv)
        add(a, length * gear[a, 0], moment * gear[a, :1])
    if g.tendon.size:
        if ten_length is None or ten_J is None:
            raise ValueError("tendon transmissions need the tendon lengths and Jacobians")
        a = g.tendon
        t = trnid[a, 0]
        add(a, gear[a, 0] * ten_length[t], gear[a, :1] * ten_J[t])

    perm = np.argsort(np.concatenate(order))
    return Transmission(jnp.concatenate(lengths)[perm], jnp.concatenate(moments)[perm])



@functools.lru_cache(maxsize=64)
def _inheriting(jnt_actuatorid: tuple[int, ...], jnt_type: tuple[int, ...], jnt_dofadr: tuple[int, ...],
                actuator_trntype: tuple[int, ...], actuator_trnid: tuple[tuple[int, int], ...]
                ) -> tuple[np.ndarray, np.ndarray]:
    """(actuator, dof) pairs whose damping/armature a joint inherits (MuJoCo's mj_actuatorDamping)."""
    width = {int(mjtJoint.mjJNT_FREE): 6, int(mjtJoint.mjJNT_BALL): 3}
    acts, dofs = [], []
    for j, aid in enumerate(jnt_actuatorid):
        if aid == -1:
            continue
        # one actuator named by the compiler, or (-2) every joint-transmission actuator of the joint
        ids = [aid] if aid >= 0 else [k for k, t in enumerate(actuator_trntype)
                                      if t in _JOINTS and actuator_trnid[k][0] == j]
        for k in ids:
            for d in range(jnt_dofadr[j], jnt_dofadr[j] + width.get(jnt_type[j], 1)):
                acts.append(k)
                dofs.append(d)
    return np.asarray(acts, np.int32), np.asarray(dofs, np.int32)


def inherited(sys: System, per_actuator: jax.Array) -> jax.Array | None:
    """(nv,) Σ per_actuator·gear[0]² over the actuators each dof's joint inherits from, or None if none.

    MuJoCo's actuator damping and armature act on the transmission's joint this way (compiler's
    jnt_actuatorid, set where an actuator had nonzero damping or armature at load).
    """
    acts, dofs = _inheriting(sys.jnt_actuatorid, sys.jnt_type, sys.jnt_dofadr, sys.actuator_trntype,
                             sys.actuator_trnid)
    if not acts.size:
        return None
    g = sys.actuator_gear[acts, 0]
    return jnp.zeros(sys.nv, per_actuator.dtype).at[dofs].add(per_actuator[acts] * g * g)
