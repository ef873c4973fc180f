"""A computation whose form depends on the platform a program is lowered for, traced only for it.

`lax.platform_dependent` traces every platform's branch into the jaxpr, whichever platform the
program is then lowered for: a CPU program paid for tracing the forms written for CUDA (the
Newton solve's written-out factor and substitutions, a fifth of the ant's step trace). `choose`
binds one equation instead, and its lowering rule traces the form of the platform being lowered
(`mlir.lower_fun`); a program lowered for several platforms at once (`jax.export`) gets each
platform's form and the switch between them that JAX emits for platform-specific lowerings.

The forms take arrays whose leading axis is a batch of independent problems (the solves and
factors of `linalg` under `vmap`): a further `vmap` merges its axis into that one. Their output
has the shape of one operand; `com.mm`'s CUDA form, whose output has no operand's shape and which
is a few operations to trace, keeps `lax.platform_dependent`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

import jax
import jax.numpy as jnp
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

Form = Callable[..., jax.Array]
Forms = tuple[tuple[str, Form], ...]

# The platforms JAX lowers for; any other gets the default form.
_PLATFORMS: Final = ("cpu", "cuda", "rocm", "tpu")

_choose_p = Primitive("brax_platform_choice")


def choose(default: Form, forms: dict[str, Form], *xs: Any, like: int = -1) -> jax.Array:
    """`forms[p](*xs)` in a program lowered for platform p, `default(*xs)` for every other; every
    form returns an array of the shape and dtype of the array `xs[like]`. `xs` may be pytrees of
    arrays. Without `forms`, `default(*xs)`."""
    if not forms:
        return default(*xs)
    unknown = set(forms) - set(_PLATFORMS)
    if unknown:
        raise ValueError(f"platforms.choose: unknown platform(s) {sorted(unknown)}; known: {_PLATFORMS}")
    leaves, tree = jax.tree.flatten(xs)
    if not all(isinstance(x, jax.Array) for x in xs):  # pytrees: the forms see them unflattened
        def unflattened(f: Form) -> Form:
            return lambda *ls: f(*jax.tree.unflatten(tree, ls))

        default, forms = unflattened(default), {k: unflattened(f) for k, f in forms.items()}
        like = len(jax.tree.leaves(xs[:like % len(xs)]))
    out: jax.Array = _choose_p.bind(  # type: ignore[no-untyped-call]  # untyped in jax
        *leaves, default=default, forms=tuple(sorted(forms.items())), like=like % len(leaves))
    return out


def defer(fn: Form, *xs: Any, like: int = -1) -> jax.Array:
    """`fn(*xs)`, traced only when a program holding it is lowered: the primal of a `custom_vmap`,
    which a vmap replaces by its rule, is then never traced (`choose` with one form for all)."""
    return choose(fn, dict.fromkeys(_PLATFORMS, fn), *xs, like=like)


def _form(platform: str | None, default: Form, forms: Forms) -> Form:
    return dict(forms).get(platform, default) if platform else default


def _abstract_eval(*avals: Any, default: Form, forms: Forms, like: int) -> Any:
    del default, forms
    return avals[like]


def _impl(*xs: jax.Array, default: Form, forms: Forms, like: int) -> jax.Array:
    """Outside jit: the form of the first operand's platform, op by op (as `lax.platform_dependent`
    runs its branch when nothing is traced)."""
    del like
    device = next(iter(xs[0].devices()))
    platform = device.platform
    if platform == "gpu":  # lowering names the GPU platforms apart
        platform = "rocm" if "rocm" in str(device.client.platform_version).lower() else "cuda"
    return _form(platform, default, forms)(*xs)


def _lowering(platform: str | None) -> Callable[..., Sequence[Any]]:
    def rule(ctx: mlir.LoweringRuleContext, *args: Any, default: Form, forms: Forms,
             like: int) -> Sequence[Any]:
        del like
        lower = mlir.lower_fun(_form(platform, default, forms), multiple_results=False)
        out: Sequence[Any] = lower(ctx, *args)
        return out
    return rule


def _batch(args: list[jax.Array], dims: list[int | None], *, default: Form, forms: Forms,
           like: int) -> tuple[jax.Array, int]:
    """A vmap around the forms' own batch axis: the two axes merged into one, then split again."""
    size = next(a.shape[d] for a, d in zip(args, dims, strict=True) if d is not None)  # None: unmapped
    merged = []
    for a, d in zip(args, dims, strict=True):
        a = jnp.broadcast_to(a, (size, *a.shape)) if d is None else jnp.moveaxis(a, d, 0)
        merged.append(a.reshape(size * a.shape[1], *a.shape[2:]))
    out = choose(default, dict(forms), *merged, like=like)
    return out.reshape(size, -1, *out.shape[1:]), 0


def _jvp(primals: tuple[jax.Array, ...], tangents: tuple[Any, ...], *, default: Form, forms: Forms,
         like: int) -> tuple[jax.Array, jax.Array]:
    """Every form computes the same function: the default form's derivative."""
    zeros = tuple(ad.instantiate_zeros(t) for t in tangents)  # type: ignore[no-untyped-call]  # untyped in jax
    tangent: jax.Array = jax.jvp(default, primals, zeros)[1]
    return choose(default, dict(forms), *primals, like=like), tangent


_choose_p.def_abstract_eval(_abstract_eval)  # type: ignore[no-untyped-call]  # untyped in jax
_choose_p.def_impl(_impl)  # type: ignore[no-untyped-call]  # untyped in jax
batching.primitive_batchers[_choose_p] = _batch
ad.primitive_jvps[_choose_p] = _jvp
mlir.register_lowering(_choose_p, _lowering(None))
for _platform in _PLATFORMS:
    mlir.register_lowering(_choose_p, _lowering(_platform), platform=_platform)
