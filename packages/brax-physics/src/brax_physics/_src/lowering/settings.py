"""`Lowering`: how the physics is lowered for each platform, as one frozen, typed value.

Every field picks a form of the same computation (a factor written out or a library call, a work
queue or a plain vmapped loop, a dot or a fused product); the results agree to float32 roundoff
whatever the fields say. A `System` holds one as static data (`sys.replace(lowering=...)`), so a
changed field is a different treedef and jit traces and compiles again, with no cache to clear.

The pipeline's entry points (`step`, `init`, ...) make their system's settings the ones in effect
while they trace (`use`); the lowering code reads them there (`current`) and binds them into its
`custom_vmap` rules and platform forms, which may run later (a vmap of a traced jaxpr, lowering).

Platform-dependent choices are fields naming the platforms that take a form (`loop_platforms`,
...): one value holds every platform's choice, so a program lowered for several platforms at
once (`jax.export`) gets each platform's form, as `platforms.choose` lowers them.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
from collections.abc import Callable, Iterator
from typing import Any, Final, ParamSpec, TypeVar

_P = ParamSpec("_P")
_R = TypeVar("_R")


@dataclasses.dataclass(frozen=True)
class Lowering:
    """How brax-physics lowers its factors, solves, solver loop and products (hashable, static)."""

    # ---- linear algebra (`lowering.linalg`) ----
    small_n: int = 4
    """Systems up to this size factor and solve by a few plain array ops, not a library call."""
    unroll_max_n: int = 16
    """Largest n whose vmapped `spd_solve` runs as column operations (batch last): more copies per n."""
    unroll_min_batch: int = 128
    """Smallest batch for the column forms: below it the library's per-matrix calls are as fast."""
    substitute_min_batch: int = 64
    """Above `unroll_max_n`, smallest batch for the batch-last substitution on the library's factor."""
    factor_unroll_max_n: int = 32
    """Largest n whose vmapped `cholesky` takes the left-looking unrolled factor (0: never): compile ~n²."""
    factor_unroll_min_batch: int = 512
    """Above `unroll_max_n`, smallest batch for that unrolled factor."""
    loop_platforms: tuple[str, ...] = ("cpu",)
    """Platforms running the column and substitution loops (SIMD lanes); others call the library."""
    graph_platforms: tuple[str, ...] = ("cuda",)
    """Platforms writing out vmapped factors and solves of n <= `graph_max_n`: no loop, no library call."""
    graph_max_n: int = 16
    """Largest n written out on `graph_platforms` (~n² kernels, compile time)."""
    augment: bool = True
    """`spd_solve`'s library factor takes the right side as an extra row: one triangular solve, not two."""

    # ---- constraint solver (`lowering.newton`) ----
    hessian_elementwise_max: int = 1 << 16
    """Up to this many multiply-adds (nefc·nv²) the Newton Hessian is summed elementwise, above it a dot."""
    hessian_unroll_max_rows: int = 32
    """Up to this many rows per sum the Hessian's terms are added as a tree of additions, not reduced."""
    variadic_sum_min_rows: int = 64
    """From this many row-island entries on, the line search sums its terms in one variadic reduction."""
    queue_min_batch: int = 64
    """Under vmap, smallest batch whose Newton loop runs on a work queue of unconverged problems."""
    queue_small_fraction: int = 4
    """A small batch's queue has batch / this many slots, up to `queue_min_slots`."""
    queue_min_slots: int = 16
    """Slots below which a queue takes the small batch's fraction."""
    queue_slot_fraction: int = 16
    """A large batch's queue has batch / this many slots: more slots, fewer trips, more idle work."""
    queue_platforms: tuple[str, ...] = ("cpu",)
    """Platforms using the queue: its extra trips cost kernel launches on a GPU, work on a CPU."""
    compact_fraction: int = 8
    """A group of contact or limit units is solved compacted to 1/this of its units when they fit."""
    compact_min_units: int = 32
    """Smallest compacted budget (only where it is at most half the group)."""
    compact_base: int = 256
    """A huge group's budget is this plus 1/`compact_large_fraction` of its units, where smaller."""
    compact_large_fraction: int = 64
    """See `compact_base`."""
    compact_wide_fraction: int = 3
    """Batches of `compact_wide_min_batch` or more add a tier of 1/this of a group's units (0: never)."""
    compact_wide_min_batch: int = 128
    """Smallest batch with the wide tier: a batch takes the tier that holds its fullest problem."""

    # ---- products (`lowering.products`) ----
    dot_min_work: int = 4096
    """Multiply-adds (batch times n·k·m) from which `com.mm` is one dot; below, a fused multiply-and-sum."""
    fused_platforms: tuple[str, ...] = ("cuda",)
    """Platforms writing out products batched on both operands, not a batched dot (a library call)."""
    fused_max_k: int = 8
    """Longest sum written out on `fused_platforms`."""

    # ---- masked searches (collision) ----
    search_chunk: int = 8
    """Convex pairs searched side by side per round of a masked search (only the touching ones run)."""
    clip_chunk: int = 4
    """Touching pairs clipped side by side per round for multi-contact."""

    def replace(self, **changes: Any) -> Lowering:
        """A copy with the given fields changed, e.g. `lowering.replace(queue_platforms=())`."""
        return dataclasses.replace(self, **changes)


DEFAULT: Final = Lowering()
"""The settings a `System` starts with: today's choices for every platform."""

_current: Final = contextvars.ContextVar[Lowering]("brax_physics_lowering", default=DEFAULT)


def current() -> Lowering:
    """The settings in effect while tracing (those of the system an entry point traces, else `DEFAULT`)."""
    return _current.get()


@contextlib.contextmanager
def use(lowering: Lowering) -> Iterator[None]:
    """Make `lowering` the settings in effect for what is traced inside the block."""
    token = _current.set(lowering)
    try:
        yield
    finally:
        _current.reset(token)


def lowered(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """An entry point whose first argument is a `System`: it traces under that system's settings."""

    @functools.wraps(fn)
    def wrapped(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        sys = args[0] if args else kwargs["sys"]
        with use(getattr(sys, "lowering", DEFAULT)):
            return fn(*args, **kwargs)

    return wrapped
