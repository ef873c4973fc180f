"""Constraint rows (MuJoCo mj_makeConstraint + mj_makeImpedance + mj_referenceConstraint).

Rows come in MuJoCo's order: equality constraints (`equality`), dof friction loss, tendon friction
loss, joint limits (hinge, slide and ball, by joint id), tendon limits, contacts. Their number is
static: every equality has its rows (3 for connect, 6 for weld, 1 for joint and tendon), every dof
and tendon with friction loss at load time a row, every limited joint one row (hinge/slide: for its
nearer limit; ball: for its rotation angle), every limited tendon one row (for its nearer limit),
every contact slot 1 (condim 1), 2(condim-1) (pyramidal cone: one per edge) or condim (elliptic
cone: normal, then the friction directions) rows.
Rows that MuJoCo would not instantiate (an inactive equality, a limit or contact farther than its
margin) are kept with `active == False`: their D and reference acceleration are zero, so they carry
no force and add nothing to the solver's cost, gradient or Hessian. Nothing here branches on data.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Final, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from brax_math import normalize, point_velocity, quat_log, safe_norm
from mujoco import mjtCone, mjtDisableBit, mjtEq, mjtJoint, mjtObj, mjtWrap

from brax_physics._src import equality
from brax_physics._src.collision.contact import Contact
from brax_physics._src.collision.types import CollisionPairs
from brax_physics._src.com import mm
from brax_physics._src.linalg import MINVAL
from brax_physics._src.structure import structure
from brax_physics._src.system import System

MINIMP: Final = 1e-4  # mjMINIMP
MAXIMP: Final = 0.9999  # mjMAXIMP

_HI: Final = jax.lax.Precision.HIGHEST


@dataclasses.dataclass(frozen=True, eq=False)
class Layout:
    """Static row layout of a model (numpy, trace-time only)."""

    eq: equality.Layout
    """Equality rows (the first `neq` rows)."""
    floss_dofs: np.ndarray
    """(nfloss_dof,) dofs with a friction-loss row."""
    floss_tendons: np.ndarray
    """(nfloss_ten,) tendons with a friction-loss row (after the dofs')."""
    limit_jnts: np.ndarray
    """(nlimit_jnt,) limited hinge, slide and ball joints, by id."""
    limit_dofs: np.ndarray
    """(nlimit_jnt,) their (first) dofs."""
    limit_qpos: np.ndarray
    """(nlimit_jnt,) their (first) qpos addresses."""
    limit_ball: np.ndarray
    """(nlimit_jnt,) bool: ball joints."""
    limit_tendons: np.ndarray
    """(nlimit_ten,) limited tendons (rows after the joints' limit rows)."""
    con_body1: np.ndarray
    """(ncon,) body of geom1 of every contact slot."""
    con_body2: np.ndarray
    """(ncon,) body of geom2 of every contact slot."""
    con_dim: np.ndarray
    """(ncon,) condim of every contact slot."""
    row_con: np.ndarray
    """(ncrow,) contact slot of every contact row."""
    row_k: np.ndarray
    """(ncrow,) contact-frame direction paired with the normal (1..5; 0 for condim 1)."""
    row_sign: np.ndarray
    """(ncrow,) float32 +1 / -1 pyramid edge sign (0 for condim 1 and elliptic rows)."""
    maxdim: int
    """Largest condim (number of contact-frame rows needed)."""
    elliptic: bool
    """Elliptic friction cones: row k of a contact is its contact-frame direction k."""

    @property
    def neq(self) -> int:
        """Number of equality rows."""
        return self.eq.nrow

    @property
    def nfloss(self) -> int:
        """Number of friction-loss rows (dofs, then tendons)."""
        return int(self.floss_dofs.shape[0] + self.floss_tendons.shape[0])

    @property
    def nlimit(self) -> int:
        """Number of limit rows (joints, then tendons)."""
        return int(self.limit_jnts.shape[0] + self.limit_tendons.shape[0])

    @property
    def ncon(self) -> int:
        """Number of contact slots."""
        return int(self.con_dim.shape[0])

    @property
    def limit_start(self) -> int:
        """First joint-limit row."""
        return self.neq + self.nfloss

    @property
    def contact_start(self) -> int:
        """First contact row."""
        return self.limit_start + self.nlimit

    @property
    def nefc(self) -> int:
        """Total number of rows."""
        return self.contact_start + int(self.row_con.shape[0])

    @property
    def is_floss(self) -> np.ndarray:
        """(nefc,) bool: rows with the friction-loss (Huber) cost."""
        out = np.zeros(self.nefc, bool)
        out[self.neq : self.limit_start] = True
        return out

    @property
    def is_eq(self) -> np.ndarray:
        """(nefc,) bool: equality rows (bilateral quadratic cost)."""
        out = np.zeros(self.nefc, bool)
        out[: self.neq] = True
        return out

    @property
    def cones(self) -> tuple[tuple[int, ...], ...]:
        """Rows (normal first) of every elliptic contact with friction (condim > 1)."""
        if not self.elliptic:
            return ()
        first = self.nefc - int(self.row_con.shape[0])  # contacts are the last rows
        return tuple(tuple(int(i) for i in first + np.flatnonzero(self.row_con == c))
                     for c in range(self.ncon) if self.con_dim[c] > 1)

    @property
    def compact_groups(self) -> tuple[tuple[tuple[int, ...], ...], ...]:
        """Rows the solver may compact (`solver.Config.compact`): the limit and contact rows as scalar
        units, except elliptic cones, grouped by their number of rows."""
        cones = self.cones
        in_cone = {r for c in cones for r in c}
        groups: list[tuple[tuple[int, ...], ...]] = []
        scalar = tuple((r,) for r in range(self.limit_start, self.nefc) if r not in in_cone)
        if scalar:
            groups.append(scalar)
        for size in sorted({len(c) for c in cones}):
            groups.append(tuple(c for c in cones if len(c) == size))
        return tuple(groups)


def layout(sys: System) -> Layout:
    """The (cached) static row layout of `sys`."""
    return _layout(sys.dof_hasfrictionloss, sys.jnt_limited, sys.jnt_type, sys.jnt_dofadr, sys.jnt_qposadr,
                   sys.geom_bodyid, sys.contact_pairs, sys.opt.disableflags, sys.tendon_hasfrictionloss,
                   sys.tendon_limited, sys.eq_type, sys.opt.cone == mjtCone.mjCONE_ELLIPTIC)


def _cat(xs: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(xs).astype(np.int32) if xs else np.zeros(0, np.int32)


@functools.lru_cache(maxsize=64)
def _layout(
    dof_hasfrictionloss: tuple[bool, ...],
    jnt_limited: tuple[bool, ...],
    jnt_type: tuple[int, ...],
    jnt_dofadr: tuple[int, ...],
    jnt_qposadr: tuple[int, ...],
    geom_bodyid: tuple[int, ...],
    pairs: CollisionPairs,
    disableflags: int,
    tendon_hasfrictionloss: tuple[bool, ...],
    tendon_limited: tuple[bool, ...],
    eq_type: tuple[int, ...],
    elliptic: bool,
) -> Layout:
    off = bool(disableflags & mjtDisableBit.mjDSBL_CONSTRAINT)
    no_floss = off or disableflags & mjtDisableBit.mjDSBL_FRICTIONLOSS
    floss = [] if no_floss else [i for i, f in enumerate(dof_hasfrictionloss) if f]
    floss_ten = [] if no_floss else [i for i, f in enumerate(tendon_hasfrictionloss) if f]
    limitable = (mjtJoint.mjJNT_HINGE, mjtJoint.mjJNT_SLIDE, mjtJoint.mjJNT_BALL)
    no_limit = off or disableflags & mjtDisableBit.mjDSBL_LIMIT
    lim = [] if no_limit else [
        j for j, (lt, t) in enumerate(zip(jnt_limited, jnt_type, strict=True)) if lt and t in limitable
    ]
    lim_ten = [] if no_limit else [i for i, lt in enumerate(tendon_limited) if lt]
    body = np.asarray(geom_bodyid, np.int32).reshape(-1)
    g1, g2, dim = [], [], []
    if not (off or disableflags & mjtDisableBit.mjDSBL_CONTACT):
        for g in pairs.groups:
            k = g.ncon_per_pair
            g1.append(np.repeat(g.geom1, k))
            g2.append(np.repeat(g.geom2, k))
            dim.append(np.repeat(g.condim, k))
    geom1, geom2, con_dim = _cat(g1), _cat(g2), _cat(dim)
    # the collision driver always returns every slot; rows only for slots kept here
    row_con, row_k, row_sign = [], [], []
    for c, d in enumerate(con_dim):
        if elliptic:
            edges = [(k, 0.0) for k in range(int(d))]
        else:
            edges = [(0, 0.0)] if d == 1 else [(k, s) for k in range(1, int(d)) for s in (1.0, -1.0)]
        for k, s in edges:
            row_con.append(c)
            row_k.append(k)
            row_sign.append(s)
    return Layout(
        eq=equality._layout(eq_type, disableflags),
        floss_dofs=np.asarray(floss, np.int32),
        floss_tendons=np.asarray(floss_ten, np.int32),
        limit_jnts=np.asarray(lim, np.int32),
        limit_dofs=np.asarray([jnt_dofadr[j] for j in lim], np.int32),
        limit_qpos=np.asarray([jnt_qposadr[j] for j in lim], np.int32),
        limit_ball=np.asarray([jnt_type[j] == mjtJoint.mjJNT_BALL for j in lim], bool),
        limit_tendons=np.asarray(lim_ten, np.int32),
        con_body1=body[geom1] if geom1.size else np.zeros(0, np.int32),
        con_body2=body[geom2] if geom2.size else np.zeros(0, np.int32),
        con_dim=con_dim,
        row_con=np.asarray(row_con, np.int32),
        row_k=np.asarray(row_k, np.int32),
        row_sign=np.asarray(row_sign, np.float32),
        maxdim=int(con_dim.max(initial=1)),
        elliptic=elliptic,
    )


def _joint_dofs(sys: System, jnt: int) -> list[int]:
    """Dof ids of joint `jnt`."""
    width = {int(mjtJoint.mjJNT_FREE): 6, int(mjtJoint.mjJNT_BALL): 3}.get(int(sys.jnt_type[jnt]), 1)
    return list(range(sys.jnt_dofadr[jnt], sys.jnt_dofadr[jnt] + width))


def _tendon_dofs(sys: System, chain: np.ndarray, ten: int) -> np.ndarray:
    """(nv,) bool: dofs that can move tendon `ten` (its joints', the chains of its sites' and
    wrapping geoms' bodies)."""
    out = np.zeros(sys.nv, bool)
    for w in range(sys.tendon_adr[ten], sys.tendon_adr[ten] + sys.tendon_num[ten]):
        kind, obj = int(sys.wrap_type[w]), int(sys.wrap_objid[w])
        if kind == mjtWrap.mjWRAP_JOINT:
            out[_joint_dofs(sys, obj)] = True
        elif kind == mjtWrap.mjWRAP_SITE:
            out |= chain[sys.site_bodyid[obj]]
        elif kind in (mjtWrap.mjWRAP_SPHERE, mjtWrap.mjWRAP_CYLINDER):
            out |= chain[sys.geom_bodyid[obj]]
    return out


def row_dofs(sys: System) -> np.ndarray:
    """(nefc, nv) bool: the dofs each row's Jacobian can reach, in row order (static, a superset of
    its nonzeros: a body's rows reach the dofs of the body and its ancestors)."""
    lay, nv = layout(sys), sys.nv
    chain = structure(sys).body_dof > 0  # (nbody, nv)
    out = np.zeros((lay.nefc, nv), bool)
    ten = [_tendon_dofs(sys, chain, t) for t in range(sys.ntendon)]
    for r, e in enumerate(lay.eq.row_eq):  # equality rows: the dofs of both objects
        kind, o1, o2 = int(sys.eq_type[e]), int(sys.eq_obj1id[e]), int(sys.eq_obj2id[e])
        if kind in (mjtEq.mjEQ_CONNECT, mjtEq.mjEQ_WELD):
            site = sys.eq_objtype[e] == mjtObj.mjOBJ_SITE
            for o in (o1, o2):
                out[r] |= chain[sys.site_bodyid[o] if site else o]
        elif kind == mjtEq.mjEQ_JOINT:
            for o in (o1, o2):
                if o >= 0:
                    out[r, _joint_dofs(sys, o)] = True
        else:  # tendon
            for o in (o1, o2):
                if o >= 0:
                    out[r] |= ten[o]
    r = lay.neq
    for d in lay.floss_dofs:
        out[r, d] = True
        r += 1
    for t in lay.floss_tendons:
        out[r] = ten[t]
        r += 1
    for j in lay.limit_jnts:
        out[r, _joint_dofs(sys, int(j))] = True
        r += 1
    for t in lay.limit_tendons:
        out[r] = ten[t]
        r += 1
    c = lay.row_con
    out[r:] = chain[lay.con_body1[c]] | chain[lay.con_body2[c]]
    return out


class Rows(NamedTuple):
    """Position-dependent constraint rows (nefc each; J is (nefc, nv))."""

    J: jax.Array
    """(nefc, nv) constraint Jacobian."""
    D: jax.Array
    """(nefc,) 1/R, zero for inactive rows."""
    R: jax.Array
    """(nefc,) regularizer (MuJoCo efc_R)."""
    b: jax.Array
    """(nefc,) reference damping coefficient."""
    kdr: jax.Array
    """(nefc,) stiffness term k·d·r of the reference acceleration."""
    floss: jax.Array
    """(nefc,) friction-loss bound (zero for other rows)."""
    active: jax.Array
    """(nefc,) bool: row instantiated by MuJoCo."""
    mu: jax.Array | None = None
    """(nefc,) elliptic cones only: each row's scale into the circular cone (MuJoCo's contact.mu on
    normal rows, friction[k-1] on friction rows, 0 elsewhere); None with pyramidal cones."""


def impedance(solimp: jax.Array, r: jax.Array) -> jax.Array:
    """(n,) impedance d(r) from solimp (n, 5) and residual r (n,).

    MuJoCo documentation, Computation: Constraint solver, Parameters (and Modeling: Solver parameters).
    """
    dmin = jnp.clip(solimp[:, 0], MINIMP, MAXIMP)
    dmax = jnp.clip(solimp[:, 1], MINIMP, MAXIMP)
    width = jnp.maximum(solimp[:, 2], MINVAL)
    mid = jnp.clip(solimp[:, 3], MINIMP, MAXIMP)
    p = jnp.maximum(solimp[:, 4], 1.0)
    x_raw = jnp.abs(r) / width
    x = jnp.minimum(x_raw, 1.0)

    def power(base: jax.Array, e: jax.Array) -> jax.Array:  # base**e for base in [0, 1], safe gradients
        pos = base > 0
        return jnp.where(pos, jnp.where(pos, base, 1.0) ** e, 0.0)

    # x**p / mid**(p-1) below mid, 1 - (1-x)**p / (1-mid)**(p-1) above: the branch's operand is
    # selected first, so each row takes one power of the residual (pow is dear on XLA:CPU), and
    # both denominators come from solimp alone: under vmap with a shared model they are powers of
    # the rows, not of every env's rows, selected per env afterwards (the same values as selecting
    # the operand first)
    lo = x <= mid
    den = jnp.where(lo, mid ** (p - 1), (1 - mid) ** (p - 1))
    part = power(jnp.where(lo, x, 1 - x), p) / den
    y = jnp.where(p == 1, x, jnp.where(lo, part, 1 - part))
    imp = jnp.where(x_raw >= 1, dmax, dmin + y * (dmax - dmin))
    # MuJoCo's flat case (getimpedance): no width, or dmin == dmax, gives the mean of the two.
    flat = (solimp[:, 2] <= MINVAL) | (dmin == dmax)
    return jnp.where(flat, 0.5 * (dmin + dmax), imp)


def _stiffness_damping(sys: System, solref: jax.Array, solimp: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(k, b) (n,) from solref (n, 2): standard (timeconst, dampratio) or direct (-stiffness, -damping)."""
    dmax = jnp.clip(solimp[:, 1], MINIMP, MAXIMP)
    tc, zeta = solref[:, 0], solref[:, 1]
    refsafe = not sys.opt.disableflags & mjtDisableBit.mjDSBL_REFSAFE
    tc_std = jnp.maximum(tc, 2 * sys.opt.timestep) if refsafe else tc
    standard = tc > 0
    tc_s = jnp.where(standard, tc_std, 1.0)
    z_s = jnp.where(standard, zeta, 1.0)
    k = jnp.where(standard, 1 / (dmax**2 * tc_s**2 * z_s**2), -tc / dmax**2)
    b = jnp.where(standard, 2 / (dmax * tc_s), -zeta / dmax)
    return k, b


def joint_limits(sys: System, q: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(nlimit,) distance to the limit (negative: past it) and (nlimit, nv) Jacobian of the joint-limit
    rows at positions `q`, in row order (MuJoCo mj_instantiateLimit).

    Hinge/slide: the nearer of q - range[0] (J = +1) and range[1] - q (J = -1). Ball: max(range) minus
    the rotation angle of the joint's quaternion, J = -(rotation axis) on its 3 dofs.
    """
    lay = layout(sys)
    dtype, nv = q.dtype, sys.nv
    eye = np.eye(nv, dtype=np.float32)
    dists, Js, order = [], [], []
    scalar = np.flatnonzero(~lay.limit_ball)
    if scalar.size:
        qj = q[lay.limit_qpos[scalar]]
        rng = sys.jnt_range[lay.limit_jnts[scalar]]
        lo, hi = qj - rng[:, 0], rng[:, 1] - qj
        at_lo = lo < hi
        dists.append(jnp.where(at_lo, lo, hi))
        sign = jnp.where(at_lo, 1.0, -1.0).astype(dtype)
        Js.append(jnp.asarray(eye[lay.limit_dofs[scalar]], dtype) * sign[:, None])
        order.append(scalar)
    ball = np.flatnonzero(lay.limit_ball)
    if ball.size:
        rotvec = quat_log(normalize(q[lay.limit_qpos[ball][:, None] + np.arange(4)]))
        angle = safe_norm(rotvec)
        dists.append(jnp.max(sys.jnt_range[lay.limit_jnts[ball]], axis=-1) - angle)
        # No rotation: MuJoCo's mju_normalize3 falls back to the x axis.
        axis = jnp.where((angle > MINVAL)[:, None], normalize(rotvec), jnp.asarray([1.0, 0.0, 0.0], dtype))
        dofs = jnp.asarray(eye[lay.limit_dofs[ball][:, None] + np.arange(3)], dtype)  # (nball, 3, nv)
        Js.append(jnp.einsum("bk,bkv->bv", -axis, dofs, precision=_HI))
        order.append(ball)
    if len(order) == 1:
        return dists[0], Js[0]
    perm = np.argsort(np.concatenate(order), kind="stable")
    return jnp.concatenate(dists)[perm], jnp.concatenate(Js)[perm]


def contact_jacobian(sys: System, lay: Layout, cdof: jax.Array, subtree_com: jax.Array,
                     contact: Contact) -> jax.Array:
    """(ncon, maxdim, nv) contact-frame Jacobian rows [n, t1, t2, spin, roll1, roll2][:maxdim]."""
    st = structure(sys)
    ang = cdof[:, :3]

    def point_jac(body: np.ndarray) -> tuple[jax.Array, jax.Array] | None:
        """Linear and angular Jacobians (ncon, nv, 3) of the contact points on `body`'s side; None
        where no contact's body there has a dof (the world, or a static body: a floor), so that
        side is not computed as zeros for every env."""
        dof = st.body_dof[body]
        if not dof.any():
            return None
        off = contact.pos - subtree_com[st.root[body]]  # (ncon, 3)
        mask = jnp.asarray(dof)[..., None]  # (ncon, nv, 1)
        jacp = point_velocity(cdof[None], off[:, None, :]) * mask  # (ncon, nv, 3)
        return jacp, ang[None] * mask

    def relative(side1: tuple[jax.Array, jax.Array] | None, side2: tuple[jax.Array, jax.Array] | None,
                 k: int) -> jax.Array:
        """Body 2's Jacobian part `k` minus body 1's (a side without dofs contributes zero)."""
        if side1 is None or side2 is None:
            side = side2 if side1 is None else side1
            if side is None:
                return jnp.zeros((frame.shape[0], cdof.shape[0], 3), cdof.dtype)
            return side[k] if side1 is None else -side[k]
        return side2[k] - side1[k]

    side1, side2 = point_jac(lay.con_body1), point_jac(lay.con_body2)
    frame = contact.frame

    def in_frame(v: jax.Array, rows: int) -> list[jax.Array]:
        # the first `rows` frame axes' components of v (ncon, nv, 3), each (ncon, nv); as products
        # and additions, not a dot: XLA's CPU backend made the dot a library call (YNNPACK) slower
        # than the loop these fuse into, and rows past condim are never computed
        return [sum((frame[:, i, j, None] * v[..., j] for j in (1, 2)), frame[:, i, 0, None] * v[..., 0])
                for i in range(rows)]

    rows = in_frame(relative(side1, side2, 0), min(lay.maxdim, 3))
    if lay.maxdim > 3:
        rows += in_frame(relative(side1, side2, 1), lay.maxdim - 3)
    if not rows:
        return jnp.zeros((frame.shape[0], 0, cdof.shape[0]), cdof.dtype)
    return jnp.stack(rows, axis=1)


def make_rows(sys: System, q: jax.Array, cdof: jax.Array, subtree_com: jax.Array, contact: Contact,
              ten_length: jax.Array, ten_J: jax.Array, eq: equality.Rows | None = None) -> Rows:
    """Constraint rows at positions `q` (position stage: everything but the velocity term of aref).

    `ten_length` (ntendon,) and `ten_J` (ntendon, nv) are the tendons at `q` (`tendon.tendon`);
    `eq`: the equality rows at `q` (`equality.rows`), required when the model has any.
    """
    lay = layout(sys)
    dtype = cdof.dtype
    nv = sys.nv
    Js, rs, imp_rs, solrefs, solimps, As, flosses, actives = [], [], [], [], [], [], [], []

    if lay.neq:
        if eq is None:
            raise ValueError("constraint.make_rows: the model has equality constraints: pass "
                             "eq=equality.rows(...)")
        Js.append(eq.J)
        rs.append(eq.pos)
        imp_rs.append(eq.imp_pos)
        solrefs.append(eq.solref)
        solimps.append(eq.solimp)
        As.append(eq.A)
        flosses.append(jnp.zeros(lay.neq, dtype))
        actives.append(eq.active)

    if lay.floss_dofs.size:
        d = lay.floss_dofs
        Js.append(jnp.asarray(np.eye(nv, dtype=np.float32)[d], dtype))
        rs.append(jnp.zeros(d.size, dtype))
        imp_rs.append(rs[-1])
        solrefs.append(sys.dof_solref[d])
        solimps.append(sys.dof_solimp[d])
        As.append(sys.dof_invweight0[d])
        flosses.append(sys.dof_frictionloss[d])
        actives.append(jnp.ones(d.size, bool))

    if lay.floss_tendons.size:
        t = lay.floss_tendons
        Js.append(ten_J[t])
        rs.append(jnp.zeros(t.size, dtype))
        imp_rs.append(rs[-1])
        solrefs.append(sys.tendon_solref_fri[t])
        solimps.append(sys.tendon_solimp_fri[t])
        As.append(sys.tendon_invweight0[t])
        flosses.append(sys.tendon_frictionloss[t])
        actives.append(jnp.ones(t.size, bool))

    if lay.limit_jnts.size:
        j = lay.limit_jnts
        dist, jac = joint_limits(sys, q)
        Js.append(jac)
        margin = sys.jnt_margin[j]
        rs.append(dist - margin)
        imp_rs.append(rs[-1])
        solrefs.append(sys.jnt_solref[j])
        solimps.append(sys.jnt_solimp[j])
        As.append(sys.dof_invweight0[lay.limit_dofs])
        flosses.append(jnp.zeros(j.size, dtype))
        actives.append(dist < margin)

    if lay.limit_tendons.size:
        # as joints: one row for the nearer limit, J = +ten_J at the lower, -ten_J at the upper
        t = lay.limit_tendons
        rng = sys.tendon_range[t]
        lo, hi = ten_length[t] - rng[:, 0], rng[:, 1] - ten_length[t]
        at_lo = lo < hi
        dist = jnp.where(at_lo, lo, hi)
        sign = jnp.where(at_lo, 1.0, -1.0).astype(dtype)
        Js.append(ten_J[t] * sign[:, None])
        margin = sys.tendon_margin[t]
        rs.append(dist - margin)
        imp_rs.append(rs[-1])
        solrefs.append(sys.tendon_solref_lim[t])
        solimps.append(sys.tendon_solimp_lim[t])
        As.append(sys.tendon_invweight0[t])
        flosses.append(jnp.zeros(t.size, dtype))
        actives.append(dist < margin)

    kzero = np.zeros(0, bool)  # elliptic friction rows: stiffness k = 0 (their r is the normal's)
    if lay.row_con.size:
        jc = contact_jacobian(sys, lay, cdof, subtree_com, contact)  # (ncon, maxdim, nv)
        c, k = lay.row_con, lay.row_k
        mu = contact.friction[c, jnp.asarray(np.maximum(k - 1, 0))]  # (ncrow,)
        if lay.elliptic:
            # mj_instantiateContact / mj_makeImpedance: every row takes the normal's impedance;
            # friction rows use solreffriction when set (a mixed-sign one reads as unset), k = 0 and
            # R_k = R_normal·μ₁²/(μ_k²·impratio) (MuJoCo scales R_1 by 1/impratio, the rest to R_1 μ₁²/μ_k²).
            fric = k > 0
            Js.append(jc[c, k])
            rs.append((contact.dist - contact.includemargin)[c])
            imp_rs.append(rs[-1])
            sf = contact.solreffriction[c]
            use_sf = ((sf[:, 0] > 0) == (sf[:, 1] > 0)) & jnp.any(sf != 0, axis=1)
            sel = jnp.asarray(fric)[:, None] & use_sf[:, None]
            solrefs.append(jnp.where(sel, sf, contact.solref[c]))
            solimps.append(contact.solimp[c])
            inv = sys.body_invweight0[:, 0]
            tran = inv[lay.con_body1] + inv[lay.con_body2]  # (ncon,)
            mu1 = contact.friction[:, 0]
            ratio = mu1[c] ** 2 / (jnp.maximum(mu**2, MINVAL) * sys.opt.impratio)
            As.append(tran[c] * jnp.where(jnp.asarray(fric), ratio, 1.0))
            kzero = fric
        else:
            sign = jnp.asarray(lay.row_sign, dtype)
            Js.append(jc[c, 0] + (sign * mu)[:, None] * jc[c, k])
            rs.append((contact.dist - contact.includemargin)[c])
            imp_rs.append(rs[-1])
            solrefs.append(contact.solref[c])
            solimps.append(contact.solimp[c])
            inv = sys.body_invweight0[:, 0]
            tran = inv[lay.con_body1] + inv[lay.con_body2]  # (ncon,)
            mu1 = contact.friction[:, 0]
            pyr = tran * (1 + mu1**2) * 2 * mu1**2 / sys.opt.impratio
            a_con = jnp.where(jnp.asarray(lay.con_dim == 1), tran, pyr)
            As.append(a_con[c])
        flosses.append(jnp.zeros(c.shape[0], dtype))
        actives.append(contact.active[c])

    if not Js:
        z = jnp.zeros(0, dtype)
        return Rows(jnp.zeros((0, nv), dtype), z, z, z, z, z, jnp.zeros(0, bool))
    J = jnp.concatenate(Js)
    r = jnp.concatenate(rs)
    solref = jnp.concatenate(solrefs)
    solimp = jnp.concatenate(solimps)
    A = jnp.concatenate(As)
    active = jnp.concatenate(actives)
    imp = impedance(solimp, jnp.concatenate(imp_rs))
    k_, b = _stiffness_damping(sys, solref, solimp)
    R = jnp.maximum(MINVAL, (1 - imp) / imp * A)
    D = jnp.where(active, 1 / R, 0.0)
    cone_mu = None
    if lay.elliptic:
        kzero_all = np.concatenate([np.zeros(lay.nefc - kzero.size, bool), kzero])
        k_ = jnp.where(jnp.asarray(kzero_all), 0.0, k_)
        cone_mu = _cone_scale(lay, contact, R)
    kdr = jnp.where(active, k_ * imp * r, 0.0)
    b = jnp.where(active, b, 0.0)
    return Rows(J=J, D=D, R=R, b=b, kdr=kdr, floss=jnp.concatenate(flosses), active=active, mu=cone_mu)


def _cone_scale(lay: Layout, contact: Contact, R: jax.Array) -> jax.Array:
    """(nefc,) the elliptic cone's scale of each row (0 outside friction cones).

    Friction row k: friction[k-1]; normal row: MuJoCo's regularized cone coefficient
    contact.mu = friction[0]·sqrt(R_1/R_0) (= friction[0]/sqrt(impratio) away from the R floor).
    """
    first = lay.nefc - int(lay.row_con.shape[0])
    c, k = lay.row_con, lay.row_k
    cone = lay.con_dim[c] > 1
    scale = jnp.where(jnp.asarray(cone), contact.friction[c, jnp.asarray(np.maximum(k - 1, 0))], 0.0)
    normal = np.flatnonzero(cone & (k == 0))
    rn = first + normal
    reg = jnp.sqrt(R[rn + 1] / R[rn])
    scale = scale.at[normal].multiply(reg)
    return jnp.concatenate([jnp.zeros(first, R.dtype), scale])


def reference_acceleration(rows: Rows, qd: jax.Array, eq_jdotv: jax.Array | None = None) -> jax.Array:
    """(nefc,) efc_aref = -b·(J qd) - k·d·r (zero on inactive rows).

    `eq_jdotv` (neq,): J̇·qd of the equality rows (`equality.jdotv`), subtracted from theirs as MuJoCo does.
    """
    aref = -rows.b * mm(rows.J, qd) - rows.kdr
    if eq_jdotv is None or not eq_jdotv.shape[0]:
        return aref
    n = eq_jdotv.shape[0]
    return aref.at[:n].add(-jnp.where(rows.active[:n], eq_jdotv, 0.0))


def contact_force(sys: System, contact: Contact, efc_force: jax.Array) -> jax.Array:
    """(ncon, 6) contact-frame forces from the rows' forces (as MuJoCo's mj_contactForce).

    Elliptic rows are the contact-frame components; pyramid edges combine into them.
    """
    lay = layout(sys)
    dtype = efc_force.dtype
    out = jnp.zeros((contact.dist.shape[0], 6), dtype)
    if not lay.row_con.size:
        return out
    f = efc_force[lay.contact_start:]
    c, k = lay.row_con, lay.row_k
    if lay.elliptic:
        return out.at[c, k].add(f)
    mu = contact.friction[c, jnp.asarray(np.maximum(k - 1, 0))]
    normal = out.at[c, 0].add(f)
    return normal.at[c, k].add(jnp.asarray(lay.row_sign, dtype) * mu * f)
