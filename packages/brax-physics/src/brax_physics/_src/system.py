"""`System` and `Options`: a MuJoCo model as a JAX pytree.

Type codes and tree structure are static (tuples, hashable, part of the treedef), so jit
specializes on them; physical parameters are float32 array leaves, so they can be replaced
(`sys.replace(body_mass=...)`) and batched under `vmap` without recompiling.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from brax_physics._src.collision.pairs import CollisionPairs

# Joint type codes (mjtJoint).
JNT_FREE = 0
JNT_BALL = 1
JNT_SLIDE = 2
JNT_HINGE = 3

# Integrator codes (mjtIntegrator).
INT_EULER = 0
INT_RK4 = 1
INT_IMPLICIT = 2
INT_IMPLICITFAST = 3

# Disable-flag bits (mjtDisableBit) that change the smooth dynamics implemented here.
DSBL_CONSTRAINT = 1 << 0
DSBL_FRICTIONLOSS = 1 << 2
DSBL_LIMIT = 1 << 3
DSBL_CONTACT = 1 << 4
DSBL_SPRING = 1 << 5
DSBL_DAMPER = 1 << 6
DSBL_GRAVITY = 1 << 7
DSBL_CLAMPCTRL = 1 << 8
DSBL_WARMSTART = 1 << 9
DSBL_ACTUATION = 1 << 11
DSBL_REFSAFE = 1 << 12
DSBL_EULERDAMP = 1 << 15

# Frame alignment codes (mjtSameFrame), set by MuJoCo's compiler.
SAMEFRAME_NONE = 0
SAMEFRAME_BODY = 1
SAMEFRAME_INERTIA = 2
SAMEFRAME_BODYROT = 3
SAMEFRAME_INERTIAROT = 4

# Actuator bias type codes (mjtBias).
BIAS_NONE = 0
BIAS_AFFINE = 1


def _static(**kwargs: Any) -> Any:
    return dataclasses.field(metadata={"static": True}, **kwargs)


@dataclasses.dataclass(frozen=True, eq=False)
class ModelRef:
    """A `mujoco.MjModel` held as static System data, equal to another holding the same compiled bytes."""

    model: Any
    """The `mujoco.MjModel` (its cameras, lights and materials serve renderers; physics never reads it)."""
    digest: bytes
    """SHA-256 of the model's MJB serialization at load time."""

    # Static fields are part of the treedef, and jit's cache compares treedefs: comparing by content
    # lets two loads of the same MJCF share one compiled program, where identity would recompile.
    def __eq__(self, other: object) -> bool:
        return isinstance(other, ModelRef) and self.digest == other.digest

    def __hash__(self) -> int:
        return hash(self.digest)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Options:
    """Simulation options (MuJoCo `mjOption` subset): timestep, gravity, impratio and the medium as leaves."""

    timestep: jax.Array
    """() integration step in seconds."""
    gravity: jax.Array
    """(3,) gravitational acceleration in the world frame."""
    impratio: jax.Array
    """() friction-to-normal impedance ratio (used by the contact solver)."""
    density: jax.Array
    """() density of the medium (fluid forces, inertia-box model; read when `has_fluid`)."""
    viscosity: jax.Array
    """() viscosity of the medium (fluid forces, inertia-box model; read when `has_fluid`)."""
    wind: jax.Array
    """(3,) velocity of the medium in the world frame (read when `has_fluid`)."""
    has_fluid: bool = _static()
    """Whether fluid forces are computed: density or viscosity nonzero at load time. Models without a
    medium skip the fluid stage; to randomize a medium from zero, `opt.replace(has_fluid=True, ...)`."""
    integrator: int = _static()
    """mjtIntegrator code: 0 Euler, 1 RK4, 3 implicitfast."""
    disableflags: int = _static()
    """mjtDisableBit mask."""
    enableflags: int = _static()
    """mjtEnableBit mask."""
    cone: int = _static()
    """mjtCone code: 0 pyramidal, 1 elliptic."""
    solver: int = _static()
    """mjtSolver code: 0 PGS, 1 CG, 2 Newton."""
    iterations: int = _static()
    """Maximum constraint-solver iterations."""
    ls_iterations: int = _static()
    """Maximum line-search iterations."""
    tolerance: float = _static()
    """Solver tolerance."""
    ls_tolerance: float = _static()
    """Line-search tolerance."""

    def replace(self, **changes: Any) -> Options:
        """Copy with the given fields replaced; array fields are checked like `System.replace`'s."""
        _check_changes(self, "sys.opt", changes, static_ok=True)
        return dataclasses.replace(self, **changes)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class System:
    """A compiled MJCF model; field names and meanings mirror `mujoco.MjModel`.

    Index/type fields are static tuples; physical parameters are float32 `jax.Array` leaves
    with MuJoCo's shapes (e.g. `body_mass` (nbody,), `jnt_axis` (njnt, 3)). Body 0 is the world.
    Angles are radians (the MJCF compiler already converted degrees).
    """

    # ---- physical parameters (leaves) ----
    opt: Options
    """Simulation options."""
    body_pos: jax.Array
    """(nbody, 3) body frame position in the parent frame."""
    body_quat: jax.Array
    """(nbody, 4) body frame orientation in the parent frame, (w, x, y, z)."""
    body_ipos: jax.Array
    """(nbody, 3) inertial frame (center of mass) position in the body frame."""
    body_iquat: jax.Array
    """(nbody, 4) inertial frame orientation in the body frame."""
    body_mass: jax.Array
    """(nbody,) mass."""
    body_inertia: jax.Array
    """(nbody, 3) principal moments of inertia in the inertial frame."""
    body_invweight0: jax.Array
    """(nbody, 2) mean inverse inertia (translation, rotation) at qpos0, from MuJoCo."""
    jnt_pos: jax.Array
    """(njnt, 3) joint anchor in the body frame."""
    jnt_axis: jax.Array
    """(njnt, 3) joint axis in the body frame (hinge and slide)."""
    jnt_range: jax.Array
    """(njnt, 2) joint limits."""
    jnt_stiffness: jax.Array
    """(njnt,) joint spring stiffness."""
    jnt_margin: jax.Array
    """(njnt,) limit margin."""
    jnt_solref: jax.Array
    """(njnt, 2) limit solref."""
    jnt_solimp: jax.Array
    """(njnt, 5) limit solimp."""
    qpos0: jax.Array
    """(nq,) reference configuration (joint `ref`)."""
    qpos_spring: jax.Array
    """(nq,) spring rest configuration (joint `springref`)."""
    dof_damping: jax.Array
    """(nv,) viscous damping."""
    dof_armature: jax.Array
    """(nv,) armature inertia added to the mass-matrix diagonal."""
    dof_frictionloss: jax.Array
    """(nv,) dry friction loss; rows exist for the dofs with frictionloss > 0 at load (as MuJoCo's
    rows), so randomize it from a positive value in the MJCF."""
    dof_solref: jax.Array
    """(nv, 2) friction-loss solref."""
    dof_solimp: jax.Array
    """(nv, 5) friction-loss solimp."""
    dof_invweight0: jax.Array
    """(nv,) mean inverse inertia at qpos0, from MuJoCo."""
    geom_size: jax.Array
    """(ngeom, 3) geom size parameters (MuJoCo's sphere filter reads `geom_rbound`: enlarge both)."""
    geom_pos: jax.Array
    """(ngeom, 3) geom position in the body frame."""
    geom_quat: jax.Array
    """(ngeom, 4) geom orientation in the body frame."""
    geom_friction: jax.Array
    """(ngeom, 3) sliding, torsional, rolling friction."""
    geom_rgba: jax.Array = dataclasses.field(metadata={"visual": True})
    """(ngeom, 4) color (renderers read it; the physics does not, as in MuJoCo)."""
    geom_margin: jax.Array
    """(ngeom,) contact margin; a pair's margin is the sum of its geoms' (mixed every step)."""
    geom_gap: jax.Array
    """(ngeom,) contact gap; a pair's gap is the sum of its geoms'."""
    geom_solref: jax.Array
    """(ngeom, 2) contact solref, mixed per pair every step (priority, then solmix-weighted mean)."""
    geom_solimp: jax.Array
    """(ngeom, 5) contact solimp, mixed per pair every step like `geom_solref`."""
    geom_solmix: jax.Array
    """(ngeom,) solref/solimp mixing weight of equal-priority pairs."""
    geom_rbound: jax.Array
    """(ngeom,) bounding-sphere radius (0: none, planes); MuJoCo's sphere filter skips pairs farther
    apart than their radii plus margin and gap."""
    pair_friction: jax.Array
    """(npair, 5) friction of each explicit `<pair>` (slide, slide, spin, roll, roll)."""
    pair_solref: jax.Array
    """(npair, 2) solref of each explicit `<pair>`."""
    pair_solimp: jax.Array
    """(npair, 5) solimp of each explicit `<pair>`."""
    pair_margin: jax.Array
    """(npair,) margin of each explicit `<pair>`."""
    pair_gap: jax.Array
    """(npair,) gap of each explicit `<pair>`."""
    actuator_gear: jax.Array
    """(nu, 6) transmission gear; only gear[:, 0] matters for joint transmission."""
    actuator_gainprm: jax.Array
    """(nu, 10) gain parameters (gaintype fixed: gain = gainprm[0])."""
    actuator_biasprm: jax.Array
    """(nu, 10) bias parameters (biastype affine: b0 + b1*length + b2*velocity)."""
    actuator_ctrlrange: jax.Array
    """(nu, 2) control range, applied where `actuator_ctrllimited`."""
    actuator_forcerange: jax.Array
    """(nu, 2) force range, applied where `actuator_forcelimited`."""

    # ---- sizes, structure and type codes (static) ----
    nq: int = _static()
    """Number of position coordinates."""
    nv: int = _static()
    """Number of degrees of freedom."""
    nu: int = _static()
    """Number of actuators."""
    nbody: int = _static()
    """Number of bodies, including the world body 0."""
    njnt: int = _static()
    """Number of joints."""
    ngeom: int = _static()
    """Number of geoms."""
    body_parentid: tuple[int, ...] = _static()
    """Parent body id (world's parent is itself)."""
    body_rootid: tuple[int, ...] = _static()
    """Id of the body's ancestor that is a child of the world."""
    body_weldid: tuple[int, ...] = _static()
    """Id of the top body of the body's rigid (joint-free) group."""
    body_sameframe: tuple[int, ...] = _static()
    """mjtSameFrame of each inertial frame: 1 (body frame) or 3 (body orientation) make kinematics
    copy the body's frame instead of reading `body_ipos`/`body_iquat`, as MuJoCo's does."""
    body_jntnum: tuple[int, ...] = _static()
    """Number of joints of each body."""
    body_jntadr: tuple[int, ...] = _static()
    """First joint id of each body (-1 if none)."""
    body_dofnum: tuple[int, ...] = _static()
    """Number of dofs of each body."""
    body_dofadr: tuple[int, ...] = _static()
    """First dof id of each body (-1 if none)."""
    jnt_type: tuple[int, ...] = _static()
    """mjtJoint code: 0 free, 1 ball, 2 slide, 3 hinge."""
    jnt_qposadr: tuple[int, ...] = _static()
    """First position coordinate of each joint."""
    jnt_dofadr: tuple[int, ...] = _static()
    """First dof of each joint."""
    jnt_bodyid: tuple[int, ...] = _static()
    """Body of each joint."""
    jnt_limited: tuple[bool, ...] = _static()
    """Whether the joint range is enforced."""
    dof_bodyid: tuple[int, ...] = _static()
    """Body of each dof."""
    dof_jntid: tuple[int, ...] = _static()
    """Joint of each dof."""
    dof_parentid: tuple[int, ...] = _static()
    """Parent dof in the kinematic tree (-1 for none)."""
    dof_hasfrictionloss: tuple[bool, ...] = _static()
    """Whether the dof has a friction-loss constraint row (frictionloss > 0 at load time)."""
    geom_type: tuple[int, ...] = _static()
    """mjtGeom code."""
    geom_bodyid: tuple[int, ...] = _static()
    """Body of each geom."""
    geom_contype: tuple[int, ...] = _static()
    """Contact type bitmask."""
    geom_conaffinity: tuple[int, ...] = _static()
    """Contact affinity bitmask."""
    geom_condim: tuple[int, ...] = _static()
    """Contact dimensionality (static: it sets the number of constraint rows)."""
    geom_priority: tuple[int, ...] = _static()
    """Contact parameter priority (static: it decides which geom's parameters a pair takes)."""
    geom_sameframe: tuple[int, ...] = _static()
    """mjtSameFrame of each geom: 1/3 copy the body's frame (position/orientation), 2/4 the inertial
    frame's, instead of reading `geom_pos`/`geom_quat`, as MuJoCo's kinematics does."""
    pair_solreffriction: tuple[tuple[float, float], ...] = _static()
    """(npair, 2) solref of each explicit `<pair>`'s elliptic friction rows (zeros: use solref). Static
    until elliptic cones are supported: only their friction rows read it."""
    geom_dataid: tuple[int, ...] = _static()
    """Mesh/hfield id (-1 for primitives)."""
    actuator_trntype: tuple[int, ...] = _static()
    """mjtTrn code (only 0, joint, is supported)."""
    actuator_trnid: tuple[tuple[int, int], ...] = _static()
    """Transmission target ids; [i][0] is the joint."""
    actuator_dyntype: tuple[int, ...] = _static()
    """mjtDyn code (only 0, none, is supported)."""
    actuator_gaintype: tuple[int, ...] = _static()
    """mjtGain code (only 0, fixed, is supported)."""
    actuator_biastype: tuple[int, ...] = _static()
    """mjtBias code: 0 none, 1 affine."""
    actuator_ctrllimited: tuple[bool, ...] = _static()
    """Whether ctrl is clamped to `actuator_ctrlrange`."""
    actuator_forcelimited: tuple[bool, ...] = _static()
    """Whether the force is clamped to `actuator_forcerange`."""
    contact_pairs: CollisionPairs = _static()
    """Collision candidates: which geom pairs, their condim and collider (static, built at load);
    their parameters are mixed from the `geom_*` and `pair_*` leaves every step."""
    body_names: tuple[str, ...] = _static()
    """Body names ('' if unnamed)."""
    jnt_names: tuple[str, ...] = _static()
    """Joint names ('' if unnamed)."""
    geom_names: tuple[str, ...] = _static()
    """Geom names ('' if unnamed)."""
    actuator_names: tuple[str, ...] = _static()
    """Actuator names ('' if unnamed)."""
    mj_model_ref: ModelRef | None = _static(default=None, repr=False)
    """The compiled `mujoco.MjModel` this System was converted from, compared by content (see `mj_model`)."""

    @property
    def mj_model(self) -> Any:
        """The compiled `mujoco.MjModel` this System came from, or None (for renderers; never read in jit)."""
        return None if self.mj_model_ref is None else self.mj_model_ref.model

    @property
    def dt(self) -> jax.Array:
        """() the integration timestep `opt.timestep`."""
        return self.opt.timestep

    def replace(self, **changes: Any) -> System:
        """Copy with the given leaves replaced, e.g. `sys.replace(body_mass=m)` (ValueError on bad input).

        Each array must have the leaf's shape, optionally behind leading batch axes (for `vmap`),
        and a floating dtype. Static fields (sizes, type codes, structure) are fixed when MuJoCo
        compiles the model and cannot be replaced.
        """
        _check_changes(self, "sys", changes, static_ok=False)
        return dataclasses.replace(self, **changes)


