"""Load-time survey of MuJoCo's simulation options (`mjOption`) against what brax-physics runs.

Every option field and flag bit is in one of four classes, recorded in `OPTIONS`,
`DISABLE_FLAGS` and `ENABLE_FLAGS` (a test checks they cover all of MuJoCo's):

- honoured: the pipeline reads it as MuJoCo does (the entry says where);
- refused: loading raises `ValueError` (`loader.unsupported` or `collision_pairs`), as does a flag
  bit of a newer MuJoCo that this survey does not know (`unknown_flags`);
- irrelevant: it cannot change `mj_step`'s trajectory for a model we accept (the entry says why);
- warned: not honoured; at load `emit_option_warnings` names it in an `OptionWarning`, with what
  runs instead and whether results still match MuJoCo's (only for values where it matters).

Fluid forces under `implicitfast` are refused (MuJoCo integrates them implicitly there).
"""

from __future__ import annotations

import sys
import types
import warnings
from typing import Final, Literal

import mujoco

Status = Literal["honoured", "refused", "irrelevant", "warned"]


class OptionWarning(UserWarning):
    """A MuJoCo option of the loaded model is not honoured as MuJoCo C does; the message names it."""


# Reasons shared by several entries.
_OVERRIDE: Final = "read only with flag override, which is refused"
_SDF: Final = "read only by SDF colliders, whose pairs are refused"

OPTIONS: Final[dict[str, tuple[Status, str]]] = {
    "timestep": ("honoured", "pipeline.step"),
    "impratio": ("honoured", "constraint: friction regularizer of both cones"),
    "tolerance": ("honoured", "solver.Config.tolerance (with float32 roundoff floors)"),
    "ls_tolerance": ("honoured", "solver._line_search (MuJoCo's PrimalSearch)"),
    "noslip_tolerance": ("honoured", "noslip (System.opt.noslip_tolerance)"),
    "ccd_tolerance": ("honoured", "collision.convex (GJK and EPA tolerance)"),
    "sleep_tolerance": ("irrelevant", "read only when sleeping, and the sleep flag is refused"),
    "gravity": ("honoured", "dynamics.rne"),
    "wind": ("honoured", "fluid.fluid"),
    "magnetic": ("irrelevant", "read only by magnetometer sensors, which never act on the dynamics"),
    "density": ("honoured", "fluid.fluid (inertia-box model; the ellipsoid model is refused)"),
    "viscosity": ("honoured", "fluid.fluid"),
    "o_margin": ("irrelevant", _OVERRIDE),
    "o_solref": ("irrelevant", _OVERRIDE),
    "o_solimp": ("irrelevant", _OVERRIDE),
    "o_friction": ("irrelevant", _OVERRIDE),
    "integrator": ("honoured", "pipeline.step: Euler, RK4, implicitfast; the others are refused"),
    "cone": ("honoured", "constraint.layout (rows) and solver (elliptic cones: solver._with_cones)"),
    "jacobian": ("irrelevant", "dense or sparse storage of the same matrices (MuJoCo agrees to roundoff)"),
    "solver": ("warned", "Newton and CG honoured (solver.Config.newton); PGS runs as Newton, see "
               "option_warnings"),
    "iterations": ("honoured", "solver.Config.iterations"),
    "ls_iterations": ("honoured", "solver._line_search (MuJoCo's PrimalSearch)"),
    "noslip_iterations": ("honoured", "noslip.Config.iterations"),
    "ccd_iterations": ("honoured", "collision.convex (GJK and EPA iteration cap)"),
    "disableflags": ("honoured", "bit by bit, see DISABLE_FLAGS"),
    "enableflags": ("honoured", "bit by bit, see ENABLE_FLAGS"),
    "disableactuator": ("refused", "loader.unsupported when nonzero"),
    "sdf_initpoints": ("irrelevant", _SDF),
    "sdf_iterations": ("irrelevant", _SDF),
}
"""Every `mjOption` field: its class and where it is honoured, or why it is irrelevant."""

