"""MJCF -> `System`: MuJoCo compiles the model, we check the supported subset and convert."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from typing import Any, Final

import jax.numpy as jnp
import mujoco
import numpy as np
from mujoco import (
    mjtBias,
    mjtDyn,
    mjtEnableBit,
    mjtEq,
    mjtGain,
    mjtIntegrator,
    mjtJoint,
    mjtObj,
    mjtSensor,
    mjtTrn,
    mjtWrap,
)

from brax_physics._src import ray
from brax_physics._src.collision.mesh import mesh_data
from brax_physics._src.collision.pairs import collision_pairs
from brax_physics._src.collision.types import CollisionPairs
from brax_physics._src.equality import SUPPORTED as EQ_SUPPORTED
from brax_physics._src.mjenum import keyword
from brax_physics._src.options_check import emit_option_warnings, unknown_flags
from brax_physics._src.sensor import CONTACT_DATA, CONTACT_OBJECTS, CONTACT_REDUCE, FRAME_OBJECTS, STAGE
from brax_physics._src.system import ModelRef, Options, System


def load_mjcf(path_or_xml: str | os.PathLike[str]) -> System:
    """Compile MJCF (an XML string starting with '<', or a file path) into a `System`.

    Paths are loaded with `mujoco.MjModel.from_xml_path`, so includes and assets resolve
    relative to the file. Raises `ValueError` naming the element for unsupported features.
    """
    if isinstance(path_or_xml, str) and path_or_xml.lstrip().startswith("<"):
        m = mujoco.MjModel.from_xml_string(path_or_xml)
    else:
        m = mujoco.MjModel.from_xml_path(os.fspath(path_or_xml))
    return from_mjmodel(m)


def _namer(m: Any, obj: Any, kind: str) -> Callable[[int], str]:
    def name(i: int) -> str:
        n = mujoco.mj_id2name(m, obj, i)
        return f"{kind} '{n}'" if n else f"{kind} #{i}"

    return name


def _names(m: Any, obj: Any, count: int) -> tuple[str, ...]:
    return tuple(mujoco.mj_id2name(m, obj, i) or "" for i in range(count))


def unsupported(m: Any) -> list[str]:
    """Messages for every feature of MjModel `m` outside the supported subset (empty if none)."""
    errs: list[str] = []
    obj = mujoco.mjtObj
    for count, o, kind, tag, what in (
        (m.nflex, obj.mjOBJ_FLEX, "flex", "flex", "flexes are not supported"),
        (m.nplugin, obj.mjOBJ_PLUGIN, "plugin", "plugin", "plugins are not supported"),
    ):
        name = _namer(m, o, kind)
        errs += [f"{name(i)} (<{tag}>): {what}" for i in range(count)]

    eq = _namer(m, obj.mjOBJ_EQUALITY, "equality")
    for i in range(m.neq):
        t = int(m.eq_type[i])
        if t not in EQ_SUPPORTED:
            tag = keyword(mjtEq, t)
            errs.append(f"{eq(i)} (<{tag}>): {tag} equality constraints are not supported "
                        "(connect, weld, joint and tendon are)")
    errs += _unsupported_tendons(m)

    jnt = _namer(m, obj.mjOBJ_JOINT, "joint")
    for j in range(m.njnt):
        t = int(m.jnt_type[j])
        if np.any(m.jnt_stiffnesspoly[j] != 0) or m.jnt_springyield[j] != 0:
            errs.append(f"{jnt(j)}: nonlinear or plastic springs are not supported")
        if m.jnt_actgravcomp[j]:
            errs.append(f"{jnt(j)}: actuatorgravcomp=true (gravity compensation through actuators) "
                        "is not supported")
        if t == mjtJoint.mjJNT_FREE and m.body_jntnum[m.jnt_bodyid[j]] != 1:
            errs.append(f"{jnt(j)}: a free joint must be the only joint of its body")
        ndof = {int(mjtJoint.mjJNT_FREE): 6, int(mjtJoint.mjJNT_BALL): 3}.get(t, 1)
        dofs = range(m.jnt_dofadr[j], m.jnt_dofadr[j] + ndof)
        if any(np.any(m.dof_dampingpoly[d] != 0) for d in dofs):
            errs.append(f"{jnt(j)}: nonlinear damping is not supported")

    act = _namer(m, obj.mjOBJ_ACTUATOR, "actuator")
    for i in range(m.nu):
        dyn, gain, bias, trn = (int(m.actuator_dyntype[i]), int(m.actuator_gaintype[i]),
                                int(m.actuator_biastype[i]), int(m.actuator_trntype[i]))
        a = act(i)
        if dyn not in _DYN:
            errs.append(f"{a}: dyntype={keyword(mjtDyn, dyn)} is not supported "
                        "(none, integrator, filter, filterexact, muscle)")
        if gain not in _GAIN:
            errs.append(f"{a}: gaintype={keyword(mjtGain, gain)} is not supported (fixed, affine, muscle)")
        if bias not in _BIAS:
            errs.append(f"{a}: biastype={keyword(mjtBias, bias)} is not supported (none, affine, muscle)")
        if trn not in _TRN:
            errs.append(f"{a}: trntype={keyword(mjtTrn, trn)} is not supported "
                        "(joint, jointinparent, slidercrank, site, tendon)")
        if m.actuator_actnum[i] > 1 or m.actuator_ctrlnum[i] != 1 or m.actuator_outnum[i] != 1:
            errs.append(f"{a}: actuators with several controls, activations or outputs are not supported")
        if _wraps_setpoint(m, i):
            errs.append(f"{a}: a servo on a rotational (ball-joint or refsite) transmission wraps its "
                        "setpoint, which is not supported")
        if trn == mjtTrn.mjTRN_TENDON and (m.actuator_damping[i] != 0 or m.actuator_armature[i] != 0):
            errs.append(f"{a}: actuator damping/armature on a tendon transmission is not supported")
        if m.actuator_delay[i] != 0 or np.any(m.actuator_history[i] != 0):
            errs.append(f"{a}: actuator delay/history is not supported")
        if np.any(m.actuator_dampingpoly[i] != 0):
            errs.append(f"{a}: nonlinear actuator damping is not supported")
        if m.actuator_plugin[i] >= 0:
            errs.append(f"{a}: actuator plugins are not supported")

    errs += _unsupported_sensors(m)

    opt = m.opt
    supported = (mjtIntegrator.mjINT_EULER, mjtIntegrator.mjINT_RK4, mjtIntegrator.mjINT_IMPLICITFAST)
    if int(opt.integrator) not in supported:
        integ = keyword(mjtIntegrator, int(opt.integrator))
        errs.append(f"option: integrator={integ} is not supported (Euler, RK4, implicitfast)")
    implicitfast = opt.integrator == mjtIntegrator.mjINT_IMPLICITFAST
    if implicitfast and (opt.density != 0 or opt.viscosity != 0):
        # MuJoCo integrates fluid forces implicitly there (their velocity derivatives in qDeriv)
        errs.append("option: integrator=implicitfast with density/viscosity (fluid forces) is not supported "
                    "(use Euler or RK4)")
    for flag in ("diagexact", "speculative"):
        if opt.enableflags & int(mjtEnableBit.__members__["mjENBL_" + flag.upper()]):
            errs.append(f"option: flag {flag}=enable is not supported (MuJoCo's results would differ)")
    if opt.enableflags & mjtEnableBit.mjENBL_IPC:
        # MuJoCo's mj_step refuses it too, unless integrator="discrete" (refused above)
        errs.append('option: flag ipc=enable is not supported (MuJoCo steps it only with '
                    'integrator="discrete"; remove the flag)')
    errs += unknown_flags(m)
    geom = _namer(m, obj.mjOBJ_GEOM, "geom")
    for g in np.flatnonzero(np.asarray(m.geom_adhesion) != 0):
        errs.append(f"{geom(int(g))}: adhesion is not supported")
    pair = _namer(m, obj.mjOBJ_PAIR, "pair")
    for k in np.flatnonzero(np.asarray(m.pair_adhesion) != 0):
        errs.append(f"{pair(int(k))} (<pair>): adhesion is not supported")
    for g in np.flatnonzero(np.asarray(m.geom_fluid).reshape(m.ngeom, mujoco.mjNFLUID)[:, 0] != 0):
        errs.append(f"{geom(int(g))}: fluidshape=ellipsoid is not supported (the inertia-box fluid model is)")
    if opt.enableflags & mjtEnableBit.mjENBL_SLEEP:
        errs.append("option: flag sleep is not supported")
    if opt.disableactuator != 0:
        errs.append("option: actuatorgroupdisable is not supported")
    return errs


_DYN: Final = (mjtDyn.mjDYN_NONE, mjtDyn.mjDYN_INTEGRATOR, mjtDyn.mjDYN_FILTER, mjtDyn.mjDYN_FILTEREXACT,
        mjtDyn.mjDYN_MUSCLE)
_GAIN: Final = (mjtGain.mjGAIN_FIXED, mjtGain.mjGAIN_AFFINE, mjtGain.mjGAIN_MUSCLE)
_BIAS: Final = (mjtBias.mjBIAS_NONE, mjtBias.mjBIAS_AFFINE, mjtBias.mjBIAS_MUSCLE)
_TRN: Final = (mjtTrn.mjTRN_JOINT, mjtTrn.mjTRN_JOINTINPARENT, mjtTrn.mjTRN_SLIDERCRANK, mjtTrn.mjTRN_SITE,
        mjtTrn.mjTRN_TENDON)


def _wraps_setpoint(m: Any, i: int) -> bool:
    """Whether MuJoCo wraps actuator i's setpoint to the nearest turn (its mj_fwdActuation wrapPeriod)."""
    servo = (int(m.actuator_gaintype[i]) == mjtGain.mjGAIN_FIXED
             and int(m.actuator_biastype[i]) == mjtBias.mjBIAS_AFFINE
             and m.actuator_gainprm[i, 0] == -m.actuator_biasprm[i, 1]
             and int(m.actuator_dyntype[i]) in (mjtDyn.mjDYN_NONE, mjtDyn.mjDYN_INTEGRATOR))
    if not servo:
        return False
    trn, gear = int(m.actuator_trntype[i]), m.actuator_gear[i]
    if trn == mjtTrn.mjTRN_SITE and m.actuator_trnid[i, 1] >= 0 and not np.any(gear[:3]):
        return bool(np.any(gear[3:]))
    joint = trn in (mjtTrn.mjTRN_JOINT, mjtTrn.mjTRN_JOINTINPARENT)
    return joint and int(m.jnt_type[m.actuator_trnid[i, 0]]) == mjtJoint.mjJNT_BALL and bool(np.any(gear[:3]))


