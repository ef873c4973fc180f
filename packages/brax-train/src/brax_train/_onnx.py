"""Translation of a policy's jaxpr into ONNX nodes (onnx.helper), one JAX primitive at a time.

Policies are MLPs, so the translation covers what they trace to: elementwise math, matmuls (any
`dot_general` as Einsum), reshapes and broadcasts, splits, slices and constant-index gathers,
reductions, with constant subgraphs folded; anything else raises `TranslationError` naming it.
`brax_train.export` builds the model and its contract around it.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np
from jax.extend import core as jcore


class TranslationError(ValueError):
    """A jaxpr that ONNX export cannot express; the message names the primitive or shape at fault."""


_CALLS = ("jit", "pjit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call", "checkpoint")
# fmt: off
_UNARY = {
    "neg": "Neg", "abs": "Abs", "exp": "Exp", "log": "Log", "tanh": "Tanh", "logistic": "Sigmoid",
    "sqrt": "Sqrt", "sign": "Sign", "floor": "Floor", "ceil": "Ceil", "sin": "Sin", "cos": "Cos",
    "erf": "Erf", "not": "Not", "copy": "Identity", "copy_p": "Identity",
}
_BINARY = {
    "add": "Add", "add_any": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "max": "Max", "min": "Min",
    "pow": "Pow", "and": "And", "or": "Or", "xor": "Xor", "eq": "Equal", "gt": "Greater",
    "ge": "GreaterOrEqual", "lt": "Less", "le": "LessOrEqual",
}
# fmt: on
_REDUCE = {"reduce_sum": "ReduceSum", "reduce_max": "ReduceMax", "reduce_min": "ReduceMin"}
_BIG = np.iinfo(np.int64).max  # an ONNX Slice end past any dimension


def _is_int(d: Any) -> bool:
    return isinstance(d, int | np.integer)


def _aval(v: Any) -> tuple[tuple[Any, ...], np.dtype[Any]]:
    """Shape and dtype of a jaxpr variable or literal."""
    aval: Any = v.aval
    return tuple(aval.shape), np.dtype(aval.dtype)


class OnnxGraph:
    """ONNX nodes and initializers (onnx.helper) for a jaxpr, one JAX primitive at a time."""

    def __init__(self, onnx: Any, batch: Any, input_name: str) -> None:
        """An empty graph over the input `input_name`, whose first dimension is the symbol `batch`."""
        self.onnx = onnx
        self.batch = batch  # the symbolic batch dimension of the traced input
        self.input_name = input_name
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self.values: dict[str, np.ndarray] = {}  # initializers by name, for folding constants
        self._count = 0
        self._batch_size: str | None = None

    def _name(self) -> str:
        self._count += 1
        return f"t{self._count}"

    def const(self, value: Any, dtype: Any = None) -> str:
        """An initializer holding `value`."""
        name = self._name()
        self.values[name] = np.asarray(value, dtype)
        self.initializers.append(self.onnx.numpy_helper.from_array(self.values[name], name))
        return name

    def op(self, op: str, inputs: Sequence[str], outputs: int = 1, **attrs: Any) -> list[str]:
        """Append node `op` and return its output names."""
        names = [self._name() for _ in range(outputs)]
        self.nodes.append(self.onnx.helper.make_node(op, list(inputs), names, **attrs))
        return names

    def op1(self, op: str, inputs: Sequence[str], **attrs: Any) -> str:
        """Append single-output node `op` and return its output name."""
        return self.op(op, inputs, **attrs)[0]

    def shape(self, dims: Sequence[Any]) -> str:
        """A 1-D int64 tensor of `dims`, the symbolic batch size read from the input."""
        if all(_is_int(d) for d in dims):
            return self.const(np.asarray(dims, np.int64))
        if self._batch_size is None:
            self._batch_size = self.op1("Shape", [self.input_name], start=0, end=1)
        parts = []
        for d in dims:
            if _is_int(d):
                parts.append(self.const(np.asarray([d], np.int64)))
            elif d == self.batch:
                parts.append(self._batch_size)
            else:
                raise TranslationError(f"onnx export: dimension {d} is neither a constant nor the batch size")
        return self.op1("Concat", parts, axis=0)

    def emit(
        self, jaxpr: jcore.Jaxpr, consts: Sequence[str], args: Sequence[str], live: Sequence[bool]
    ) -> list[str | None]:
        """Nodes computing the `live` outputs of `jaxpr` from named constants and arguments."""
        env: dict[jcore.Var, str] = {
            **dict(zip(jaxpr.constvars, consts, strict=True)),
            **dict(zip(jaxpr.invars, args, strict=True)),
        }

        def read(v: Any) -> str:
            return self.const(v.val, _aval(v)[1]) if isinstance(v, jcore.Literal) else env[v]

        needed = {v for v, keep in zip(jaxpr.outvars, live, strict=True) if keep and isinstance(v, jcore.Var)}
        eqns = []
        for eqn in reversed(jaxpr.eqns):  # dead code (e.g. the unused scale of a tanh-normal) is skipped
            if any(v in needed for v in eqn.outvars if not isinstance(v, jcore.DropVar)):
                eqns.append(eqn)
                needed |= {v for v in eqn.invars if isinstance(v, jcore.Var)}
        for eqn in reversed(eqns):
            outs = self.equation(eqn, [read(v) for v in eqn.invars], needed)
            for v, name in zip(eqn.outvars, outs, strict=True):
                if name is not None and not isinstance(v, jcore.DropVar):
                    env[v] = name
        return [read(v) if keep else None for v, keep in zip(jaxpr.outvars, live, strict=True)]

    def equation(self, eqn: jcore.JaxprEqn, ins: list[str], needed: set[jcore.Var]) -> list[str | None]:
        """Nodes of one equation; `TranslationError` for a primitive ONNX export cannot express."""
        p = eqn.primitive.name
        if p in _CALLS:
            called = self._call(eqn, ins, needed)
            if called is not None:
                return called
        folded = self._fold(eqn, ins)
        if folded is not None:
            return list(folded)
        if p in _UNARY:
            return [self.op1(_UNARY[p], ins)]
        if p in _BINARY:
            return [self.op1(_BINARY[p], ins)]
        outs = self._elementwise(eqn, ins)
        if outs is None:
            outs = self._structural(eqn, ins)
        if outs is None:
            raise TranslationError(
                f"the policy uses JAX primitive {p!r}, which the onnx export cannot express"
            )
        return list(outs)

    def _call(self, eqn: jcore.JaxprEqn, ins: list[str], needed: set[jcore.Var]) -> list[str | None] | None:
        """The nodes of a call primitive's body (pjit, custom derivatives), inlined; None if it has none."""
        sub = eqn.params.get("jaxpr", eqn.params.get("call_jaxpr"))
        consts: list[str] = []
        if isinstance(sub, jcore.ClosedJaxpr):
            consts, sub = [self.const(c) for c in sub.consts], sub.jaxpr
        if isinstance(sub, jcore.Jaxpr):
            return self.emit(sub, consts, ins, [v in needed for v in eqn.outvars])
        return None

    def _elementwise(self, eqn: jcore.JaxprEqn, ins: list[str]) -> list[str] | None:
        """Elementwise primitives that take a few ONNX nodes; None for any other primitive."""
        p, params = eqn.primitive.name, eqn.params
        dtype = _aval(eqn.invars[0] if eqn.invars else eqn.outvars[0])[1]
        if p == "ne":
            return [self.op1("Not", [self.op1("Equal", ins)])]
        if p == "is_finite":
            return [self.op1("Not", [self.op1("Or", [self.op1("IsNaN", ins), self.op1("IsInf", ins)])])]
        if p == "square":
            return [self.op1("Mul", [ins[0], ins[0]])]
        if p == "rsqrt":
            return [self.op1("Reciprocal", [self.op1("Sqrt", ins)])]
        if p == "expm1":
            return [self.op1("Sub", [self.op1("Exp", ins), self.const(1, dtype)])]
        if p == "erfc":
            return [self.op1("Sub", [self.const(1, dtype), self.op1("Erf", ins)])]
        if p == "log1p":
            return [self.op1("Log", [self.op1("Add", [ins[0], self.const(1, dtype)])])]
        if p == "integer_pow":
            return [self.op1("Pow", [ins[0], self.const(params["y"], dtype)])]
        if p == "rem" and jnp.issubdtype(dtype, jnp.floating):
            return [self.op1("Mod", ins, fmod=1)]
        if p == "clamp":  # clamp(lo, x, hi)
            return [self.op1("Min", [self.op1("Max", [ins[1], ins[0]]), ins[2]])]
        if p == "select_n" and len(ins) == 3:  # select_n(pred, on_false, on_true)
            pred = ins[0] if dtype == np.bool_ else self.op1("Cast", [ins[0]], to=self.onnx.TensorProto.BOOL)
            return [self.op1("Where", [pred, ins[2], ins[1]])]
        if p == "convert_element_type":
            to = self.onnx.helper.np_dtype_to_tensor_dtype(np.dtype(params["new_dtype"]))
            return [self.op1("Cast", ins, to=to)]
        return None

    def _structural(self, eqn: jcore.JaxprEqn, ins: list[str]) -> list[str] | None:
        """Shape, indexing, reduction and contraction primitives; None for any other primitive."""
        p, params = eqn.primitive.name, eqn.params
        shape_in = _aval(eqn.invars[0] if eqn.invars else eqn.outvars[0])[0]
        shape_out = _aval(eqn.outvars[0])[0]
        if p == "reshape" and params.get("dimensions") is None:
            return [self.op1("Reshape", [ins[0], self.shape(shape_out)], allowzero=1)]
        if p == "squeeze":
            return [self.op1("Reshape", [ins[0], self.shape(shape_out)], allowzero=1)]
        if p == "broadcast_in_dim":
            dims = [1] * len(shape_out)
            for i, d in enumerate(params["broadcast_dimensions"]):
                dims[d] = shape_in[i]
            x = ins[0]
            if tuple(dims) != shape_in:
                x = self.op1("Reshape", [x, self.shape(dims)], allowzero=1)
            return [x if tuple(dims) == shape_out else self.op1("Expand", [x, self.shape(shape_out)])]
        if p == "transpose":
            return [self.op1("Transpose", ins, perm=list(params["permutation"]))]
        if p == "stack":
            axis = self.const(np.asarray([params["axis"]], np.int64))
            return [self.op1("Concat", [self.op1("Unsqueeze", [x, axis]) for x in ins], axis=params["axis"])]
        if p == "gather" and ins[1] in self.values:
            return [self._gather(eqn, ins[0], self.values[ins[1]])]
        if p == "concatenate":
            return [self.op1("Concat", ins, axis=int(params["dimension"]))]
        if p == "split":
            sizes = self.const(np.asarray(params["sizes"], np.int64))
            return list(self.op("Split", [ins[0], sizes], outputs=len(params["sizes"]), axis=params["axis"]))
        if p == "slice":
            return [self._slice(ins[0], shape_in, params)]
        if p in _REDUCE:
            axes = self.const(np.asarray(params["axes"], np.int64))
            return [self.op1(_REDUCE[p], [ins[0], axes], keepdims=0)]
        if p == "dot_general":
            return [self._dot(eqn, ins)]
        return None

    def _fold(self, eqn: jcore.JaxprEqn, ins: list[str]) -> list[str] | None:
        """The outputs of an equation on constants only (e.g. indices built with iota), computed now."""
        avals = [_aval(v) for v in eqn.outvars]
        if (
            eqn.effects
            or not all(i in self.values for i in ins)
            or not all(map(_is_int, sum((a[0] for a in avals), ())))
        ):
            return None
        try:
            out = eqn.primitive.bind(*(self.values[i] for i in ins), **eqn.params)  # type: ignore[no-untyped-call]
            outs = [np.asarray(o) for o in (out if eqn.primitive.multiple_results else [out])]
        except Exception:  # e.g. a PRNG key that is no array: leave the equation to the translation
            return None
        return [self.const(o, dtype) for o, (_, dtype) in zip(outs, avals, strict=True)]

    def _gather(self, eqn: jcore.JaxprEqn, x: str, indices: np.ndarray) -> str:
        """`gather` with constant indices along one axis (what `obs[:, :2]`, `obs[:, [0, 3]]` trace to)."""
        dn, sizes = eqn.params["dimension_numbers"], eqn.params["slice_sizes"]
        shape = _aval(eqn.invars[0])[0]
        k = dn.start_index_map[0] if len(dn.start_index_map) == 1 else None
        full = k is not None and all(
            s == d for j, (s, d) in enumerate(zip(sizes, shape, strict=True)) if j != k
        )
        if k is None or dn.operand_batching_dims or not full or not _is_int(shape[k]):
            raise TranslationError(f"onnx export: gather {dn} is more than indexing one axis with constants")
        idx = np.clip(indices[..., 0].astype(np.int64), 0, shape[k] - sizes[k])  # as XLA clamps starts
        if tuple(dn.collapsed_slice_dims) == () and idx.ndim == 0:  # a slice [i, i + size)
            args = [np.asarray([a], np.int64) for a in (idx, idx + sizes[k], k)]
            return self.op1("Slice", [x, *(self.const(a) for a in args)])
        if tuple(dn.collapsed_slice_dims) != (k,) or sizes[k] != 1:
            raise TranslationError(f"onnx export: gather {dn} is more than indexing one axis with constants")
        y = self.op1("Gather", [x, self.const(idx)], axis=k)
        # ONNX puts the index dimensions at axis k; jax puts the operand's at `offset_dims`
        rest = [j for j in range(len(shape)) if j != k]
        onnx_order = [("x", j) for j in rest if j < k] + [("i", t) for t in range(idx.ndim)]
        onnx_order += [("x", j) for j in rest if j > k]
        jax_order, operand, index = [], iter(rest), iter(range(idx.ndim))
        for pos in range(len(rest) + idx.ndim):
            jax_order.append(("x", next(operand)) if pos in dn.offset_dims else ("i", next(index)))
        perm = [onnx_order.index(label) for label in jax_order]
        return y if perm == sorted(perm) else self.op1("Transpose", [y], perm=perm)

    def _slice(self, x: str, shape: tuple[Any, ...], params: Mapping[str, Any]) -> str:
        """A static `slice`; a symbolic limit must be the whole dimension."""
        starts, limits = params["start_indices"], params["limit_indices"]
        if not all(
            _is_int(s) and (_is_int(e) or e == d) for s, e, d in zip(starts, limits, shape, strict=True)
        ):
            raise TranslationError(f"onnx export: slice {starts}:{limits} of a batch-sized dimension")
        ends = [e if _is_int(e) else _BIG for e in limits]  # a symbolic limit: to the end
        steps = params["strides"] or [1] * len(ends)
        args = [np.asarray(a, np.int64) for a in (starts, ends, range(len(ends)), steps)]
        return self.op1("Slice", [x, *(self.const(a) for a in args)])

    def _dot(self, eqn: jcore.JaxprEqn, ins: list[str]) -> str:
        """`dot_general` as MatMul (x @ W, the MLP case) or else as Einsum."""
        (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
        (lhs, lhs_dtype), (rhs, _), (_, out_dtype) = (_aval(v) for v in (*eqn.invars, *eqn.outvars))
        if len(rhs) == 2 and tuple(lc) == (len(lhs) - 1,) and tuple(rc) == (0,) and not lb and not rb:
            y = self.op1("MatMul", ins)
        else:
            letters = iter(string.ascii_lowercase)
            lsub = [next(letters) for _ in lhs]
            rsub = [next(letters) for _ in rhs]
            for i, j in (*zip(lc, rc, strict=True), *zip(lb, rb, strict=True)):
                rsub[j] = lsub[i]
            free_l = [lsub[i] for i in range(len(lhs)) if i not in (*lc, *lb)]
            free_r = [rsub[j] for j in range(len(rhs)) if j not in (*rc, *rb)]
            spec = f"{''.join(lsub)},{''.join(rsub)}->{''.join([lsub[i] for i in lb] + free_l + free_r)}"
            y = self.op1("Einsum", ins, equation=spec)
        if out_dtype != lhs_dtype:
            y = self.op1("Cast", [y], to=self.onnx.helper.np_dtype_to_tensor_dtype(np.dtype(out_dtype)))
        return y


__all__ = ["OnnxGraph", "TranslationError"]