# Keyed by the MJCF <flag> attribute (mjDSBL_<NAME> lower-cased).
DISABLE_FLAGS: Final[dict[str, tuple[Status, str]]] = {
    "constraint": ("honoured", "constraint.layout: no rows"),
    "equality": ("irrelevant", "equality constraints are refused"),
    "frictionloss": ("honoured", "constraint.layout"),
    "limit": ("honoured", "constraint.layout"),
    "contact": ("honoured", "collision.pairs and constraint.layout"),
    "spring": ("honoured", "dynamics.passive; with damper disabled too, no fluid forces (pipeline)"),
    "damper": ("honoured", "dynamics.passive and the implicit damping in pipeline.step"),
    "gravity": ("honoured", "dynamics.rne"),
    "clampctrl": ("honoured", "dynamics.actuation"),
    "warmstart": ("honoured", "solver.Config.warmstart"),
    "filterparent": ("honoured", "collision.pairs.dynamic_pairs"),
    "actuation": ("honoured", "dynamics.actuation and pipeline.step"),
    "refsafe": ("honoured", "constraint: solref time constant"),
    "sensor": ("irrelevant", "sensors never act on the dynamics"),
    "midphase": ("irrelevant", "MuJoCo's bounding-volume tree only skips pairs that cannot touch"),
    "eulerdamp": ("honoured", "pipeline.step"),
    # MuJoCo resets a diverged state (NaN or |value| > 1e10) to qpos0; we never do (physics keeps the
    # NaN, envs mark it done), so only runs that already diverged differ, whatever the flag says.
    "autoreset": ("irrelevant", "acts only on a diverged state"),
    "nativeccd": ("refused", "collision.pairs.collision_pairs, for models with general convex pairs"),
    # Each island is solved as its own problem (line search, stopping tests, iteration count), which
    # decides the result whenever the solver stops before converging.
    "island": ("honoured", "island.islands and solver (one problem per island)"),
    # Disabled, every general convex pair gives its one GJK/EPA contact; enabled (MuJoCo's default),
    # touching faces and edges of capsule/cylinder/box/mesh pairs give several (collision.multicontact).
    "multiccd": ("honoured", "collision.pairs (slots) and collision.multicontact"),
}
"""Every `mjtDisableBit`: its class and where it is honoured, or why it is irrelevant."""

ENABLE_FLAGS: Final[dict[str, tuple[Status, str]]] = {
    "override": ("refused", "collision.pairs.collision_pairs"),
    "energy": ("irrelevant", "fills mjData.energy only"),
    "fwdinv": ("irrelevant", "fills mjData.solver_fwdinv only"),
    "invdiscrete": ("irrelevant", "read only by mj_inverse"),
    "sleep": ("refused", "loader.unsupported"),
    "diagexact": ("refused", "loader.unsupported: constraint impedances use the invweight0 approximation"),
    "ipc": ("refused", "loader.unsupported: MuJoCo steps it only with integrator discrete, also refused"),
    "speculative": ("refused", "loader.unsupported: no speculative contacts"),
}
"""Every `mjtEnableBit`: its class and where it is honoured, or why it is irrelevant."""



def _bit(prefix: str, name: str) -> int:
    enum = mujoco.mjtDisableBit if prefix == "mjDSBL_" else mujoco.mjtEnableBit
    return int(enum.__members__[prefix + name.upper()])


def option_warnings(m: mujoco.MjModel) -> list[str]:
    """Messages naming each option of `m` that brax-physics does not honour (empty for the defaults)."""
    o = m.opt
    out: list[str] = []
    if o.solver == mujoco.mjtSolver.mjSOL_PGS:
        # MuJoCo's computation chapter: the constraint forces are the unique optimum of a convex
        # problem; Newton minimizes its reduced primal form, PGS its dual. PGS is not ported: its
        # Gauss-Seidel sweep is sequential over constraint rows (nefc dependent steps per sweep),
        # which neither vmap nor an accelerator runs well, and MJX does not offer it either.
        out.append(
            'option solver="PGS": not implemented, the Newton solver runs instead (use solver="Newton" '
            'or "CG" to silence this). Results still match MuJoCo\'s: PGS solves the dual of the same '
            "convex problem, so both reach its unique optimum up to the solver tolerance, as long as "
            f'iterations="{o.iterations}" lets MuJoCo\'s PGS converge'
        )
    return out


def unknown_flags(m: mujoco.MjModel) -> list[str]:
    """Load errors naming each flag bit of `m` this survey has not classified (a newer MuJoCo's)."""
    out: list[str] = []
    for flags, prefix, table, field in ((int(m.opt.disableflags), "mjDSBL_", DISABLE_FLAGS, "disableflags"),
                                        (int(m.opt.enableflags), "mjENBL_", ENABLE_FLAGS, "enableflags")):
        unknown = flags & ~sum(_bit(prefix, name) for name in table)
        out += [f"option: {field} bit 1<<{i} is unknown to brax-physics and not supported (clear it)"
                for i in range(unknown.bit_length()) if unknown >> i & 1]
    return out


# Frames of the loading machinery; the warning points at the first frame outside them.
_INTERNAL_MODULES: Final = frozenset({__name__, "brax_physics._src.loader"})


def _caller_stacklevel() -> int:
    level = 1
    caller: types.FrameType | None = sys._getframe(1)
    while caller is not None and caller.f_globals.get("__name__") in _INTERNAL_MODULES:
        level += 1
        caller = caller.f_back
    return level


def emit_option_warnings(m: mujoco.MjModel) -> None:
    """Issue an `OptionWarning` per message of `option_warnings(m)`, attributed to the loader's caller."""
    msgs = option_warnings(m)
    if msgs:
        level = _caller_stacklevel()
        for msg in msgs:
            warnings.warn(msg, OptionWarning, stacklevel=level)