def _unsupported_tendons(m: Any) -> list[str]:
    """Messages for the tendon features of MjModel `m` that are not computed here, naming each tendon."""
    errs: list[str] = []
    name = _namer(m, mujoco.mjtObj.mjOBJ_TENDON, "tendon")
    kin = mujoco.MjData(m)
    if m.ntendon:
        mujoco.mj_kinematics(m, kin)
    for i in range(m.ntendon):
        adr, num = int(m.tendon_adr[i]), int(m.tendon_num[i])
        types = [int(t) for t in m.wrap_type[adr : adr + num]]
        fixed = types[0] == mjtWrap.mjWRAP_JOINT
        where = f"{name(i)} (<{'fixed' if fixed else 'spatial'}>)"
        for k in range(adr, adr + num):
            geom_wrap = int(m.wrap_type[k]) in (mjtWrap.mjWRAP_SPHERE, mjtWrap.mjWRAP_CYLINDER)
            if not geom_wrap or m.wrap_prm[k] < 0:
                continue
            # a side site inside the geom selects MuJoCo's iterative inside wrap (not implemented)
            g, side = int(m.wrap_objid[k]), round(float(m.wrap_prm[k]))
            local = kin.geom_xmat[g].reshape(3, 3).T @ (kin.site_xpos[side] - kin.geom_xpos[g])
            if np.linalg.norm(local) < m.geom_size[g, 0]:  # at qpos0 (MuJoCo's test, mju_wrap)
                errs.append(f"{where}: a side site inside the wrapping geom is not supported")
        if fixed and any(int(m.jnt_type[m.wrap_objid[k]]) not in (mjtJoint.mjJNT_HINGE, mjtJoint.mjJNT_SLIDE)
                         for k in range(adr, adr + num)):
            errs.append(f"{where}: fixed tendons over ball or free joints are not supported")
        if np.any(m.tendon_stiffnesspoly[i] != 0) or np.any(m.tendon_dampingpoly[i] != 0):
            errs.append(f"{where}: nonlinear stiffness/damping is not supported")
        if m.tendon_springyield[i] != 0 or m.tendon_plasticadr[i] >= 0:
            errs.append(f"{where}: plastic springs are not supported")
        if m.tendon_actfrclimited[i]:
            errs.append(f"{where}: actuatorfrcrange is not supported")
    return errs


