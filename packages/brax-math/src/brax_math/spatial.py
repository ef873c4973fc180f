"""Spatial algebra: rigid transforms, motion and force 6-vectors, and spatial inertia.

Conventions: a `Motion` is `[ang; vel]` (angular velocity, then the linear velocity of the
body-fixed point at the reference origin); a `Force` is `[ang; vel]` = `[torque about the
reference origin; force]`. This matches MuJoCo's `cvel`/`cfrc` layout. All types are frozen
dataclasses registered as pytrees, with any number of leading batch axes.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Self

import jax
import jax.numpy as jnp

from brax_math.quaternion import inv_rotate, quat_conj, quat_identity, quat_mul, quat_to_mat, rotate

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


def _skew(v: jax.Array) -> jax.Array:
    """Cross-product matrices (..., 3, 3) with `_skew(a) @ b == cross(a, b)`."""
    x, y, z = v[..., 0], v[..., 1], v[..., 2]
    o = jnp.zeros_like(x)
    return jnp.stack(
        [jnp.stack([o, -z, y], -1), jnp.stack([z, o, -x], -1), jnp.stack([-y, x, o], -1)], axis=-2
    )


class _SixVector(_Base):
    """Arithmetic shared by `Motion` and `Force`."""

    ang: jax.Array
    vel: jax.Array

    @classmethod
    def zero(cls, shape: tuple[int, ...] = (), dtype: jnp.dtype | None = None) -> Self:
        """All-zero 6-vectors with batch `shape`."""
        z = jnp.zeros((*shape, 3), dtype=dtype or jnp.float32)
        return cls(ang=z, vel=z)  # type: ignore[call-arg]

    @classmethod
    def from_vector(cls, v: jax.Array) -> Self:
        """Build from (..., 6) arrays laid out `[ang, vel]`."""
        return cls(ang=v[..., :3], vel=v[..., 3:])  # type: ignore[call-arg]

    def as_vector(self) -> jax.Array:
        """The (..., 6) array `[ang, vel]`."""
        return jnp.concatenate([self.ang, self.vel], axis=-1)

    def __add__(self, o: Self) -> Self:
        return self.replace(ang=self.ang + o.ang, vel=self.vel + o.vel)

    def __sub__(self, o: Self) -> Self:
        return self.replace(ang=self.ang - o.ang, vel=self.vel - o.vel)

    def __neg__(self) -> Self:
        return self.replace(ang=-self.ang, vel=-self.vel)

    def __mul__(self, s: jax.Array | float) -> Self:
        """Scale by a scalar or by a (...) array broadcast over the 3-vectors."""
        s = jnp.asarray(s, dtype=self.ang.dtype)
        s = s[..., None] if s.ndim else s
        return self.replace(ang=self.ang * s, vel=self.vel * s)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Motion(_SixVector):
    """Spatial motion `[ang; vel]`: angular velocity and linear velocity at the reference point."""

    ang: jax.Array
    vel: jax.Array

    def cross(self, o: Motion) -> Motion:
        """Motion cross product `self ×ₘ o` = [ω×ω'; ω×v' + v×ω']."""
        return Motion(
            ang=jnp.cross(self.ang, o.ang), vel=jnp.cross(self.ang, o.vel) + jnp.cross(self.vel, o.ang)
        )

    def cross_force(self, f: Force) -> Force:
        """Force (dual) cross product `self ×* f` = [ω×τ + v×f; ω×f]."""
        return Force(
            ang=jnp.cross(self.ang, f.ang) + jnp.cross(self.vel, f.vel), vel=jnp.cross(self.ang, f.vel)
        )

    def dot(self, f: Force) -> jax.Array:
        """Power `ω·τ + v·f` (...) of a force acting on this motion."""
        return jnp.sum(self.ang * f.ang, axis=-1) + jnp.sum(self.vel * f.vel, axis=-1)

    def shift(self, offset: jax.Array) -> Motion:
        """The same motion referred to the point `origin + offset`: v' = v + ω × offset."""
        return self.replace(vel=self.vel + jnp.cross(self.ang, offset))

    def cross_matrix(self) -> jax.Array:
        """6x6 matrices (..., 6, 6) `X` with `X @ o.as_vector() == self.cross(o).as_vector()`."""
        w, v = _skew(self.ang), _skew(self.vel)
        top = jnp.concatenate([w, jnp.zeros_like(w)], axis=-1)
        bottom = jnp.concatenate([v, w], axis=-1)
        return jnp.concatenate([top, bottom], axis=-2)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Force(_SixVector):
    """Spatial force `[ang; vel]`: torque about the reference point and linear force."""

    ang: jax.Array
    vel: jax.Array

    def dot(self, m: Motion) -> jax.Array:
        """Power (...) of this force acting on motion `m`."""
        return m.dot(self)

    def shift(self, offset: jax.Array) -> Force:
        """The same force referred to the point `origin + offset`: τ' = τ − offset × f."""
        return self.replace(ang=self.ang - jnp.cross(offset, self.vel))


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

    def apply_motion(self, m: Motion) -> Motion:
        """Re-express a motion given in this frame (about its origin) in the parent frame, about the parent origin."""
        ang = rotate(m.ang, self.rot)
        return Motion(ang=ang, vel=rotate(m.vel, self.rot) + jnp.cross(self.pos, ang))

    def apply_force(self, f: Force) -> Force:
        """Re-express a force given in this frame (about its origin) in the parent frame, about the parent origin."""
        vel = rotate(f.vel, self.rot)
        return Force(ang=rotate(f.ang, self.rot) + jnp.cross(self.pos, vel), vel=vel)

    def motion_matrix(self) -> jax.Array:
        """6x6 Plücker matrices (..., 6, 6): `X @ m.as_vector() == self.apply_motion(m).as_vector()`."""
        r = quat_to_mat(self.rot)
        top = jnp.concatenate([r, jnp.zeros_like(r)], axis=-1)
        bottom = jnp.concatenate([_skew(self.pos) @ r, r], axis=-1)
        return jnp.concatenate([top, bottom], axis=-2)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Inertia(_Base):
    """Spatial inertia of rigid bodies, referred to a frame F.

    `transform`: centre of mass position and principal-frame orientation in F; `i` (..., 3, 3):
    rotational inertia about the centre of mass in the `transform.rot` frame; `mass` (...).
    """

    transform: Transform
    i: jax.Array
    mass: jax.Array

    def _world_inertia(self) -> jax.Array:
        r = quat_to_mat(self.transform.rot)
        return r @ self.i @ jnp.swapaxes(r, -1, -2)

    def mul(self, m: Motion) -> Force:
        """Momentum (as a `Force`, about F's origin) of the body moving with motion `m` (about F's origin)."""
        c = self.transform.pos
        lin = self.mass[..., None] * (m.vel + jnp.cross(m.ang, c))
        h = jnp.einsum("...ij,...j->...i", self._world_inertia(), m.ang)
        return Force(ang=h + jnp.cross(c, lin), vel=lin)

    def as_matrix(self) -> jax.Array:
        """6x6 spatial inertia matrices (..., 6, 6) about F's origin in `[ang; vel]` order."""
        c = self.transform.pos
        mass = self.mass[..., None, None]
        cx = _skew(c)
        top = jnp.concatenate([self._world_inertia() - mass * (cx @ cx), mass * cx], axis=-1)
        eye = jnp.broadcast_to(jnp.eye(3, dtype=c.dtype), cx.shape)
        bottom = jnp.concatenate([-mass * cx, mass * eye], axis=-1)
        return jnp.concatenate([top, bottom], axis=-2)

    @property
    def shape(self) -> tuple[int, ...]:
        """Batch shape (the shape of `mass`)."""
        return tuple(self.mass.shape)

    def transform_by(self, t: Transform) -> Inertia:
        """The same inertia referred to the parent frame of `t` (F's pose in that frame is `t`)."""
        return self.replace(transform=t.do(self.transform))
