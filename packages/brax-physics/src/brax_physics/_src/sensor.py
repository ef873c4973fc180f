"""Sensors (MuJoCo mj_sensorPos, mj_sensorVel, mj_sensorAcc): `State.sensordata` in MuJoCo's layout.

Each stage function takes `fwd`, a `State` holding what MuJoCo's `mjData` holds after `mj_forward`
at the point the sensors describe (its position stage, `q`, `qd`, `time`, and the forces and
accelerations of the transition that starts there), and returns the values of that stage's sensor
types, one (n, dim) array per type, with the sensors of a type computed together by gathers with
static index arrays (`layout`). `assemble` puts them in MuJoCo's order (`sys.sensor_adr`) and
applies `sensor_cutoff`. Sensor noise is ignored, as MuJoCo's own `mj_step` ignores it.
Definitions follow MuJoCo's engine_sensor.c (object frames and velocities as mj_objectVelocity and
mj_objectAcceleration; force sensors read `cfrc_int` of mj_rnePostConstraint; rangefinders and
touch zones intersect rays with geoms as engine_ray.c, in `ray`).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
from collections.abc import Sequence
from typing import Final

import jax
import jax.numpy as jnp
import numpy as np
from brax_math import cross, force_cross, inertia_mul, normalize, quat_conj, quat_mul, quat_to_mat
from mujoco import (
    mjtDataType,
    mjtDisableBit,
    mjtObj,
    mjtRayDataField,
    mjtSensor,
    mjtStage,
    mjtTrn,
)

from brax_physics._src import constraint, equality, kinematics, ray
from brax_physics._src.com import mm
from brax_physics._src.linalg import MINVAL
from brax_physics._src.state import State
from brax_physics._src.structure import structure
from brax_physics._src.system import System

_S: Final = mjtSensor

POS_TYPES: Final = (
    _S.mjSENS_MAGNETOMETER, _S.mjSENS_JOINTPOS, _S.mjSENS_ACTUATORPOS, _S.mjSENS_BALLQUAT, _S.mjSENS_FRAMEPOS,
    _S.mjSENS_FRAMEQUAT, _S.mjSENS_FRAMEXAXIS, _S.mjSENS_FRAMEYAXIS, _S.mjSENS_FRAMEZAXIS,
    _S.mjSENS_SUBTREECOM, _S.mjSENS_CLOCK, _S.mjSENS_JOINTLIMITPOS, _S.mjSENS_RANGEFINDER,
    _S.mjSENS_TENDONPOS, _S.mjSENS_TENDONLIMITPOS,
)
"""Position-stage sensor types computed here."""
VEL_TYPES: Final = (
    _S.mjSENS_VELOCIMETER, _S.mjSENS_GYRO, _S.mjSENS_JOINTVEL, _S.mjSENS_ACTUATORVEL, _S.mjSENS_BALLANGVEL,
    _S.mjSENS_FRAMELINVEL, _S.mjSENS_FRAMEANGVEL, _S.mjSENS_SUBTREELINVEL, _S.mjSENS_SUBTREEANGMOM,
    _S.mjSENS_JOINTLIMITVEL, _S.mjSENS_TENDONVEL, _S.mjSENS_TENDONLIMITVEL,
)
"""Velocity-stage sensor types computed here."""
ACC_TYPES: Final = (
    _S.mjSENS_TOUCH, _S.mjSENS_ACCELEROMETER, _S.mjSENS_FORCE, _S.mjSENS_TORQUE, _S.mjSENS_ACTUATORFRC,
    _S.mjSENS_JOINTACTFRC, _S.mjSENS_FRAMELINACC, _S.mjSENS_FRAMEANGACC, _S.mjSENS_JOINTLIMITFRC,
    _S.mjSENS_CONTACT, _S.mjSENS_TENDONACTFRC, _S.mjSENS_TENDONLIMITFRC,
)
"""Acceleration-stage sensor types computed here."""
STAGE: Final[dict[int, int]] = {
    **{int(t): int(mjtStage.mjSTAGE_POS) for t in POS_TYPES},
    **{int(t): int(mjtStage.mjSTAGE_VEL) for t in VEL_TYPES},
    **{int(t): int(mjtStage.mjSTAGE_ACC) for t in ACC_TYPES},
}
"""`mujoco.mjtStage` of every supported `mujoco.mjtSensor` type (the loader refuses the others)."""
FRAME_OBJECTS: Final = (mjtObj.mjOBJ_XBODY, mjtObj.mjOBJ_BODY, mjtObj.mjOBJ_GEOM, mjtObj.mjOBJ_SITE)
"""Object types frame sensors may sense or refer to (cameras are not supported)."""

# Types that read the world-frame pose of an object, optionally relative to a reference object.
_FRAME_POS: Final = (_S.mjSENS_FRAMEPOS, _S.mjSENS_FRAMEXAXIS, _S.mjSENS_FRAMEYAXIS, _S.mjSENS_FRAMEZAXIS)
_RNE_POST: Final = (_S.mjSENS_ACCELEROMETER, _S.mjSENS_FORCE, _S.mjSENS_TORQUE, _S.mjSENS_FRAMELINACC,
             _S.mjSENS_FRAMEANGACC)

Values = dict[int, jax.Array]
"""Sensor values of one or more stages: `mjtSensor` code -> (n, dim) for that type's sensors
(rangefinders, whose dims differ: their values concatenated, sensor by sensor)."""

_R: Final = mjtRayDataField
RAY_FIELDS: Final = ((_R.mjRAYDATA_DIST, 1), (_R.mjRAYDATA_DIR, 3), (_R.mjRAYDATA_ORIGIN, 3),
              (_R.mjRAYDATA_POINT, 3), (_R.mjRAYDATA_NORMAL, 3), (_R.mjRAYDATA_DEPTH, 1))
"""Rangefinder data fields and their widths, in sensordata order (bits of `sensor_intprm[i][0]`)."""


@dataclasses.dataclass(frozen=True, eq=False)
class Layout:
    """Static sensor layout of a model (numpy, trace-time only)."""

    by_type: dict[int, np.ndarray]
    """Sensor ids of each supported type present, in id order."""
    perm: np.ndarray
    """(nsensordata,) position of each sensordata value in the concatenation of `by_type`'s values
    (types in `STAGE`'s order, each (n, dim) flattened)."""
    data_sensor: np.ndarray
    """(nsensordata,) sensor of each value."""
    clip_both: np.ndarray
    """(nsensordata,) bool: real values, which the cutoff clamps on both sides."""
    clip_above: np.ndarray
    """(nsensordata,) bool: positive values, which the cutoff clamps from above."""


def layout(sys: System) -> Layout:
    """The (cached) static sensor layout of `sys`."""
    return _layout(sys.sensor_type, sys.sensor_datatype, sys.sensor_dim, sys.sensor_adr)


@functools.lru_cache(maxsize=64)
def _layout(
    sensor_type: tuple[int, ...], datatype: tuple[int, ...], dim: tuple[int, ...], adr: tuple[int, ...]
) -> Layout:
    types = np.asarray(sensor_type, np.int32)
    by_type = {t: np.flatnonzero(types == t).astype(np.int32) for t in STAGE if np.any(types == t)}
    ndata = sum(dim)
    perm = np.zeros(ndata, np.int32)
    offset = 0
    for ids in by_type.values():
        for i in ids:
            perm[adr[i] : adr[i] + dim[i]] = offset + np.arange(dim[i])
            offset += dim[i]
    data_sensor = np.repeat(np.arange(len(dim), dtype=np.int32), dim)
    kind = np.asarray(datatype, np.int32)[data_sensor] if ndata else np.zeros(0, np.int32)
    return Layout(
        by_type=by_type, perm=perm, data_sensor=data_sensor,
        clip_both=kind == mjtDataType.mjDATATYPE_REAL, clip_above=kind == mjtDataType.mjDATATYPE_POSITIVE,
    )


def _mtv(mat: jax.Array, v: jax.Array) -> jax.Array:
    """(n, 3) matᵀ v of (n, 3, 3) matrices and (n, 3) vectors (world -> frame coordinates)."""
    return jnp.sum(mat * v[:, :, None], axis=1)


def _object_bodies(sys: System, objtype: np.ndarray, objid: np.ndarray) -> np.ndarray:
    """(n,) body of each object (MuJoCo's mjOBJ_XBODY, BODY, GEOM or SITE)."""
    body = np.zeros(objid.shape, np.int32)
    for t, table in ((mjtObj.mjOBJ_XBODY, None), (mjtObj.mjOBJ_BODY, None),
                     (mjtObj.mjOBJ_GEOM, sys.geom_bodyid), (mjtObj.mjOBJ_SITE, sys.site_bodyid)):
        sel = objtype == t
        ids = objid[sel]
        body[sel] = ids if table is None else np.asarray(table, np.int32)[ids]
    return body


def _by_objtype(objtype: np.ndarray, parts: dict[int, jax.Array], n: int) -> jax.Array:
    """Rows computed per object type (`parts[t]` for the objects of type t) put back in object order."""
    order = np.concatenate([np.flatnonzero(objtype == t) for t in parts]).astype(np.int32)
    out = jnp.concatenate(list(parts.values()))
    return out if np.array_equal(order, np.arange(n)) else out[np.argsort(order)]


def site_frames(sys: System, fwd: State, sites: np.ndarray) -> tuple[jax.Array, jax.Array]:
    """(n, 3) positions and (n, 3, 3) orientations of `sites` in the world (MuJoCo site_xpos, site_xmat)."""
    fr = kinematics.Frames(fwd.x.pos, fwd.x.rot, fwd.xanchor, fwd.xaxis, fwd.xipos, fwd.ximat, fwd.geom_xpos,
                           fwd.geom_xmat)
    return kinematics.site_frames(sys, fr, sites)


def object_frames(sys: System, fwd: State, objtype: np.ndarray,
                  objid: np.ndarray) -> tuple[jax.Array, jax.Array]:
    """(n, 3) positions and (n, 3, 3) orientations of objects in the world (MuJoCo get_xpos_xmat)."""
    pos: dict[int, jax.Array] = {}
    mat: dict[int, jax.Array] = {}
    for t in FRAME_OBJECTS:
        ids = objid[objtype == t]
        if not ids.size:
            continue
        if t == mjtObj.mjOBJ_XBODY:
            pos[t], mat[t] = fwd.x.pos[ids], quat_to_mat(fwd.x.rot[ids])
        elif t == mjtObj.mjOBJ_BODY:
            pos[t], mat[t] = fwd.xipos[ids], fwd.ximat[ids]
        elif t == mjtObj.mjOBJ_GEOM:
            pos[t], mat[t] = fwd.geom_xpos[ids], fwd.geom_xmat[ids]
        else:
            pos[t], mat[t] = site_frames(sys, fwd, ids)
    n = objid.size
    return _by_objtype(objtype, pos, n), _by_objtype(objtype, mat, n)


def _object_quats(sys: System, fwd: State, objtype: np.ndarray, objid: np.ndarray) -> jax.Array:
    """(n, 4) world orientations of objects as MuJoCo's get_xquat composes them (never normalized)."""
    parts: dict[int, jax.Array] = {}
    body = _object_bodies(sys, objtype, objid)
    for t in FRAME_OBJECTS:
        sel = objtype == t
        ids = objid[sel]
        if not ids.size:
            continue
        xquat = fwd.x.rot[body[sel]]
        local = {mjtObj.mjOBJ_BODY: sys.body_iquat, mjtObj.mjOBJ_GEOM: sys.geom_quat,
                 mjtObj.mjOBJ_SITE: sys.site_quat}.get(t)
        parts[t] = xquat if local is None else quat_mul(xquat, local[ids])
    return _by_objtype(objtype, parts, objid.size)


def _object_motion(sys: System, fwd: State, spatial: jax.Array, objtype: np.ndarray, objid: np.ndarray,
                   local: bool) -> tuple[jax.Array, jax.Array]:
    """(n, 3) angular and linear parts of com-based motions `spatial` (nbody, 6) at objects' origins.

    World axes, or the objects' own axes when `local` (MuJoCo mju_transformSpatial of a motion from
    the tree's com to the object).
    """
    body = _object_bodies(sys, objtype, objid)
    pos, mat = object_frames(sys, fwd, objtype, objid)
    com = fwd.subtree_com[structure(sys).root[body]]
    m = spatial[body]
    ang, lin = m[:, :3], m[:, 3:] + cross(m[:, :3], pos - com)
    if local:
        ang, lin = _mtv(mat, ang), _mtv(mat, lin)
    return ang, lin


def _meta(sys: System, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Static (objtype, objid, reftype, refid) of sensors `ids`; no reference is the world body's frame."""
    objtype = np.asarray(sys.sensor_objtype, np.int32)[ids]
    objid = np.asarray(sys.sensor_objid, np.int32)[ids]
    refid = np.asarray(sys.sensor_refid, np.int32)[ids]
    # The world body's frame is the identity at the origin with zero motion: relative quantities
    # against it are the global ones, so one code path serves sensors with and without a reference.
    reftype = np.where(refid < 0, int(mjtObj.mjOBJ_XBODY), np.asarray(sys.sensor_reftype, np.int32)[ids])
    return objtype, objid, reftype.astype(np.int32), np.maximum(refid, 0)


def _has_ref(sys: System, ids: np.ndarray) -> bool:
    """Whether any of sensors `ids` measures relative to a reference object (the others: the world)."""
    return bool(np.any(np.asarray(sys.sensor_refid, np.int32)[ids] >= 0))


def _qpos(sys: System, ids: np.ndarray, width: int) -> np.ndarray:
    """(n, width) qpos addresses of the joints sensed by `ids`."""
    jnt = np.asarray(sys.sensor_objid, np.int32)[ids]
    adr: np.ndarray = np.asarray(sys.jnt_qposadr, np.int32)[jnt][:, None] + np.arange(width)[None, :]
    return adr


def _dofs(sys: System, ids: np.ndarray, width: int) -> np.ndarray:
    """(n, width) dof addresses of the joints sensed by `ids`."""
    jnt = np.asarray(sys.sensor_objid, np.int32)[ids]
    adr: np.ndarray = np.asarray(sys.jnt_dofadr, np.int32)[jnt][:, None] + np.arange(width)[None, :]
    return adr


def _actuators(sys: System, ids: np.ndarray) -> np.ndarray:
    """(n,) actuators sensed by `ids`."""
    act: np.ndarray = np.asarray(sys.sensor_objid, np.int32)[ids]
    return act


def _limit_rows(sys: System, fwd: State,
                ids: np.ndarray) -> tuple[np.ndarray, jax.Array, jax.Array, jax.Array]:
    """Limit rows of the joints sensed by `ids`: static index among the limit rows (-1: none) and, per
    sensor, whether the row is active, its distance past the margin (dist - margin) and its velocity
    J·qd (MuJoCo's efc_pos - efc_margin and efc_vel).

    A joint has a row when it is limited and limits are enabled (`constraint.layout`); MuJoCo's
    limit sensors read 0 where its row is not instantiated (farther from the limit than the margin).
    """
    lay = constraint.layout(sys)
    jnt = np.asarray(sys.sensor_objid, np.int32)[ids]
    row = np.asarray([int(np.flatnonzero(lay.limit_jnts == j)[0]) if j in lay.limit_jnts else -1
                      for j in jnt], np.int32)
    if row.max() < 0:
        zero = jnp.zeros(ids.size, fwd.qd.dtype)
        return row, jnp.zeros(ids.size, bool), zero, zero
    dist, jac = constraint.joint_limits(sys, fwd.q)
    r = np.maximum(row, 0)
    over = dist[r] - sys.jnt_margin[jnt]
    active = jnp.asarray(row >= 0) & (over < 0)
    return row, active, over, jnp.sum(jac[r] * fwd.qd[None, :], axis=-1)


def _rangefinder_candidates(sys: System, sites: np.ndarray) -> np.ndarray:
    """(n, ngeom) bool: the geoms the rangefinders on `sites` can hit (MuJoCo's mj_ray with no group
    mask, static geoms included and the site's own body excluded)."""
    body = np.asarray(sys.site_bodyid, np.int32)[sites]
    return np.stack([ray.candidates(sys, None, True, int(b)) for b in body]).reshape(len(sites), sys.ngeom)


def _rangefinder(sys: System, fwd: State, ids: np.ndarray) -> jax.Array:
    """Values of site rangefinders `ids`, concatenated: the ray from the site along its +z axis."""
    sites = np.asarray(sys.sensor_objid, np.int32)[ids]
    spec = np.asarray([sys.sensor_intprm[i][0] for i in ids], np.int64)
    origin, mat = site_frames(sys, fwd, sites)
    vec = mat[:, :, 2]
    hit = ray.cast(sys, fwd.geom_xpos, fwd.geom_xmat, origin, vec, _rangefinder_candidates(sys, sites),
                   normals=bool(np.any(spec & (1 << int(_R.mjRAYDATA_NORMAL)))))
    dist = hit.dist[:, None]
    on = dist >= 0
    # every field for every sensor (MuJoCo's fill_raydata; a site's depth is its distance), then each
    # sensor's fields by its bit mask
    fields = {
        _R.mjRAYDATA_DIST: dist, _R.mjRAYDATA_DIR: jnp.where(on, vec, 0.0), _R.mjRAYDATA_ORIGIN: origin,
        _R.mjRAYDATA_POINT: jnp.where(on, origin + dist * vec, 0.0), _R.mjRAYDATA_NORMAL: hit.normal,
        _R.mjRAYDATA_DEPTH: dist,
    }
    every = jnp.concatenate([fields[f] for f, _ in RAY_FIELDS], axis=1)
    width = sum(w for _, w in RAY_FIELDS)
    starts = np.cumsum([0] + [w for _, w in RAY_FIELDS])
    cols = [np.concatenate([k * width + starts[j] + np.arange(w) for j, (f, w) in enumerate(RAY_FIELDS)
                            if spec[k] & (1 << int(f))]) for k in range(ids.size)]
    return every.reshape(-1)[np.concatenate(cols).astype(np.int32)]


def _tendon_limit_rows(sys: System, fwd: State,
                       ids: np.ndarray) -> tuple[np.ndarray, jax.Array, jax.Array, jax.Array]:
    """As `_limit_rows`, for the tendons sensed by `ids`: static index among the tendon limit rows
    (-1: none), whether the row is active, dist - margin, and the row's sign (+1 at the lower limit)."""
    lay = constraint.layout(sys)
    ten = np.asarray(sys.sensor_objid, np.int32)[ids]
    row = np.asarray([int(np.flatnonzero(lay.limit_tendons == t)[0]) if t in lay.limit_tendons else -1
                      for t in ten], np.int32)
    rng = sys.tendon_range[ten]
    length = fwd.ten_length[ten]
    lo, hi = length - rng[:, 0], rng[:, 1] - length
    over = jnp.minimum(lo, hi) - sys.tendon_margin[ten]  # the nearer limit, as constraint.make_rows
    active = jnp.asarray(row >= 0) & (over < 0)
    return row, active, over, jnp.where(lo < hi, 1.0, -1.0)


def position(sys: System, fwd: State) -> Values:
    """Values of the position-stage sensors (MuJoCo mj_sensorPos)."""
    out: Values = {}
    for t, ids in layout(sys).by_type.items():
        if STAGE[t] != mjtStage.mjSTAGE_POS:
            continue
        objtype, objid, reftype, refid = _meta(sys, ids)
        if t == _S.mjSENS_MAGNETOMETER:
            _, mat = site_frames(sys, fwd, objid)
            out[t] = _mtv(mat, jnp.broadcast_to(sys.opt.magnetic[None, :], (ids.size, 3)))
        elif t == _S.mjSENS_JOINTPOS:
            out[t] = fwd.q[_qpos(sys, ids, 1)]
        elif t == _S.mjSENS_ACTUATORPOS:
            out[t] = fwd.actuator_length[_actuators(sys, ids)][:, None]
        elif t == _S.mjSENS_BALLQUAT:
            out[t] = normalize(fwd.q[_qpos(sys, ids, 4)])
        elif t in _FRAME_POS:
            pos, mat = object_frames(sys, fwd, objtype, objid)
            vec = pos if t == _S.mjSENS_FRAMEPOS else mat[:, :, int(t - _S.mjSENS_FRAMEXAXIS)]
            if _has_ref(sys, ids):
                ref_pos, ref_mat = object_frames(sys, fwd, reftype, refid)
                vec = _mtv(ref_mat, vec - ref_pos if t == _S.mjSENS_FRAMEPOS else vec)
            out[t] = vec
        elif t == _S.mjSENS_FRAMEQUAT:
            quat = _object_quats(sys, fwd, objtype, objid)
            if _has_ref(sys, ids):
                quat = quat_mul(quat_conj(_object_quats(sys, fwd, reftype, refid)), quat)
            out[t] = quat
        elif t == _S.mjSENS_SUBTREECOM:
            out[t] = fwd.subtree_com[objid]
        elif t == _S.mjSENS_CLOCK:
            out[t] = jnp.broadcast_to(fwd.time, (ids.size, 1))
        elif t == _S.mjSENS_JOINTLIMITPOS:
            _, active, over, _ = _limit_rows(sys, fwd, ids)
            out[t] = jnp.where(active, over, 0.0)[:, None]
        elif t == _S.mjSENS_RANGEFINDER:
            out[t] = _rangefinder(sys, fwd, ids)
        elif t == _S.mjSENS_TENDONPOS:
            out[t] = fwd.ten_length[objid][:, None]
        elif t == _S.mjSENS_TENDONLIMITPOS:
            _, active, over, _ = _tendon_limit_rows(sys, fwd, ids)
            out[t] = jnp.where(active, over, 0.0)[:, None]
    return out


def _subtree_momenta(sys: System, fwd: State, cvel: jax.Array, roots: np.ndarray,
                     angular: bool) -> tuple[jax.Array, jax.Array]:
    """(n, 3) linear velocity and angular momentum (about its com) of the subtrees at `roots`.

    MuJoCo's mj_subtreeVel accumulates these child to parent; summed directly over each subtree's
    bodies they are the same quantities (the com and mean velocity of a subtree are its mass-weighted
    means, so the cross terms of the parallel-axis split vanish).
    """
    st = structure(sys)
    every = np.arange(sys.nbody, dtype=np.int32)
    xbody = np.full(sys.nbody, int(mjtObj.mjOBJ_BODY), np.int32)
    ang, lin = _object_motion(sys, fwd, cvel, xbody, every, local=False)  # at each body's com
    mask = jnp.asarray(st.subtree[roots])  # (n, nbody)
    mass = sys.body_mass
    sub_mass = mm(mask, mass)
    linvel = mm(mask, mass[:, None] * lin) / jnp.maximum(sub_mass, MINVAL)[:, None]
    if not angular:
        return linvel, linvel
    # spin: ximat diag(inertia) ximatᵀ ω of every body
    spin = jnp.sum(fwd.ximat * (sys.body_inertia * _mtv(fwd.ximat, ang))[:, None, :], axis=-1)
    dx = fwd.xipos[None, :, :] - fwd.subtree_com[roots][:, None, :]  # (n, nbody, 3)
    dv = lin[None, :, :] - linvel[:, None, :]
    orbit = mass[None, :, None] * cross(dx, dv)
    angmom = mm(mask, spin) + jnp.sum(mask[:, :, None] * orbit, axis=1)
    return linvel, angmom


def velocity(sys: System, fwd: State, cvel: jax.Array) -> Values:
    """Values of the velocity-stage sensors (MuJoCo mj_sensorVel), given the com velocities `cvel`."""
    out: Values = {}
    for t, ids in layout(sys).by_type.items():
        if STAGE[t] != mjtStage.mjSTAGE_VEL:
            continue
        objtype, objid, reftype, refid = _meta(sys, ids)
        if t in (_S.mjSENS_VELOCIMETER, _S.mjSENS_GYRO):
            ang, lin = _object_motion(sys, fwd, cvel, objtype, objid, local=True)
            out[t] = lin if t == _S.mjSENS_VELOCIMETER else ang
        elif t == _S.mjSENS_JOINTVEL:
            out[t] = fwd.qd[_dofs(sys, ids, 1)]
        elif t == _S.mjSENS_ACTUATORVEL:
            out[t] = fwd.actuator_velocity[_actuators(sys, ids)][:, None]
        elif t == _S.mjSENS_BALLANGVEL:
            out[t] = fwd.qd[_dofs(sys, ids, 3)]
        elif t == _S.mjSENS_JOINTLIMITVEL:
            _, active, _, vel = _limit_rows(sys, fwd, ids)
            out[t] = jnp.where(active, vel, 0.0)[:, None]
        elif t == _S.mjSENS_TENDONVEL:
            out[t] = fwd.ten_velocity[objid][:, None]
        elif t == _S.mjSENS_TENDONLIMITVEL:
            _, active, _, sign = _tendon_limit_rows(sys, fwd, ids)
            out[t] = jnp.where(active, sign * fwd.ten_velocity[objid], 0.0)[:, None]
        elif t in (_S.mjSENS_FRAMELINVEL, _S.mjSENS_FRAMEANGVEL):
            ang, lin = _object_motion(sys, fwd, cvel, objtype, objid, local=False)
            if _has_ref(sys, ids):
                pos, _ = object_frames(sys, fwd, objtype, objid)
                ref_pos, ref_mat = object_frames(sys, fwd, reftype, refid)
                ref_ang, ref_lin = _object_motion(sys, fwd, cvel, reftype, refid, local=False)
                # relative velocity, with the linear part corrected for the rotating reference frame
                ang = _mtv(ref_mat, ang - ref_ang)
                lin = _mtv(ref_mat, lin - ref_lin + cross(pos - ref_pos, ref_ang))
            out[t] = lin if t == _S.mjSENS_FRAMELINVEL else ang
        elif t in (_S.mjSENS_SUBTREELINVEL, _S.mjSENS_SUBTREEANGMOM):
            linvel, angmom = _subtree_momenta(sys, fwd, cvel, objid, angular=t == _S.mjSENS_SUBTREEANGMOM)
            out[t] = linvel if t == _S.mjSENS_SUBTREELINVEL else angmom
    return out


def cacc(sys: System, fwd: State, cdof_dot: jax.Array) -> jax.Array:
    """(nbody, 6) com-based body accelerations, gravity as an upward world acceleration (MuJoCo cacc)."""
    st = structure(sys)
    dtype = fwd.qd.dtype
    g = jnp.zeros(3, dtype) if sys.opt.disableflags & mjtDisableBit.mjDSBL_GRAVITY else sys.opt.gravity
    acc = mm(jnp.asarray(st.body_dof), cdof_dot * fwd.qd[:, None] + fwd.cdof * fwd.qacc[:, None])
    return acc + jnp.concatenate([jnp.zeros(3, dtype), -g])[None, :]


def cfrc_ext(sys: System, fwd: State) -> jax.Array:
    """(nbody, 6) com-based external forces on the bodies: contact, connect and weld forces (MuJoCo cfrc_ext).

    The world body's row is zero. Applied forces would add theirs here.
    """
    lay = constraint.layout(sys)
    out = jnp.zeros((sys.nbody, 6), fwd.qd.dtype)
    if lay.eq.connect.size or lay.eq.weld.size:
        out = equality.cfrc_ext(sys, fwd.x.pos, fwd.x.rot, fwd.subtree_com, fwd.efc_force)
    if not lay.ncon:
        return out
    con = fwd.contact
    # contact frame -> world: rows of `frame` are the contact axes
    force = jnp.sum(con.force[:, :3, None] * con.frame, axis=1)
    torque = jnp.sum(con.force[:, 3:, None] * con.frame, axis=1)
    root = structure(sys).root
    for body, sign in ((lay.con_body1, -1.0), (lay.con_body2, 1.0)):
        keep = np.flatnonzero(body > 0)  # MuJoCo applies nothing to the world
        if not keep.size:
            continue
        b = body[keep]
        arm = fwd.subtree_com[root[b]] - con.pos[keep]
        wrench = jnp.concatenate([torque[keep] - cross(arm, force[keep]), force[keep]], axis=-1)
        out = out.at[b].add(sign * wrench)
    return out


def cfrc_int(sys: System, fwd: State, cvel: jax.Array, cacc_: jax.Array) -> jax.Array:
    """(nbody, 6) com-based force each body receives from its parent (MuJoCo cfrc_int)."""
    st = structure(sys)
    body = inertia_mul(fwd.cinert, cacc_) + force_cross(cvel, inertia_mul(fwd.cinert, cvel))
    return mm(jnp.asarray(st.subtree), body - cfrc_ext(sys, fwd))


CONTACT_OBJECTS: Final = (mjtObj.mjOBJ_UNKNOWN, mjtObj.mjOBJ_GEOM, mjtObj.mjOBJ_BODY, mjtObj.mjOBJ_XBODY)
"""Object types a contact sensor may match by (none, geom, body, subtree); sites are not supported."""
CONTACT_REDUCE: Final = {1: "mindist", 2: "maxforce"}
"""Contact-sensor reductions computed here (sensor_intprm[1]); none and netforce are not supported."""
CONTACT_DATA: Final = 0b1111111
"""Contact-sensor data fields computed here (bits of sensor_intprm[0]): found, force, torque, dist,
pos, normal, tangent (not linvel, angvel)."""


def _contact_match(sys: System, geom: np.ndarray, objtype: int, objid: int) -> np.ndarray:
    """(ncon,) bool: contact slots whose geom `geom` (ncon,) is, or is on, the object (MuJoCo checkMatch)."""
    body = np.asarray(sys.geom_bodyid, np.int32)[geom]
    match: np.ndarray
    if objtype == mjtObj.mjOBJ_UNKNOWN:
        match = np.ones(geom.shape, bool)
    elif objtype == mjtObj.mjOBJ_GEOM:
        match = geom == objid
    elif objtype == mjtObj.mjOBJ_BODY:
        match = body == objid
    else:  # subtree (MuJoCo's XBODY): the body or a descendant
        match = structure(sys).subtree[objid][body] > 0
    return match


def _contact(sys: System, fwd: State, i: int) -> jax.Array:
    """(sensor_dim[i],) contact sensor `i` (MuJoCo mjSENS_CONTACT): the `num` matching contacts with the
    least distance or the largest force, each slot the fields of `dataspec`; normal and tangent
    flipped (force and torque z negated) where the contact's geom order is opposite to the sensor's."""
    dataspec, reduce, num = sys.sensor_intprm[i][:3]
    dim = sys.sensor_dim[i]
    dtype = fwd.qd.dtype
    geom1 = np.concatenate([np.repeat(g.geom1, g.ncon_per_pair) for g in sys.contact_pairs.groups]
                           ).astype(np.int32) if sys.contact_pairs.groups else np.zeros(0, np.int32)
    geom2 = np.concatenate([np.repeat(g.geom2, g.ncon_per_pair) for g in sys.contact_pairs.groups]
                           ).astype(np.int32) if sys.contact_pairs.groups else np.zeros(0, np.int32)
    t1, id1 = int(sys.sensor_objtype[i]), int(sys.sensor_objid[i])
    t2, id2 = int(sys.sensor_reftype[i]), int(sys.sensor_refid[i])
    m11, m12 = _contact_match(sys, geom1, t1, id1), _contact_match(sys, geom2, t1, id1)
    m21, m22 = _contact_match(sys, geom1, t2, id2), _contact_match(sys, geom2, t2, id2)
    keep = (m11 | m12) & (m21 | m22)
    unknown = int(mjtObj.mjOBJ_UNKNOWN)
    if t1 != unknown and t2 != unknown:
        flip = (m12 & m21) & ~(m11 & m22)
    elif t1 != unknown:
        flip = ~m11
    elif t2 != unknown:
        flip = ~m22
    else:
        flip = np.zeros(keep.shape, bool)
    cand = np.flatnonzero(keep).astype(np.int32)
    if constraint.layout(sys).ncon == 0 or not cand.size:
        return jnp.zeros(dim, dtype)
    c = fwd.contact
    active = c.active[cand]
    nfound = jnp.sum(active).astype(dtype)
    force = c.force[cand]
    crit = c.dist[cand] if reduce == 1 else -jnp.sum(force[:, :3] ** 2, axis=-1)
    k = min(int(num), cand.size)
    pick = jnp.argsort(jnp.where(active, crit, jnp.inf), stable=True)[:k]
    sign = jnp.where(jnp.asarray(flip[cand]), -1.0, 1.0).astype(dtype)[pick][:, None]
    zflip = jnp.concatenate([jnp.ones((k, 2), dtype), sign], axis=-1)
    frame = c.frame[cand][pick]
    fields = (jnp.broadcast_to(nfound, (k, 1)), force[pick, :3] * zflip, force[pick, 3:] * zflip,
              c.dist[cand][pick][:, None], c.pos[cand][pick], frame[:, 0] * sign, frame[:, 1] * sign)
    rows = jnp.concatenate([f for j, f in enumerate(fields) if dataspec & (1 << j)], axis=-1)
    rows = jnp.where((jnp.arange(k, dtype=dtype) < nfound)[:, None], rows, 0.0)
    return jnp.concatenate([rows.reshape(-1), jnp.zeros(dim - rows.size, dtype)])


def _touch(sys: System, fwd: State, ids: np.ndarray) -> jax.Array:
    """(n, 1) normal contact force on the sensor's body from contacts whose normal ray meets its site zone."""
    lay = constraint.layout(sys)
    dtype = fwd.qd.dtype
    sites = np.asarray(sys.sensor_objid, np.int32)[ids]
    if not lay.ncon:
        return jnp.zeros((ids.size, 1), dtype)
    body = np.asarray(sys.site_bodyid, np.int32)[sites][:, None]
    on1, on2 = body == lay.con_body1[None, :], body == lay.con_body2[None, :]  # (n, ncon)
    cols = np.flatnonzero((on1 | on2).any(axis=0))  # only contacts that can touch a sensor
    if not cols.size:
        return jnp.zeros((ids.size, 1), dtype)
    con = fwd.contact
    normal = con.force[cols, 0]
    # the ray runs along the force on the sensor's body: the contact normal points from geom1 to geom2
    direction = con.frame[cols, 0][None, :, :] * jnp.where(jnp.asarray(on2[:, cols]), -1.0, 1.0)[:, :, None]
    pos, mat = site_frames(sys, fwd, sites)
    rel = con.pos[cols][None, :, :] - pos[:, None, :]
    lp = jnp.sum(mat[:, None, :, :] * rel[:, :, :, None], axis=2)  # (n, ncon, 3) in site axes
    lv = jnp.sum(mat[:, None, :, :] * direction[:, :, :, None], axis=2)
    size = jnp.broadcast_to(sys.site_size[sites][:, None, :], lp.shape)
    site_type = np.asarray(sys.site_type, np.int32)[sites]
    hit = jnp.zeros(lp.shape[:2], bool)
    for g in np.unique(site_type):
        rows = jnp.asarray(site_type == g)[:, None]
        hit = hit | (rows & (ray.local_distance(int(g), size, lp, lv) >= 0))
    use = jnp.asarray((on1 | on2)[:, cols]) & hit & (normal > 0)[None, :]
    return jnp.sum(jnp.where(use, normal[None, :], 0.0), axis=1, keepdims=True)


def acceleration(sys: System, fwd: State, cvel: jax.Array, cdof_dot: jax.Array) -> Values:
    """Values of the acceleration-stage sensors (MuJoCo mj_sensorAcc), given cvel and cdof_dot.

    cacc and cfrc_int (MuJoCo's mj_rnePostConstraint) are computed only for models with sensors
    that read them.
    """
    out: Values = {}
    by_type = layout(sys).by_type
    post = any(t in by_type for t in _RNE_POST)
    acc = cacc(sys, fwd, cdof_dot) if post else None
    frc = cfrc_int(sys, fwd, cvel, acc) if acc is not None and (
        _S.mjSENS_FORCE in by_type or _S.mjSENS_TORQUE in by_type) else None
    for t, ids in by_type.items():
        if STAGE[t] != mjtStage.mjSTAGE_ACC:
            continue
        objtype, objid, _, _ = _meta(sys, ids)
        if t == _S.mjSENS_TOUCH:
            out[t] = _touch(sys, fwd, ids)
        elif t in (_S.mjSENS_ACCELEROMETER, _S.mjSENS_FRAMELINACC, _S.mjSENS_FRAMEANGACC):
            assert acc is not None
            local = t == _S.mjSENS_ACCELEROMETER
            a_ang, a_lin = _object_motion(sys, fwd, acc, objtype, objid, local)
            v_ang, v_lin = _object_motion(sys, fwd, cvel, objtype, objid, local)
            # mj_objectAcceleration: the Coriolis term of the frame moving with the object
            lin = a_lin + cross(v_ang, v_lin)
            out[t] = a_ang if t == _S.mjSENS_FRAMEANGACC else lin
        elif t in (_S.mjSENS_FORCE, _S.mjSENS_TORQUE):
            assert frc is not None
            body = _object_bodies(sys, objtype, objid)
            pos, mat = site_frames(sys, fwd, objid)
            f = frc[body]
            arm = pos - fwd.subtree_com[structure(sys).root[body]]
            if t == _S.mjSENS_FORCE:
                out[t] = _mtv(mat, f[:, 3:])
            else:
                out[t] = _mtv(mat, f[:, :3] - cross(arm, f[:, 3:]))
        elif t == _S.mjSENS_ACTUATORFRC:
            out[t] = fwd.actuator_force[_actuators(sys, ids)][:, None]
        elif t == _S.mjSENS_JOINTACTFRC:
            out[t] = fwd.qfrc_actuator[_dofs(sys, ids, 1)]
        elif t == _S.mjSENS_JOINTLIMITFRC:
            row, active, _, _ = _limit_rows(sys, fwd, ids)
            if row.max() < 0:
                out[t] = jnp.zeros((ids.size, 1), fwd.qd.dtype)
            else:
                force = fwd.efc_force[constraint.layout(sys).limit_start + np.maximum(row, 0)]
                out[t] = jnp.where(active, force, 0.0)[:, None]
        elif t == _S.mjSENS_CONTACT:
            out[t] = jnp.concatenate([_contact(sys, fwd, int(i)) for i in ids])
        elif t == _S.mjSENS_TENDONACTFRC:
            # the forces of the actuators that pull on the tendon (tendon transmissions)
            through = (np.asarray(sys.actuator_trntype, np.int32)[None, :] == int(mjtTrn.mjTRN_TENDON)) & (
                np.asarray([a for a, _ in sys.actuator_trnid], np.int32).reshape(1, -1) == objid[:, None])
            if through.any():
                out[t] = mm(jnp.asarray(through, fwd.qd.dtype), fwd.actuator_force)[:, None]
            else:
                out[t] = jnp.zeros((ids.size, 1), fwd.qd.dtype)
        elif t == _S.mjSENS_TENDONLIMITFRC:
            row, active, _, _ = _tendon_limit_rows(sys, fwd, ids)
            if row.max() < 0:
                out[t] = jnp.zeros((ids.size, 1), fwd.qd.dtype)
            else:
                lay = constraint.layout(sys)
                force = fwd.efc_force[lay.limit_start + lay.limit_jnts.size + np.maximum(row, 0)]
                out[t] = jnp.where(active, force, 0.0)[:, None]
    return out


def assemble(sys: System, values: Values) -> jax.Array:
    """(nsensordata,) `values` of all stages in MuJoCo's layout, clamped by `sensor_cutoff`."""
    lay = layout(sys)
    flat = jnp.concatenate([values[t].reshape(-1) for t in lay.by_type])
    data = flat[lay.perm]
    if not (lay.clip_both.any() or lay.clip_above.any()):
        return data
    cut = sys.sensor_cutoff[lay.data_sensor]
    on = cut > 0
    data = jnp.where(on & jnp.asarray(lay.clip_both | lay.clip_above), jnp.minimum(data, cut), data)
    return jnp.where(on & jnp.asarray(lay.clip_both), jnp.maximum(data, -cut), data)


def sites(sys: System, state: State, names: Sequence[str]) -> tuple[jax.Array, jax.Array]:
    """(n, 3) world positions and (n, 3, 3) orientations of the sites called `names` at `state`
    (MuJoCo site_xpos, site_xmat)."""
    missing = [n for n in names if not n or n not in sys.site_names]
    if missing:
        named = [n for n in sys.site_names if n]
        raise ValueError(f"brax_physics.sites: no site named {missing}; sites: {named}")
    return site_frames(sys, state, np.asarray([sys.site_names.index(n) for n in names], np.int32))


def sensor(sys: System, state: State, name: str) -> jax.Array:
    """(..., dim) values of the sensor called `name` in `state.sensordata` (leading batch axes kept)."""
    if name not in sys.sensor_names or not name:
        named = [n for n in sys.sensor_names if n]
        close = difflib.get_close_matches(name, named, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"brax_physics.sensor: no sensor named {name!r}{hint}; sensors: {named}")
    i = sys.sensor_names.index(name)
    adr, dim = sys.sensor_adr[i], sys.sensor_dim[i]
    return state.sensordata[..., adr : adr + dim]