# Sensor types MuJoCo has that are not computed here, and why (the others: "not supported").
_SENSOR_WHY: Final = {
    mjtSensor.mjSENS_USER: "user sensors (MuJoCo's mjcb_sensor callback) are not supported",
    mjtSensor.mjSENS_PLUGIN: "plugin sensors are not supported",
}
# MJCF elements whose name differs from the mjtSensor keyword.
_SENSOR_TAG: Final = {
    mjtSensor.mjSENS_JOINTACTFRC: "jointactuatorfrc", mjtSensor.mjSENS_TENDONACTFRC: "tendonactuatorfrc",
    mjtSensor.mjSENS_GEOMDIST: "distance", mjtSensor.mjSENS_GEOMNORMAL: "normal",
    mjtSensor.mjSENS_GEOMFROMTO: "fromto",
}
_FRAME_SENSORS: Final = (
    mjtSensor.mjSENS_FRAMEPOS, mjtSensor.mjSENS_FRAMEQUAT, mjtSensor.mjSENS_FRAMEXAXIS,
    mjtSensor.mjSENS_FRAMEYAXIS, mjtSensor.mjSENS_FRAMEZAXIS, mjtSensor.mjSENS_FRAMELINVEL,
    mjtSensor.mjSENS_FRAMEANGVEL, mjtSensor.mjSENS_FRAMELINACC, mjtSensor.mjSENS_FRAMEANGACC,
)
_ACTUATOR_SENSORS: Final = (mjtSensor.mjSENS_ACTUATORPOS, mjtSensor.mjSENS_ACTUATORVEL,
                            mjtSensor.mjSENS_ACTUATORFRC)


