"""`System` and `Options`: a MuJoCo model as a JAX pytree.

Type codes (values of MuJoCo's enums `mujoco.mjtJoint`, `mjtGeom`, ...: compare them with the enum
members) and tree structure are static (tuples, hashable, part of the treedef), so jit specializes
on them; physical parameters are float32 array leaves, so they can be replaced
(`sys.replace(body_mass=...)`) and batched under `vmap` without recompiling.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any, Final

import jax
import jax.numpy as jnp
import numpy as np

from brax_physics._src.collision.types import CollisionPairs, MeshData
from brax_physics._src.lowering.settings import DEFAULT, Lowering

# Field metadata of static fields: `jax.tree_util.register_dataclass` makes them part of the treedef.
_STATIC: Final = {"static": True}


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
    """Simulation options (MuJoCo `mjOption` subset): timestep, gravity, impratio, the medium and the
    solver's iteration caps as leaves, so another value reuses the compiled step."""

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
    magnetic: jax.Array
    """(3,) global magnetic flux in the world frame (read by magnetometer sensors)."""
    noslip_tolerance: jax.Array
    """() noslip sweeps stop once a sweep's scaled improvement is below this (read when
    `noslip_iterations` > 0)."""
    iterations: jax.Array
    """() maximum constraint-solver iterations (MuJoCo's `opt.iterations`; a whole number, stored as
    float32 like every leaf so that `jax.grad` takes a `System`)."""
    ls_iterations: jax.Array
    """() maximum line-search evaluations per iteration (a whole number, as `iterations`)."""
    has_fluid: bool = dataclasses.field(metadata=_STATIC)
    """Whether fluid forces are computed: density or viscosity nonzero at load time. Models without a
    medium skip the fluid stage; to randomize a medium from zero, `opt.replace(has_fluid=True, ...)`."""
    integrator: int = dataclasses.field(metadata=_STATIC)
    """`mujoco.mjtIntegrator` code: Euler, RK4 or implicitfast."""
    disableflags: int = dataclasses.field(metadata=_STATIC)
    """`mujoco.mjtDisableBit` mask."""
    enableflags: int = dataclasses.field(metadata=_STATIC)
    """`mujoco.mjtEnableBit` mask."""
    tolerance: float = dataclasses.field(metadata=_STATIC)
    """Solver tolerance on the scaled cost improvement and gradient."""
    ls_tolerance: float = dataclasses.field(metadata=_STATIC)
    """Line-search slope tolerance, relative to `tolerance`."""
    cone: int = dataclasses.field(metadata=_STATIC)
    """`mujoco.mjtCone` code: pyramidal or elliptic."""
    solver: int = dataclasses.field(metadata=_STATIC)
    """`mujoco.mjtSolver` code: PGS, CG or Newton."""
    noslip_iterations: int = dataclasses.field(default=0, metadata=_STATIC)
    """Maximum noslip sweeps after the main solver (0: no noslip, nothing traced)."""

    def replace(self, **changes: Any) -> Options:
        """Copy with the given fields replaced; array fields are checked like `System.replace`'s."""
        _check_changes(self, "sys.opt", changes, static_ok=True)
        for name in ("iterations", "ls_iterations"):
            value = changes.get(name)
            if isinstance(value, (int, float)) and not float(value).is_integer():
                raise ValueError(f"sys.opt.replace: {name} must be a whole number, got {value!r}")
        return dataclasses.replace(self, **_as_leaves(self, changes))


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
    body_gravcomp: jax.Array
    """(nbody,) gravity compensation: the fraction of the body's weight cancelled by a force at its com
    (read when `ngravcomp`)."""
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
    """(ngeom, 4) color (renderers read it; the physics does not: rays skip the geoms whose alpha was 0
    at load, `geom_visible`, and changing it later does not hide or show a geom to them)."""
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
    mesh_vert: jax.Array
    """(nmeshvert, 3) mesh vertices in their geom's frame; colliders read the convex hull's
    (`meshes.hull`), rays the triangles (`meshes.face`)."""
    hfield_size: jax.Array
    """(nhfield, 4) height-field size: x and y half-extents, elevation scale (data 1 is this high) and
    base depth below z = 0."""
    hfield_data: jax.Array
    """(nhfielddata,) all height fields' elevations, row-major (row r is y, column c is x), as
    MuJoCo's normalized `hfield_data` (elevation = data * hfield_size[2])."""
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
    pair_solreffriction: jax.Array
    """(npair, 2) solref of each explicit `<pair>`'s elliptic friction rows (zeros: use `pair_solref`)."""
    actuator_gear: jax.Array
    """(nu, 6) transmission gear; only gear[:, 0] matters for joint transmission."""
    actuator_gainprm: jax.Array
    """(nu, 10) gain parameters (fixed: gainprm[0]; affine: g0 + g1*length + g2*velocity; muscle: MuJoCo's
    (range0, range1, force, scale, lmin, lmax, vmax, fpmax, fvmax))."""
    actuator_biasprm: jax.Array
    """(nu, 10) bias parameters (affine: b0 + b1*length + b2*velocity; muscle: as `actuator_gainprm`)."""
    actuator_dynprm: jax.Array
    """(nu, 10) activation dynamics parameters (filter: tau; muscle: tau_act, tau_deact, tausmooth)."""
    actuator_actrange: jax.Array
    """(nu, 2) activation range, applied after integration where `actuator_actlimited`."""
    actuator_lengthrange: jax.Array
    """(nu, 2) transmission length range (muscles normalize their length by it; MuJoCo's compiler sets it)."""
    actuator_acc0: jax.Array
    """(nu,) acceleration from unit force at qpos0 (muscles with force < 0 use scale / acc0)."""
    actuator_cranklength: jax.Array
    """(nu,) connecting-rod length of slider-crank transmissions."""
    actuator_damping: jax.Array
    """(nu,) damping added to the actuated joint's dofs as damping * gear[0]² (joint transmissions
    whose joint `jnt_actuatorid` names it)."""
    actuator_armature: jax.Array
    """(nu,) armature added to the actuated joint's mass-matrix diagonal as armature * gear[0]²."""
    jnt_actfrcrange: jax.Array
    """(njnt, 2) range of the total actuator force on each joint, applied where `jnt_actfrclimited`."""
    actuator_ctrlrange: jax.Array
    """(nu, 2) control range, applied where `actuator_ctrllimited`."""
    actuator_forcerange: jax.Array
    """(nu, 2) force range, applied where `actuator_forcelimited`."""
    site_pos: jax.Array
    """(nsite, 3) site position in the body frame (ignored where `site_sameframe` says so, as MuJoCo)."""
    site_quat: jax.Array
    """(nsite, 4) site orientation in the body frame (same caveat)."""
    site_size: jax.Array
    """(nsite, 3) site geometry size (the zone of touch sensors)."""
    sensor_cutoff: jax.Array
    """(nsensor,) clamp of real (both sides) and positive (above) sensor values; 0: none."""
    eq_data: jax.Array
    """(neq, 12) equality parameters: connect anchors in body1/body2 (0:3, 3:6); weld anchor in body2
    (0:3), relpose position (3:6) and quaternion (6:10), torquescale (10); joint/tendon polycoef (0:5)."""
    eq_solref: jax.Array
    """(neq, 2) equality solref."""
    eq_solimp: jax.Array
    """(neq, 5) equality solimp."""
    wrap_prm: jax.Array
    """(nwrap,) wrap parameter: a fixed tendon's joint coefficient, a pulley's divisor (the side-site
    ids of geom wraps are structure: `wrap_sidesite`)."""
    tendon_range: jax.Array
    """(ntendon, 2) tendon length limits, applied where `tendon_limited`."""
    tendon_margin: jax.Array
    """(ntendon,) limit margin."""
    tendon_solref_lim: jax.Array
    """(ntendon, 2) limit solref."""
    tendon_solimp_lim: jax.Array
    """(ntendon, 5) limit solimp."""
    tendon_frictionloss: jax.Array
    """(ntendon,) dry friction loss; rows exist for the tendons with frictionloss > 0 at load (as dofs')."""
    tendon_solref_fri: jax.Array
    """(ntendon, 2) friction-loss solref."""
    tendon_solimp_fri: jax.Array
    """(ntendon, 5) friction-loss solimp."""
    tendon_stiffness: jax.Array
    """(ntendon,) spring stiffness."""
    tendon_damping: jax.Array
    """(ntendon,) damping along the tendon."""
    tendon_lengthspring: jax.Array
    """(ntendon, 2) spring dead band [lower, upper]: no spring force between them."""
    tendon_armature: jax.Array
    """(ntendon,) inertia along the tendon (armature·JᵀJ on the mass matrix)."""
    tendon_length0: jax.Array
    """(ntendon,) tendon length at qpos0, from MuJoCo (the reference of tendon equalities)."""
    tendon_invweight0: jax.Array
    """(ntendon,) inverse inertia along the tendon at qpos0, from MuJoCo (limit, friction-loss and
    tendon-equality regularizer)."""

    # ---- sizes, structure and type codes (static) ----
    nq: int = dataclasses.field(metadata=_STATIC)
    """Number of position coordinates."""
    nv: int = dataclasses.field(metadata=_STATIC)
    """Number of degrees of freedom."""
    nu: int = dataclasses.field(metadata=_STATIC)
    """Number of actuators."""
    na: int = dataclasses.field(metadata=_STATIC)
    """Number of activation states (`State.act`, MuJoCo's d.act)."""
    nbody: int = dataclasses.field(metadata=_STATIC)
    """Number of bodies, including the world body 0."""
    njnt: int = dataclasses.field(metadata=_STATIC)
    """Number of joints."""
    ngeom: int = dataclasses.field(metadata=_STATIC)
    """Number of geoms."""
    nsite: int = dataclasses.field(metadata=_STATIC)
    """Number of sites."""
    nsensor: int = dataclasses.field(metadata=_STATIC)
    """Number of sensors."""
    nsensordata: int = dataclasses.field(metadata=_STATIC)
    """Length of `State.sensordata` (sum of `sensor_dim`)."""
    ngravcomp: int = dataclasses.field(metadata=_STATIC)
    """Number of bodies with nonzero gravcomp at load; 0: no gravity compensation is traced (give a
    body a nonzero gravcomp in the MJCF to randomize `body_gravcomp`)."""
    nmocap: int = dataclasses.field(metadata=_STATIC)
    """Number of mocap bodies (rows of `State.mocap_pos`/`mocap_quat`)."""
    neq: int = dataclasses.field(metadata=_STATIC)
    """Number of equality constraints."""
    body_parentid: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """Parent body id (world's parent is itself)."""
    body_rootid: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """Id of the body's ancestor that is a child of the world."""
    body_weldid: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """Id of the top body of the body's rigid (joint-free) group."""
    body_mocapid: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """Row of each body in `State.mocap_pos`/`mocap_quat` (-1: not a mocap body). A mocap body is a
    joint-free child of the world whose pose is the state's mocap_pos/quat instead of body_pos/quat."""
    body_sameframe: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """`mujoco.mjtSameFrame` of each inertial frame: BODY (body frame) or BODYROT (body orientation)
    make kinematics copy the body's frame instead of reading `body_ipos`/`body_iquat`, as MuJoCo's does."""
    body_jntnum: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """Number of joints of each body."""
    body_jntadr: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """First joint id of each body (-1 if none)."""
    body_dofnum: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """Number of dofs of each body."""
    body_dofadr: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """First dof id of each body (-1 if none)."""
    jnt_type: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """`mujoco.mjtJoint` code: free, ball, slide or hinge."""
    jnt_qposadr: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """First position coordinate of each joint."""
    jnt_dofadr: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """First dof of each joint."""
    jnt_bodyid: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """Body of each joint."""
    jnt_limited: tuple[bool, ...] = dataclasses.field(metadata=_STATIC)
    """Whether the joint range is enforced."""
    jnt_hasstiffness: tuple[bool, ...] = dataclasses.field(metadata=_STATIC)
    """Whether the joint's stiffness was nonzero at load: ball and free joints trace their quaternion
    springs only then (give them a stiffness in the MJCF to randomize `jnt_stiffness`)."""
    dof_bodyid: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """Body of each dof."""
    dof_jntid: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """Joint of each dof."""
    dof_parentid: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """Parent dof in the kinematic tree (-1 for none)."""
    dof_treeid: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """MuJoCo's kinematic tree of each dof (trees start at the first body with dofs below the world);
    the constraint solver's islands are unions of trees."""
    dof_simplenum: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """MuJoCo's count of consecutive "simple" dofs from each dof (nonzero: its M row holds only the
    diagonal, so MuJoCo drops tendon armature and implicit damping couplings to it)."""
    dof_hasfrictionloss: tuple[bool, ...] = dataclasses.field(metadata=_STATIC)
    """Whether the dof has a friction-loss constraint row (frictionloss > 0 at load time)."""
    geom_type: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """`mujoco.mjtGeom` code."""
    geom_bodyid: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """Body of each geom."""
    geom_contype: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """Contact type bitmask."""
    geom_conaffinity: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """Contact affinity bitmask."""
    geom_condim: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """Contact dimensionality (static: it sets the number of constraint rows)."""
    geom_priority: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """Contact parameter priority (static: it decides which geom's parameters a pair takes)."""
    geom_sameframe: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """`mujoco.mjtSameFrame` of each geom: BODY/BODYROT copy the body's frame (position/orientation),
    INERTIA/INERTIAROT the inertial frame's, instead of reading `geom_pos`/`geom_quat`, as MuJoCo does."""
    geom_dataid: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """Mesh/hfield id (-1 for primitives)."""
    geom_group: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """Geom group (0..5 for MuJoCo's visibility masks; rays filter on it when given a `geomgroup`)."""
    geom_visible: tuple[bool, ...] = dataclasses.field(metadata=_STATIC)
    """Whether rays (MuJoCo mj_ray, rangefinders) can hit the geom: the alpha of its rgba, or of its
    material's rgba if it has a material, was nonzero at load (MuJoCo's rays skip invisible geoms)."""
    hfield_nrow: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """Number of rows (y samples) of each height field."""
    hfield_ncol: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """Number of columns (x samples) of each height field."""
    hfield_adr: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """Address of each height field's first elevation in `hfield_data`."""
    actuator_trntype: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """`mujoco.mjtTrn` code: joint, jointinparent, slidercrank, tendon or site."""
    actuator_trnid: tuple[tuple[int, int], ...] = dataclasses.field(metadata=_STATIC)
    """Transmission targets: (joint, -1), (tendon, -1), (site, refsite or -1), (crank site, slider site)."""
    actuator_dyntype: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """`mujoco.mjtDyn` code: none, integrator, filter, filterexact or muscle."""
    actuator_gaintype: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """`mujoco.mjtGain` code: fixed, affine or muscle."""
    actuator_biastype: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """`mujoco.mjtBias` code: none, affine or muscle."""
    actuator_actadr: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """Address of each actuator's activation in `State.act` (-1: stateless)."""
    actuator_actnum: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """Number of activations of each actuator (0 or 1)."""
    actuator_actlimited: tuple[bool, ...] = dataclasses.field(metadata=_STATIC)
    """Whether the activation is clamped to `actuator_actrange` after integration."""
    actuator_actearly: tuple[bool, ...] = dataclasses.field(metadata=_STATIC)
    """Whether the force uses the next step's activation (act integrated by act_dot) instead of act."""
    jnt_actuatorid: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """MuJoCo's actuator whose damping/armature the joint inherits (-1 none, -2 several: every
    joint-transmission actuator of the joint); set by its compiler from nonzero values at load."""
    jnt_actfrclimited: tuple[bool, ...] = dataclasses.field(metadata=_STATIC)
    """Whether the joint's total actuator force is clamped to `jnt_actfrcrange`."""
    actuator_ctrllimited: tuple[bool, ...] = dataclasses.field(metadata=_STATIC)
    """Whether ctrl is clamped to `actuator_ctrlrange`."""
    actuator_forcelimited: tuple[bool, ...] = dataclasses.field(metadata=_STATIC)
    """Whether the force is clamped to `actuator_forcerange`."""
    site_type: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """`mujoco.mjtGeom` code of each site's geometry (sphere, capsule, ellipsoid, cylinder, box)."""
    site_bodyid: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """Body of each site."""
    site_sameframe: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """`mujoco.mjtSameFrame` of each site: as `geom_sameframe`, the frame MuJoCo copies instead of
    reading `site_pos`/`site_quat`."""
    sensor_type: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """`mujoco.mjtSensor` code of each sensor."""
    sensor_datatype: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """`mujoco.mjtDataType` code: real, positive, axis or quaternion (how `sensor_cutoff` applies)."""
    sensor_objtype: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """`mujoco.mjtObj` code of the sensed object."""
    sensor_objid: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """Id of the sensed object."""
    sensor_reftype: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """`mujoco.mjtObj` code of the reference frame's object (frame sensors)."""
    sensor_refid: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """Id of the reference frame's object (-1: the world frame)."""
    sensor_dim: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """Number of values of each sensor."""
    sensor_adr: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """Address of each sensor's first value in `State.sensordata`."""
    sensor_intprm: tuple[tuple[int, ...], ...] = dataclasses.field(metadata=_STATIC)
    """(nsensor, mjNSENS) integer parameters: a rangefinder's [i][0] is its `mujoco.mjtRayDataField` bit
    mask (which of distance, direction, origin, point, normal, depth it reports); a contact sensor's
    [i][:3] are its dataspec, reduce and num."""
    eq_type: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """`mujoco.mjtEq` code of each equality: connect, weld, joint or tendon."""
    eq_obj1id: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """First constrained object (body, site, joint or tendon per `eq_objtype`/`eq_type`)."""
    eq_obj2id: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """Second constrained object (world body 0 for connect/weld, -1 for joint/tendon when absent)."""
    eq_objtype: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """`mujoco.mjtObj` code of connect/weld objects: body or site."""
    eq_active0: tuple[bool, ...] = dataclasses.field(metadata=_STATIC)
    """Initial `State.eq_active` of each equality (MJCF `active`)."""
    ntendon: int = dataclasses.field(metadata=_STATIC)
    """Number of tendons."""
    tendon_adr: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """First wrap entry of each tendon."""
    tendon_num: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """Number of wrap entries of each tendon."""
    tendon_limited: tuple[bool, ...] = dataclasses.field(metadata=_STATIC)
    """Whether the tendon's length range is enforced (a limit constraint row)."""
    tendon_hasfrictionloss: tuple[bool, ...] = dataclasses.field(metadata=_STATIC)
    """Whether the tendon has a friction-loss constraint row (frictionloss > 0 at load time)."""
    wrap_type: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """`mujoco.mjtWrap` code of each wrap entry: joint (fixed tendons), site, pulley, sphere, cylinder."""
    wrap_objid: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """Joint, site or geom id of each wrap entry (-1 for pulleys)."""
    wrap_sidesite: tuple[int, ...] = dataclasses.field(metadata=_STATIC)
    """Side site of each geom wrap entry (-1: none, and for every other entry)."""
    contact_pairs: CollisionPairs = dataclasses.field(metadata=_STATIC)
    """Collision candidates: which geom pairs, their condim and collider (static, built at load);
    their parameters are mixed from the `geom_*` and `pair_*` leaves every step."""
    meshes: MeshData = dataclasses.field(metadata=_STATIC)
    """Static mesh structure: convex hull vertices and neighbours (MuJoCo's mesh_graph), triangles."""
    body_names: tuple[str, ...] = dataclasses.field(metadata=_STATIC)
    """Body names ('' if unnamed)."""
    jnt_names: tuple[str, ...] = dataclasses.field(metadata=_STATIC)
    """Joint names ('' if unnamed)."""
    geom_names: tuple[str, ...] = dataclasses.field(metadata=_STATIC)
    """Geom names ('' if unnamed)."""
    actuator_names: tuple[str, ...] = dataclasses.field(metadata=_STATIC)
    """Actuator names ('' if unnamed)."""
    site_names: tuple[str, ...] = dataclasses.field(metadata=_STATIC)
    """Site names ('' if unnamed)."""
    sensor_names: tuple[str, ...] = dataclasses.field(metadata=_STATIC)
    """Sensor names ('' if unnamed; `brax_physics.sensor` looks values up by them)."""
    eq_names: tuple[str, ...] = dataclasses.field(metadata=_STATIC)
    """Equality constraint names ('' if unnamed), in `State.eq_active` order."""
    tendon_names: tuple[str, ...] = dataclasses.field(metadata=_STATIC)
    """Tendon names ('' if unnamed)."""
    tendon_bias: bool = dataclasses.field(default=False, metadata=_STATIC)
    """Whether the spatial tendons' armature bias force is computed: a spatial tendon had armature at
    load time. To randomize a spatial tendon's armature from zero, `replace(tendon_bias=True, ...)`."""
    freebody_jnts: tuple[int, ...] = dataclasses.field(default=(), metadata=_STATIC)
    """Free joints of standalone free bodies (MuJoCo's `mj_isFreeBody`: a body whose only joint is free
    and whose subtree has no other mass), which implicitfast integrates with their gyroscopic terms."""
    mj_model_ref: ModelRef | None = dataclasses.field(default=None, repr=False, metadata=_STATIC)
    """The compiled `mujoco.MjModel` this System was converted from, compared by content (see `mj_model`)."""

    lowering: Lowering = dataclasses.field(default=DEFAULT, repr=False, metadata=_STATIC)
    """How the physics is lowered (`brax_physics.Lowering`: forms of factors, solves, the solver's
    loop and products; results agree to float32 roundoff). `sys.replace(lowering=...)` changes it;
    being static, a changed value compiles a new program."""

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
        return dataclasses.replace(self, **_as_leaves(self, changes))