# Static System fields that describe the model rather than parameterize the physics.
_REPLACEABLE_STATIC = frozenset({"mj_model_ref"})


def _check_changes(obj: Any, where: str, changes: dict[str, Any], static_ok: bool) -> None:
    """Raise ValueError for unknown or static fields and for leaves of the wrong shape or dtype."""
    fields = {f.name: f for f in dataclasses.fields(obj)}
    for name, value in changes.items():
        f = fields.get(name)
        if f is None:
            close = difflib.get_close_matches(name, fields, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"{where}.replace: {type(obj).__name__} has no field {name!r}{hint}")
        if f.metadata.get("static"):
            if static_ok or name in _REPLACEABLE_STATIC:
                continue
            raise ValueError(
                f"{where}.replace: {name} is static: it is fixed when MuJoCo compiles the model (it sets "
                "array shapes, row counts or pair structure), so it cannot change per call or under vmap; "
                "edit the MJCF (or the mujoco.MjModel) and load it again with brax_physics.load_mjcf / "
                "from_mjmodel"
            )
        if isinstance(value, Options) or name == "opt":
            if not isinstance(value, Options):
                raise ValueError(f"{where}.replace: opt must be an Options, got {type(value).__name__}")
            continue
        old = getattr(obj, name)
        if not hasattr(old, "shape"):
            continue  # a tree of vmap axes or other specs (`jax.tree.map(lambda _: None, sys)`)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and jnp.ndim(old) == 0:
            continue  # a Python number for a scalar leaf
        shape, want = tuple(jnp.shape(value)), tuple(jnp.shape(old))
        if len(shape) < len(want) or shape[len(shape) - len(want):] != want:
            raise ValueError(
                f"{where}.replace: {name} has shape {shape}, expected {want} (optionally behind "
                "leading batch axes)"
            )
        dtype = getattr(value, "dtype", None) or np.asarray(value).dtype
        if not jnp.issubdtype(dtype, jnp.floating):
            raise ValueError(f"{where}.replace: {name} must be a floating-point array, got dtype {dtype}")