def _unsupported_sensors(m: Any) -> list[str]:
    """Messages for the sensors of MjModel `m` that are not computed here, naming each."""
    errs: list[str] = []
    name = _namer(m, mujoco.mjtObj.mjOBJ_SENSOR, "sensor")
    for i in range(m.nsensor):
        t = int(m.sensor_type[i])
        tag = _SENSOR_TAG.get(t, keyword(mjtSensor, t))
        where = f"{name(i)} (<{tag}>)"
        if t not in STAGE:
            errs.append(f"{where}: {_SENSOR_WHY.get(t, f'{tag} sensors are not supported')}")
            continue
        if t in _FRAME_SENSORS:
            for what, typ, ok in (("objtype", m.sensor_objtype[i], FRAME_OBJECTS),
                                  ("reftype", m.sensor_reftype[i], (*FRAME_OBJECTS, mjtObj.mjOBJ_UNKNOWN))):
                if int(typ) not in ok:
                    kind = keyword(mjtObj, int(typ))
                    errs.append(f"{where}: {what}={kind} is not supported (body, xbody, geom, site)")
        if t == mjtSensor.mjSENS_RANGEFINDER:
            errs += _unsupported_rangefinder(m, i, where)
        if t == mjtSensor.mjSENS_CONTACT:
            errs += [f"{where}: {e}" for e in _unsupported_contact_sensor(m, i)]
        if t in _ACTUATOR_SENSORS and m.sensor_dim[i] != 1:
            errs.append(f"{where}: actuators with {m.sensor_dim[i]} outputs are not supported")
        if m.sensor_delay[i] != 0 or m.sensor_interval[i, 0] != 0 or np.any(m.sensor_history[i] != 0):
            errs.append(f"{where}: sensor delay/interval/history is not supported")
    return errs


def _unsupported_rangefinder(m: Any, i: int, where: str) -> list[str]:
    """Messages for rangefinder `i`: on a camera, or able to hit geoms rays cannot intersect here."""
    if m.sensor_objtype[i] != mjtObj.mjOBJ_SITE:
        return [f"{where}: rangefinders on a {keyword(mjtObj, int(m.sensor_objtype[i]))} are not supported "
                "(only on a site)"]
    body = np.asarray(m.geom_bodyid, np.int32)
    seen = ray.keep(body, _geom_visible(m), np.asarray(m.body_weldid, np.int32)[body],
                    np.asarray(m.geom_group, np.int32), None, True, int(m.site_bodyid[m.sensor_objid[i]]))
    geom = _namer(m, mjtObj.mjOBJ_GEOM, "geom")
    return [f"{where}: rays against {geom(int(g))} of type {keyword(mujoco.mjtGeom, int(m.geom_type[g]))} "
            f"are not supported (only {', '.join(keyword(mujoco.mjtGeom, int(t)) for t in ray.TYPES)})"
            for g in np.flatnonzero(seen) if int(m.geom_type[g]) not in ray.TYPES]