# Static System fields that may be replaced: they describe the model (mj_model_ref), switch on a
# stage whose leaves were zero at load (tendon_bias) or choose how it is lowered (lowering), without
# changing any array shape.
_REPLACEABLE_STATIC: Final = frozenset({"mj_model_ref", "tendon_bias", "lowering"})


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
            if name == "lowering" and not isinstance(value, Lowering):
                raise ValueError(f"{where}.replace: lowering must be a brax_physics.Lowering, got "
                                 f"{type(value).__name__}")
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
            continue  # a Python number for a scalar leaf (`_as_leaves` gives it the leaf's dtype)
        shape, want = tuple(jnp.shape(value)), tuple(jnp.shape(old))
        if len(shape) < len(want) or shape[len(shape) - len(want):] != want:
            raise ValueError(
                f"{where}.replace: {name} has shape {shape}, expected {want} (optionally behind "
                "leading batch axes)"
            )
        dtype = getattr(value, "dtype", None) or np.asarray(value).dtype
        if not jnp.issubdtype(dtype, jnp.floating):
            raise ValueError(f"{where}.replace: {name} must be a floating-point array, got dtype {dtype}")


def _as_leaves(obj: Any, changes: dict[str, Any]) -> dict[str, Any]:
    """`changes` with Python numbers for scalar array leaves as arrays of the leaf's dtype: a weakly
    typed number would compile the step once more."""
    out = dict(changes)
    for name, value in changes.items():
        old = getattr(obj, name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and hasattr(old, "dtype"):
            out[name] = jnp.asarray(value, old.dtype)
    return out
