"""`platforms.choose`: one platform's form per lowering, traced only when that platform is lowered."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from brax_physics._src import platforms


def _forms(traced: list[str]) -> tuple[platforms.Form, dict[str, platforms.Form]]:
    """A default and a CUDA form with distinguishable values and lowerings; each logs its traces."""

    def default(x: jax.Array) -> jax.Array:
        traced.append("default")
        return 2.0 * x

    def cuda(x: jax.Array) -> jax.Array:
        traced.append("cuda")
        return jnp.cos(x)  # the only cosine in either program

    return default, {"cuda": cuda}


def _choice(traced: list[str]) -> jax.stages.Traced:
    default, forms = _forms(traced)
    x = jnp.arange(6.0).reshape(3, 2)
    return jax.jit(lambda y: platforms.choose(default, forms, y)).trace(x)


def test_only_the_lowering_platforms_form_is_traced() -> None:
    traced: list[str] = []
    tr = _choice(traced)
    assert traced == []  # the jaxpr holds one equation, no form's trace
    cpu = tr.lower(lowering_platforms=("cpu",)).as_text()
    assert traced == ["default"] and "cosine" not in cpu
    cuda = tr.lower(lowering_platforms=("cuda",)).as_text()
    assert traced == ["default", "cuda"] and "cosine" in cuda


def test_values_on_this_machine_jitted_and_eager() -> None:
    traced: list[str] = []
    default, forms = _forms(traced)
    x = jnp.arange(6.0).reshape(3, 2)
    want = np.cos(np.asarray(x)) if jax.default_backend() == "gpu" else 2.0 * np.asarray(x)
    np.testing.assert_allclose(jax.jit(lambda y: platforms.choose(default, forms, y))(x), want)
    np.testing.assert_allclose(platforms.choose(default, forms, x), want)


def test_multi_platform_export_holds_both_forms_and_runs() -> None:
    traced: list[str] = []
    default, forms = _forms(traced)
    x = jnp.arange(6.0).reshape(3, 2)
    f = jax.jit(lambda y: platforms.choose(default, forms, y))
    exported = jax.export.export(f, platforms=["cpu", "cuda"])(x)
    assert sorted(traced) == ["cuda", "default"]
    assert "cosine" in exported.mlir_module()
    if jax.default_backend() == "cpu":
        got = np.asarray(exported.call(x))  # type: ignore[no-untyped-call]  # untyped in jax
        np.testing.assert_allclose(got, 2 * np.arange(6.0).reshape(3, 2))


def test_vmap_merges_its_axis_into_the_forms_batch() -> None:
    """A vmap over `choose` gives each slice the answer of `choose` on that slice alone, with the
    forms seeing one batch of all the problems."""
    seen: list[tuple[int, ...]] = []

    def rowsum(x: jax.Array) -> jax.Array:  # per problem (leading axis): a cumulative sum
        seen.append(x.shape)
        return jnp.cumsum(x, axis=1)

    x = jnp.arange(24.0).reshape(4, 3, 2)  # 4 slices of 3 problems
    got = jax.jit(jax.vmap(lambda y: platforms.choose(rowsum, {"cuda": rowsum}, y)))(x)
    np.testing.assert_allclose(got, np.cumsum(np.asarray(x), axis=2))
    assert (12, 2) in seen
    # an unbatched operand is broadcast to the vmapped axis first
    def add(a: jax.Array, b: jax.Array) -> jax.Array:
        return a + b

    got2 = jax.jit(jax.vmap(lambda y, z: platforms.choose(add, {"cuda": add}, y, z),
                            in_axes=(0, None)))(x, x[0])
    np.testing.assert_allclose(got2, np.asarray(x) + np.asarray(x[0]))


def test_derivative_is_the_default_forms() -> None:
    def default(x: jax.Array) -> jax.Array:
        return x * x

    def f(x: jax.Array) -> jax.Array:
        return jnp.sum(platforms.choose(default, {"cuda": default}, x))

    x = jnp.arange(1.0, 5.0)
    np.testing.assert_allclose(jax.grad(f)(x), 2.0 * np.asarray(x))
    np.testing.assert_allclose(jax.jit(jax.grad(f))(x), 2.0 * np.asarray(x))


def test_unknown_platform_is_named() -> None:
    x = jnp.ones(3)
    with pytest.raises(ValueError, match="'gpu'"):
        platforms.choose(lambda y: y, {"gpu": lambda y: y}, x)


def test_pytree_operands() -> None:
    """Operands may be pytrees (the Newton solve's `Problem`); the output is like the `like`-th."""

    def total(d: dict[str, jax.Array], y: jax.Array) -> jax.Array:
        return d["a"] + d["b"] * y

    d = {"a": jnp.ones((3, 2)), "b": jnp.full((3, 2), 2.0)}
    y = jnp.arange(6.0).reshape(3, 2)
    got = jax.jit(lambda d, y: platforms.choose(total, {"cuda": total}, d, y))(d, y)
    np.testing.assert_allclose(got, 1.0 + 2.0 * np.arange(6.0).reshape(3, 2))
    got = jax.jit(jax.vmap(lambda d, y: platforms.choose(total, {"cuda": total}, d, y)))(
        jax.tree.map(lambda a: a[None].repeat(4, 0), d), y[None].repeat(4, 0))
    np.testing.assert_allclose(got, np.broadcast_to(1.0 + 2.0 * np.arange(6.0).reshape(3, 2), (4, 3, 2)))