def _collided_meshes(m: Any, pairs: CollisionPairs) -> set[int]:
    """Ids of the meshes of geoms in collision pairs (only these need their convex hull's tables)."""
    geoms = {int(x) for g in pairs.groups for x in (*g.geom1, *g.geom2)}
    return {int(m.geom_dataid[x]) for x in geoms if int(m.geom_type[x]) == mujoco.mjtGeom.mjGEOM_MESH}


def _geom_visible(m: Any) -> np.ndarray:
    """(ngeom,) bool: MuJoCo's rays see the geom (alpha of its material's rgba, else its own, nonzero)."""
    mat = np.asarray(m.geom_matid, np.int64)
    alpha = np.asarray(m.geom_rgba, np.float64).reshape(m.ngeom, 4)[:, 3]
    if m.nmat:
        mat_alpha = np.asarray(m.mat_rgba, np.float64).reshape(m.nmat, 4)[np.maximum(mat, 0), 3]
        alpha = np.where(mat >= 0, mat_alpha, alpha)
    out: np.ndarray = alpha != 0
    return out


def _unsupported_contact_sensor(m: Any, i: int) -> list[str]:
    """What contact sensor `i` of MjModel `m` asks for that is not computed here."""
    errs = []
    for what, typ in (("matching", m.sensor_objtype[i]), ("matching", m.sensor_reftype[i])):
        if int(typ) not in CONTACT_OBJECTS:
            errs.append(f"{what} by {keyword(mjtObj, int(typ))} is not supported (geom, body, subtree)")
    if int(m.sensor_intprm[i, 0]) & ~CONTACT_DATA:
        errs.append("data linvel/angvel is not supported (found, force, torque, dist, pos, normal, tangent)")
    reduce = int(m.sensor_intprm[i, 1])
    if reduce not in CONTACT_REDUCE:
        name = {0: "none", 3: "netforce"}.get(reduce, str(reduce))
        errs.append(f"reduce={name} is not supported (mindist, maxforce)")
    if np.any(np.asarray(m.geom_gap) != 0) or np.any(np.asarray(m.pair_gap) != 0):
        errs.append("contacts in the gap band (geom/pair gap > 0) are not counted here")
    return errs


def _f32(x: Any) -> Any:
    return jnp.asarray(np.asarray(x, dtype=np.float32))


def _ints(x: Any) -> tuple[int, ...]:
    return tuple(int(v) for v in np.asarray(x).reshape(-1))


def _bools(x: Any) -> tuple[bool, ...]:
    return tuple(bool(v) for v in np.asarray(x).reshape(-1))


def _wrap_sidesites(m: Any) -> tuple[int, ...]:
    """Side site of each wrap entry: the rounded wrap_prm of sphere/cylinder wraps, else -1."""
    geom = np.isin(np.asarray(m.wrap_type), (int(mjtWrap.mjWRAP_SPHERE), int(mjtWrap.mjWRAP_CYLINDER)))
    return tuple(round(float(p)) if g else -1 for p, g in zip(np.asarray(m.wrap_prm), geom, strict=True))


def _model_ref(m: Any) -> ModelRef:
    buf = np.empty(mujoco.mj_sizeModel(m), np.uint8)
    mujoco.mj_saveModel(m, None, buf)
    return ModelRef(model=m, digest=hashlib.sha256(buf.tobytes()).digest())


def _spatial_tendons(m: Any) -> np.ndarray:
    """(ntendon,) bool: spatial tendons (their first wrap is not a joint)."""
    adr = np.asarray(m.tendon_adr, np.int64).reshape(-1)
    return np.asarray(m.wrap_type, np.int64).reshape(-1)[adr] != int(mjtWrap.mjWRAP_JOINT) if adr.size else \
        np.zeros(0, bool)


