"""Spatial algebra: rigid transforms, and functions on motion and force 6-vectors and spatial inertias.

Conventions (MuJoCo's `cvel`/`cfrc`/`cinert` layouts): a motion is `[ang; vel]` (angular
velocity, then the linear velocity of the body-fixed point at the reference point); a force is
`[torque about the reference point; force]`; a spatial inertia is the 10-vector
`(Ixx, Iyy, Izz, Ixy, Ixz, Iyz, m·c, m)` about the reference point, `c` the centre of mass
relative to it. Every function acts on the last axis (axes) and broadcasts over leading axes of
equal rank. `Transform` and `Motion` are frozen dataclasses registered as pytrees.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Self

import jax
import jax.numpy as jnp

from brax_math.quaternion import inv_rotate, quat_conj, quat_identity, quat_mul, rotate
from brax_math.vector import _cross_parts, _join, _match_batch, _parts, cross

_HI = jax.lax.Precision.HIGHEST


class _Base:
    """Shared helpers for the spatial pytrees."""

    def replace(self, **changes: Any) -> Self:
        """A copy with the given fields replaced."""
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]

    def __getitem__(self, idx: Any) -> Self:
        """Index every leaf along the leading (batch) axes."""
        out: Self = jax.tree.map(lambda x: x[idx], self)
        return out

    @property
    def shape(self) -> tuple[int, ...]:
        """Batch shape: the leading axes shared by all leaves."""
        first = jax.tree.leaves(self)[0]
        return tuple(first.shape[:-1])


def motion_cross(v: jax.Array, m: jax.Array) -> jax.Array:
    """(..., 6) motion cross product `v ×ₘ m` = [ω×ω'; ω×v' + v×ω'] of motions v, m (..., 6)."""
    v, m = _match_batch(v, 1, m, 1)
    vp, mp = _parts(v), _parts(m)
    w, vl, uw, ul = vp[:3], vp[3:], mp[:3], mp[3:]
    lin = [a + b for a, b in zip(_cross_parts(w, ul), _cross_parts(vl, uw), strict=True)]
    return _join([*_cross_parts(w, uw), *lin])


def force_cross(v: jax.Array, f: jax.Array) -> jax.Array:
    """(..., 6) force cross product `v ×* f` = [ω×τ + v×f; ω×f] of a motion v and a force f (..., 6)."""
    v, f = _match_batch(v, 1, f, 1)
    vp, fp = _parts(v), _parts(f)
    w, vl, t, fl = vp[:3], vp[3:], fp[:3], fp[3:]
    ang = [a + b for a, b in zip(_cross_parts(w, t), _cross_parts(vl, fl), strict=True)]
    return _join([*ang, *_cross_parts(w, fl)])


def inertia_mul(inert: jax.Array, v: jax.Array) -> jax.Array:
    """(..., 6) force I·v: spatial inertias `inert` (..., 10) times motions v (..., 6) (`mju_mulInertVec`)."""
    inert, v = _match_batch(inert, 1, v, 1)
    i, vp = _parts(inert), _parts(v)
    w, vl, h, m = vp[:3], vp[3:], i[6:9], i[9]
    iw = (i[0] * w[0] + i[3] * w[1] + i[4] * w[2],
          i[3] * w[0] + i[1] * w[1] + i[5] * w[2],
          i[4] * w[0] + i[5] * w[1] + i[2] * w[2])
    ang = [a + b for a, b in zip(iw, _cross_parts(h, vl), strict=True)]
    lin = [m * a - b for a, b in zip(vl, _cross_parts(h, w), strict=True)]
    return _join([*ang, *lin])


def com_inertia(mass: jax.Array, inertia: jax.Array, rot: jax.Array, offset: jax.Array) -> jax.Array:
    """(..., 10) spatial inertia about a reference point, in the axes of `rot`'s parent frame.

    `mass` (...), principal moments `inertia` (..., 3) about the centre of mass in the frame whose
    axes are the columns of `rot` (..., 3, 3), centre of mass at `offset` (..., 3) from the
    reference point (the parallel-axis theorem; MuJoCo's `mju_inertCom`).
    """
    # Entry by entry, joined once: the 3x3 products as a dot and the squared distance as a sum
    # were library calls (YNNPACK) on XLA's CPU backend, slower than this one fused loop.
    r = [_parts(rot[..., i, :]) for i in range(3)]  # r[i][j]: component i of axis j
    d, o, m = _parts(inertia), _parts(offset), mass[..., None]
    dd = o[0] * o[0] + o[1] * o[1] + o[2] * o[2]

    def entry(a: int, b: int) -> jax.Array:
        about_com = r[a][0] * d[0] * r[b][0] + r[a][1] * d[1] * r[b][1] + r[a][2] * d[2] * r[b][2]
        shift = dd - o[a] * o[b] if a == b else -(o[a] * o[b])
        return about_com + m * shift

    six = [entry(0, 0), entry(1, 1), entry(2, 2), entry(0, 1), entry(0, 2), entry(1, 2)]
    return _join([*six, m * o[0], m * o[1], m * o[2], m])


def rotation_motion(axis: jax.Array, offset: jax.Array) -> jax.Array:
    """(..., 6) motion [a; a × r] of a unit rotation about axis a (..., 3) through the point −r.

    r = `offset` (..., 3) is the reference point relative to any point on the axis (`mju_dofCom`).
    """
    return jnp.concatenate([axis, cross(axis, offset)], axis=-1)


def point_velocity(m: jax.Array, offset: jax.Array) -> jax.Array:
    """(..., 3) velocity v + ω × r of the body-fixed point at r = `offset` (..., 3) in motion m (..., 6)."""
    return m[..., 3:] + cross(m[..., :3], offset)


def spatial_force(torque: jax.Array, force: jax.Array, point: jax.Array) -> jax.Array:
    """(..., 6) force [τ + p × f; f] of torque τ and force f (..., 3) acting at p = `point` (..., 3)."""
    return jnp.concatenate([torque + cross(point, force), force], axis=-1)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Transform(_Base):
    """Rigid transform: frame position (..., 3) and orientation quaternion (..., 4) in a parent frame."""

    pos: jax.Array
    rot: jax.Array

    @classmethod
    def create(cls, pos: jax.Array | None = None, rot: jax.Array | None = None) -> Transform:
        """A transform from `pos` and/or `rot`; the missing one is zero / identity of matching batch."""
        if pos is None and rot is None:
            raise ValueError("Transform.create needs pos, rot, or both")
        if pos is None:
            assert rot is not None
            pos = jnp.zeros((*rot.shape[:-1], 3), dtype=rot.dtype)
        if rot is None:
            rot = quat_identity(pos.shape[:-1], dtype=pos.dtype)
        return cls(pos=pos, rot=rot)

    @classmethod
    def identity(cls, shape: tuple[int, ...] = (), dtype: jnp.dtype | None = None) -> Transform:
        """Identity transforms (zero position, identity rotation) with batch `shape`."""
        dtype = dtype or jnp.float32
        return cls(pos=jnp.zeros((*shape, 3), dtype=dtype), rot=quat_identity(shape, dtype=dtype))

    @classmethod
    def zero(cls, shape: tuple[int, ...] = (), dtype: jnp.dtype | None = None) -> Transform:
        """Zero displacement: the same as `identity` (named as in Google Brax)."""
        return cls.identity(shape, dtype)

    def do(self, o: Transform) -> Transform:
        """Composition `self ∘ o`: `o` is given in this frame; the result is in this frame's parent."""
        return Transform(pos=self.pos + rotate(o.pos, self.rot), rot=quat_mul(self.rot, o.rot))

    def inv(self) -> Transform:
        """Inverse transform: parent expressed in this frame."""
        rot = quat_conj(self.rot)
        return Transform(pos=-rotate(self.pos, rot), rot=rot)

    def to_local(self, o: Transform) -> Transform:
        """Express `o` (given in the parent frame) in this frame: `self.inv().do(o)`."""
        return Transform(pos=inv_rotate(o.pos - self.pos, self.rot), rot=quat_mul(quat_conj(self.rot), o.rot))

    def apply_point(self, p: jax.Array) -> jax.Array:
        """Map local points (..., 3) to the parent frame."""
        return self.pos + rotate(p, self.rot)

    def apply_vector(self, v: jax.Array) -> jax.Array:
        """Rotate local direction vectors (..., 3) into the parent frame (no translation)."""
        return rotate(v, self.rot)

    def inv_apply_point(self, p: jax.Array) -> jax.Array:
        """Map parent-frame points (..., 3) into this frame."""
        return inv_rotate(p - self.pos, self.rot)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Motion(_Base):
    """Spatial motion `[ang; vel]` as two (..., 3) arrays: angular velocity, velocity at the reference."""

    ang: jax.Array
    vel: jax.Array