def _freebody_jnts(m: mujoco.MjModel) -> tuple[int, ...]:
    """Free joints of standalone free bodies, as MuJoCo's mj_isFreeBody decides at load."""
    out = []
    for j in np.flatnonzero(np.asarray(m.jnt_type) == int(mjtJoint.mjJNT_FREE)):
        b = int(m.jnt_bodyid[j])
        if (m.body_jntnum[b] == 1 and m.tree_dofnum[m.dof_treeid[m.jnt_dofadr[j]]] == 6
                and m.body_subtreemass[b] == m.body_mass[b]):
            out.append(int(j))
    return tuple(out)


def from_mjmodel(m: Any) -> System:
    """Convert a compiled `mujoco.MjModel` into a `System` (ValueError if unsupported)."""
    emit_option_warnings(m)
    errs = unsupported(m)
    if errs:
        raise ValueError("unsupported MJCF: " + "; ".join(errs))
    pairs = collision_pairs(m)  # ValueError naming the geoms for pairs without a collider
    o = m.opt
    opt = Options(
        timestep=_f32(o.timestep), gravity=_f32(o.gravity), impratio=_f32(o.impratio),
        density=_f32(o.density), viscosity=_f32(o.viscosity), wind=_f32(o.wind), magnetic=_f32(o.magnetic),
        noslip_tolerance=_f32(o.noslip_tolerance),
        has_fluid=bool(o.density != 0 or o.viscosity != 0),
        integrator=int(o.integrator), disableflags=int(o.disableflags), enableflags=int(o.enableflags),
        cone=int(o.cone), solver=int(o.solver), iterations=_f32(o.iterations),
        ls_iterations=_f32(o.ls_iterations), tolerance=float(o.tolerance),
        ls_tolerance=float(o.ls_tolerance), noslip_iterations=int(o.noslip_iterations),
    )
    obj = mujoco.mjtObj
    nten = int(m.ntendon)
    return System(
        opt=opt,
        body_pos=_f32(m.body_pos), body_quat=_f32(m.body_quat), body_ipos=_f32(m.body_ipos),
        body_iquat=_f32(m.body_iquat), body_mass=_f32(m.body_mass), body_inertia=_f32(m.body_inertia),
        body_gravcomp=_f32(m.body_gravcomp), body_invweight0=_f32(m.body_invweight0),
        jnt_pos=_f32(m.jnt_pos), jnt_axis=_f32(m.jnt_axis), jnt_range=_f32(m.jnt_range),
        jnt_stiffness=_f32(m.jnt_stiffness), jnt_margin=_f32(m.jnt_margin), jnt_solref=_f32(m.jnt_solref),
        jnt_solimp=_f32(m.jnt_solimp),
        qpos0=_f32(m.qpos0), qpos_spring=_f32(m.qpos_spring),
        dof_damping=_f32(m.dof_damping), dof_armature=_f32(m.dof_armature),
        dof_frictionloss=_f32(m.dof_frictionloss), dof_solref=_f32(m.dof_solref),
        dof_solimp=_f32(m.dof_solimp),
        dof_invweight0=_f32(m.dof_invweight0),
        geom_size=_f32(m.geom_size), geom_pos=_f32(m.geom_pos), geom_quat=_f32(m.geom_quat),
        geom_friction=_f32(m.geom_friction), geom_rgba=_f32(m.geom_rgba), geom_margin=_f32(m.geom_margin),
        geom_gap=_f32(m.geom_gap), geom_solref=_f32(m.geom_solref), geom_solimp=_f32(m.geom_solimp),
        geom_solmix=_f32(m.geom_solmix), geom_rbound=_f32(m.geom_rbound),
        mesh_vert=_f32(np.asarray(m.mesh_vert).reshape(m.nmeshvert, 3)),
        hfield_size=_f32(m.hfield_size.reshape(m.nhfield, 4)), hfield_data=_f32(m.hfield_data),
        pair_friction=_f32(m.pair_friction.reshape(m.npair, 5)),
        pair_solref=_f32(m.pair_solref.reshape(m.npair, mujoco.mjNREF)),
        pair_solimp=_f32(m.pair_solimp.reshape(m.npair, mujoco.mjNIMP)),
        pair_margin=_f32(m.pair_margin), pair_gap=_f32(m.pair_gap),
        pair_solreffriction=_f32(m.pair_solreffriction.reshape(m.npair, mujoco.mjNREF)),
        actuator_gear=_f32(m.actuator_gear.reshape(m.nu, 6)),
        actuator_gainprm=_f32(m.actuator_gainprm.reshape(m.nu, mujoco.mjNGAIN)),
        actuator_biasprm=_f32(m.actuator_biasprm.reshape(m.nu, mujoco.mjNBIAS)),
        actuator_ctrlrange=_f32(m.actuator_ctrlrange.reshape(m.nu, 2)),
        actuator_forcerange=_f32(m.actuator_forcerange.reshape(m.nu, 2)),
        actuator_dynprm=_f32(m.actuator_dynprm.reshape(m.nu, mujoco.mjNDYN)),
        actuator_actrange=_f32(m.actuator_actrange.reshape(m.nu, 2)),
        actuator_lengthrange=_f32(m.actuator_lengthrange.reshape(m.nu, 2)),
        actuator_acc0=_f32(m.actuator_acc0), actuator_cranklength=_f32(m.actuator_cranklength),
        actuator_damping=_f32(m.actuator_damping), actuator_armature=_f32(m.actuator_armature),
        jnt_actfrcrange=_f32(m.jnt_actfrcrange.reshape(m.njnt, 2)),
        site_pos=_f32(m.site_pos.reshape(m.nsite, 3)), site_quat=_f32(m.site_quat.reshape(m.nsite, 4)),
        site_size=_f32(m.site_size.reshape(m.nsite, 3)), sensor_cutoff=_f32(m.sensor_cutoff),
        wrap_prm=_f32(m.wrap_prm), tendon_range=_f32(m.tendon_range.reshape(nten, 2)),
        tendon_margin=_f32(m.tendon_margin),
        tendon_solref_lim=_f32(m.tendon_solref_lim.reshape(nten, mujoco.mjNREF)),
        tendon_solimp_lim=_f32(m.tendon_solimp_lim.reshape(nten, mujoco.mjNIMP)),
        tendon_frictionloss=_f32(m.tendon_frictionloss),
        tendon_solref_fri=_f32(m.tendon_solref_fri.reshape(nten, mujoco.mjNREF)),
        tendon_solimp_fri=_f32(m.tendon_solimp_fri.reshape(nten, mujoco.mjNIMP)),
        tendon_stiffness=_f32(m.tendon_stiffness), tendon_damping=_f32(m.tendon_damping),
        tendon_lengthspring=_f32(m.tendon_lengthspring.reshape(nten, 2)),
        tendon_armature=_f32(m.tendon_armature), tendon_length0=_f32(m.tendon_length0),
        tendon_invweight0=_f32(m.tendon_invweight0),
        eq_data=_f32(m.eq_data.reshape(m.neq, mujoco.mjNEQDATA)),
        eq_solref=_f32(m.eq_solref.reshape(m.neq, mujoco.mjNREF)),
        eq_solimp=_f32(m.eq_solimp.reshape(m.neq, mujoco.mjNIMP)),
        nq=int(m.nq), nv=int(m.nv), nu=int(m.nu), na=int(m.na), nbody=int(m.nbody), njnt=int(m.njnt),
        ngeom=int(m.ngeom), nsite=int(m.nsite), nsensor=int(m.nsensor), nsensordata=int(m.nsensordata),
        nmocap=int(m.nmocap), ngravcomp=int(m.ngravcomp), neq=int(m.neq),
        body_parentid=_ints(m.body_parentid), body_rootid=_ints(m.body_rootid),
        body_weldid=_ints(m.body_weldid), body_mocapid=_ints(m.body_mocapid),
        body_sameframe=_ints(m.body_sameframe),
        geom_sameframe=_ints(m.geom_sameframe),
        body_jntnum=_ints(m.body_jntnum), body_jntadr=_ints(m.body_jntadr), body_dofnum=_ints(m.body_dofnum),
        body_dofadr=_ints(m.body_dofadr),
        jnt_type=_ints(m.jnt_type), jnt_qposadr=_ints(m.jnt_qposadr), jnt_dofadr=_ints(m.jnt_dofadr),
        jnt_bodyid=_ints(m.jnt_bodyid), jnt_limited=_bools(m.jnt_limited),
        jnt_hasstiffness=_bools(np.asarray(m.jnt_stiffness) != 0),
        dof_bodyid=_ints(m.dof_bodyid), dof_jntid=_ints(m.dof_jntid), dof_parentid=_ints(m.dof_parentid),
        dof_treeid=_ints(m.dof_treeid), freebody_jnts=_freebody_jnts(m),
        dof_simplenum=_ints(m.dof_simplenum), dof_hasfrictionloss=_bools(np.asarray(m.dof_frictionloss) > 0),
        geom_type=_ints(m.geom_type), geom_bodyid=_ints(m.geom_bodyid), geom_contype=_ints(m.geom_contype),
        geom_conaffinity=_ints(m.geom_conaffinity), geom_condim=_ints(m.geom_condim),
        geom_priority=_ints(m.geom_priority), geom_dataid=_ints(m.geom_dataid),
        geom_group=_ints(m.geom_group), geom_visible=_bools(_geom_visible(m)),
        hfield_nrow=_ints(m.hfield_nrow), hfield_ncol=_ints(m.hfield_ncol), hfield_adr=_ints(m.hfield_adr),
        actuator_trntype=_ints(m.actuator_trntype),
        actuator_trnid=tuple((int(a), int(b)) for a, b in np.asarray(m.actuator_trnid).reshape(m.nu, 2)),
        actuator_dyntype=_ints(m.actuator_dyntype), actuator_gaintype=_ints(m.actuator_gaintype),
        actuator_biastype=_ints(m.actuator_biastype), actuator_ctrllimited=_bools(m.actuator_ctrllimited),
        actuator_forcelimited=_bools(m.actuator_forcelimited),
        actuator_actadr=_ints(m.actuator_actadr), actuator_actnum=_ints(m.actuator_actnum),
        actuator_actlimited=_bools(m.actuator_actlimited), actuator_actearly=_bools(m.actuator_actearly),
        jnt_actuatorid=_ints(m.jnt_actuatorid), jnt_actfrclimited=_bools(m.jnt_actfrclimited),
        site_type=_ints(m.site_type), site_bodyid=_ints(m.site_bodyid),
        site_sameframe=_ints(m.site_sameframe),
        sensor_type=_ints(m.sensor_type), sensor_datatype=_ints(m.sensor_datatype),
        sensor_objtype=_ints(m.sensor_objtype), sensor_objid=_ints(m.sensor_objid),
        sensor_reftype=_ints(m.sensor_reftype), sensor_refid=_ints(m.sensor_refid),
        sensor_dim=_ints(m.sensor_dim), sensor_adr=_ints(m.sensor_adr),
        sensor_intprm=tuple(_ints(r) for r in np.asarray(m.sensor_intprm).reshape(m.nsensor, mujoco.mjNSENS)),
        eq_type=_ints(m.eq_type), eq_obj1id=_ints(m.eq_obj1id), eq_obj2id=_ints(m.eq_obj2id),
        eq_objtype=_ints(m.eq_objtype), eq_active0=_bools(m.eq_active0),
        ntendon=nten, tendon_adr=_ints(m.tendon_adr), tendon_num=_ints(m.tendon_num),
        tendon_limited=_bools(m.tendon_limited),
        tendon_hasfrictionloss=_bools(np.asarray(m.tendon_frictionloss) > 0),
        wrap_type=_ints(m.wrap_type), wrap_objid=_ints(m.wrap_objid), wrap_sidesite=_wrap_sidesites(m),
        contact_pairs=pairs, meshes=mesh_data(m, _collided_meshes(m, pairs)),
        body_names=_names(m, obj.mjOBJ_BODY, m.nbody), jnt_names=_names(m, obj.mjOBJ_JOINT, m.njnt),
        geom_names=_names(m, obj.mjOBJ_GEOM, m.ngeom), actuator_names=_names(m, obj.mjOBJ_ACTUATOR, m.nu),
        site_names=_names(m, obj.mjOBJ_SITE, m.nsite), sensor_names=_names(m, obj.mjOBJ_SENSOR, m.nsensor),
        eq_names=_names(m, obj.mjOBJ_EQUALITY, m.neq),
        tendon_names=_names(m, obj.mjOBJ_TENDON, nten),
        tendon_bias=bool(np.any((np.asarray(m.tendon_armature) != 0) & _spatial_tendons(m))),
        mj_model_ref=_model_ref(m),
    )
