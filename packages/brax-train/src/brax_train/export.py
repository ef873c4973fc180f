"""Policy export: a trained policy as a StableHLO or ONNX file, with a JSON contract beside it.

The exported function is `action = policy(observation)`: float32 observations `(batch, *obs_shape)`
(`(batch, obs_size)` for our envs) to float32 actions `(batch, action_size)`. It is the agent's
deterministic policy, `make_policy(params, deterministic=True)(obs, fixed key)[0]`, so the
observation normalizer and the agent's squashing (tanh, or ARS's clip) are inside the graph, as is
the scaling onto `action_range` when that is not our envs' [-1, 1]. The batch dimension is symbolic
in both formats: one file serves batch 1 on a robot and batch 1024 in a simulator.

- StableHLO: `jax.export` (serialized `Exported`, lowered for CPU and CUDA, matmuls at "highest"
  precision); `jax.export.deserialize(data).call(obs)` runs it with jax alone, no brax-* package
  (plus flatbuffers, which jax's serializer imports without declaring it).
- ONNX (opset 18, IR 8): built with onnx's own `onnx.helper` from the policy's jaxpr, not with
  jax2onnx: jax2onnx 0.17 runs on our jax 0.10 but requires orbax-checkpoint<0.11.37 (our
  checkpoints use 0.12), the one release that installs beside 0.12 (0.13.0) fails to import its
  plugins on jax 0.10, and either drags in packages an export does not need (equinox,
  huggingface-hub, netron, dm-pix, orbax-export). Policies are MLPs, so the translation covers what
  they trace to: elementwise math, matmuls (any `dot_general` as Einsum), reshapes and broadcasts,
  splits, slices and constant-index gathers (`obs[:, :k]`), reductions, with constant subgraphs
  folded; any other primitive raises `ExportError` naming it. The file runs in onnxruntime with
  numpy only. Needs `brax-train[export]`.

Beside the file, `<file>.json` (see `contract_path`) records what a deployment must know: the
observation and action shapes and the action range, the environment, its `dt` and action repeat
(when the source is a `brax-train train` run directory or a checkpoint inside one), the agent, the
checkpoint step and path, and the package versions. Both files are written atomically (temp file in
the same directory, then rename), the model first.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import logging
import os
import pathlib
import string
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import brax_envs
import brax_io
import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core as jcore

from brax_train import _versions, checkpoint

logger = logging.getLogger("brax_train.export")

Format = Literal["stablehlo", "onnx"]
"""An export format."""
FORMATS: tuple[str, ...] = ("stablehlo", "onnx")
"""The export formats."""
CONTRACT_FORMAT = "brax_train.export/1"
"""Identifier of the JSON contract's layout (its `"contract"` entry)."""
ONNX_OPSET = 18
"""The ONNX opset of exported models (onnxruntime 1.14 and later run it)."""
ONNX_IR_VERSION = 8
"""The ONNX IR version of exported models: the one opset 18 came with, not the installed onnx's
newest, so older runtimes load the files."""
INPUT_NAME = "observation"
"""Name of the exported function's input (the ONNX graph input)."""
OUTPUT_NAME = "action"
"""Name of the exported function's output (the ONNX graph output)."""
DEFAULT_PLATFORMS: tuple[str, ...] = ("cpu", "cuda")
"""Platforms a StableHLO export is lowered for."""
_EXTRA = "pip install 'brax-train[export]'"
_CALLBACKS = ("pure_callback", "io_callback", "debug_callback")  # calls back into the Python process


class ExportError(Exception):
    """A policy that cannot be exported: dict observations, or an op the format cannot express."""


@dataclasses.dataclass(frozen=True)
class Exported:
    """The files an export wrote."""

    path: pathlib.Path
    """The StableHLO or ONNX file."""
    contract_path: pathlib.Path
    """The JSON contract beside it."""
    contract: dict[str, Any]
    """The contract's content."""


def contract_path(path: str | os.PathLike[str]) -> pathlib.Path:
    """Where the contract of an exported file lives: `<file>.json` (e.g. `policy.onnx.json`)."""
    p = pathlib.Path(path)
    return p.with_name(p.name + ".json")


@dataclasses.dataclass(frozen=True)
class _Source:
    """A policy to export and what is known about where it came from."""

    make_policy: Callable[..., Any]
    params: Any
    observation_shape: tuple[int, ...]
    info: dict[str, Any]


def export_policy(
    source: str | os.PathLike[str] | tuple[Callable[..., Any], Any],
    path: str | os.PathLike[str],
    format: Format = "stablehlo",
    *,
    observation_size: int | Sequence[int] | None = None,
    action_size: int | None = None,
    action_range: tuple[Any, Any] | None = None,
    env: str | None = None,
    dt: float | None = None,
    network_factory: Callable[..., Any] | None = None,
    platforms: Sequence[str] = DEFAULT_PLATFORMS,
) -> Exported:
    """Export a policy's deterministic `obs (batch, obs_size) -> action (batch, action_size)` to `path`.

    `source` is a `brax-train train` run directory, a checkpoint directory or step (any agent;
    `checkpoint.load`, with `network_factory` where the checkpoint says its networks need one), or
    `(make_policy, params)` with `observation_size` (and optionally `action_size`, `env`, `dt`).
    `action_range=(low, high)` (scalars or per-dimension) scales the policy's [-1, 1] actions onto
    that range inside the graph. Writes `path` and its contract (`contract_path(path)`) atomically.
    Raises `ValueError` for an unknown format, `checkpoint.CheckpointError` for a source without a
    complete checkpoint, `ExportError` for what the format cannot express, and `ImportError` naming
    the `export` extra when ONNX export lacks the onnx package.
    """
    if format not in FORMATS:
        raise ValueError(f"unknown export format {format!r}; known formats: {', '.join(FORMATS)}")
    src = _source(source, observation_size, network_factory)
    info = {**src.info, **({"env": env} if env is not None else {}), **({"dt": dt} if dt is not None else {})}
    batch = jax.export.symbolic_shape("batch")[0]
    spec = jax.ShapeDtypeStruct((batch, *src.observation_shape), jnp.float32)  # type: ignore[no-untyped-call]
    fn = _action_fn(src.make_policy(src.params, deterministic=True))
    n = _action_size(fn, spec, action_size)
    low, high = _bounds(action_range, n)
    scaled = not (np.all(low == -1.0) and np.all(high == 1.0))
    if scaled:
        fn = _scaled(fn, low, high)
    data, details = _onnx(fn, spec, n) if format == "onnx" else _stablehlo(fn, spec, tuple(platforms))
    out = pathlib.Path(path).absolute()
    contract = {
        "contract": CONTRACT_FORMAT,
        "format": format,
        "file": out.name,
        **details,
        "input": {"name": INPUT_NAME, "shape": ["batch", *src.observation_shape], "dtype": "float32"},
        "output": {"name": OUTPUT_NAME, "shape": ["batch", n], "dtype": "float32"},
        "observation": {
            "size": int(np.prod(src.observation_shape)),
            "shape": list(src.observation_shape),
            "layout": "the environment's observation array (state.obs), raw: the normalizer is in the graph",
            **({"key": info["observation_key"],
                "layout": f"the environment's state.obs[{info['observation_key']!r}] array, raw: the "
                          "normalizer is in the graph (the other keys are the critic's)"}
               if "observation_key" in info else {}),
        },
        "action": {"size": n, "low": low.tolist(), "high": high.tolist(), "scaled_in_graph": scaled},
        **({"recurrent": _recurrent(info["hidden_size"])} if "hidden_size" in info else {}),
        **{k: info.get(k) for k in ("env", "dt", "action_repeat", "agent", "normalize_observations")},
        **{k: info.get(k) for k in ("step", "source")},
        "versions": _versions.package_versions(_versions.RECORDED + (("onnx",) if format == "onnx" else ())),
    }
    text = (json.dumps(contract, indent=2) + "\n").encode()
    brax_io.write_atomic(out, lambda f: f.write(data))  # the model first: a contract never precedes its file
    brax_io.write_atomic(contract_path(out), lambda f: f.write(text))
    return Exported(out, contract_path(out), contract)


def _source(
    source: str | os.PathLike[str] | tuple[Callable[..., Any], Any],
    observation_size: int | Sequence[int] | None,
    network_factory: Callable[..., Any] | None,
) -> _Source:
    """The policy of `source` with its observation shape and provenance."""
    if isinstance(source, tuple):
        make_policy, params = source
        if observation_size is None:
            raise ValueError("exporting (make_policy, params) needs observation_size=")
        shape = (observation_size,) if isinstance(observation_size, int) else tuple(observation_size)
        return _Source(make_policy, params, tuple(int(d) for d in shape), {})
    loaded = checkpoint.load(source, network_factory=network_factory)
    meta = loaded.meta
    shapes = meta["observation_shapes"]
    make_policy = loaded.make_policy
    key = None
    if isinstance(shapes, Mapping):
        # a policy that reads one key of a dict observation (an asymmetric critic reads another) is
        # exported on that key's array; the graph cannot hold a dict
        key = _policy_obs_key(meta)
        if key is None or key not in shapes:
            raise ExportError(
                f"{loaded.step_dir}: the policy takes dict observations (keys {', '.join(map(repr, shapes))})"
                f" and its networks name no policy_obs_key among them; export takes one observation array: "
                "export (make_policy, params) with a policy that builds the dict from an array"
            )
        make_policy = _reading_key(loaded.make_policy, key)
        shapes = shapes[key]
    config = meta.get("config", {})
    run = _run_config(loaded.step_dir)
    info: dict[str, Any] = {
        "agent": str(meta.get("agent", "ppo")),
        "step": int(meta["step"]) if "step" in meta else None,
        "source": str(loaded.step_dir),
        "normalize_observations": bool(
            meta.get("normalize_observations", config.get("normalize_observations"))
        ),
        "action_repeat": int(config.get("action_repeat", 1)),
    }
    if "hidden_size" in meta:  # a recurrent policy (rppo): its state is the tail of input and output
        info["hidden_size"] = int(meta["hidden_size"])
    if key is not None:
        info["observation_key"] = key
    if isinstance(run.get("env"), str):
        info.update(env=run["env"], dt=_env_dt(run["env"], run.get("env_kwargs", {}), run.get("imports", [])))
    return _Source(make_policy, loaded.params, tuple(int(d) for d in shapes), info)


def _policy_obs_key(meta: Mapping[str, Any]) -> str | None:
    """The observation key a checkpoint's recorded policy network reads, if it records one."""
    network = meta.get("network")
    kwargs = network.get("kwargs") if isinstance(network, Mapping) else None
    key = kwargs.get("policy_obs_key") if isinstance(kwargs, Mapping) else None
    return key if isinstance(key, str) else None


def _reading_key(make_policy: Callable[..., Any], key: str) -> Callable[..., Any]:
    """`make_policy` whose policies take `obs[key]` alone (the other keys are never read)."""
    def make(*args: Any, **kwargs: Any) -> Callable[..., Any]:
        policy = make_policy(*args, **kwargs)
        return lambda obs, rng: policy({key: obs}, rng)

    return make


def _recurrent(hidden_size: int) -> dict[str, Any]:
    """The contract's note on a recurrent policy's state, which travels in the input and the output."""
    return {
        "hidden_size": hidden_size,
        "layout": f"the last {hidden_size} input entries are the hidden state (zeros at an episode's start); "
        f"feed the last {hidden_size} output entries back as the next step's",
    }


def _run_config(step_dir: pathlib.Path) -> dict[str, Any]:
    """The config.json of the `brax-train train` run a checkpoint step belongs to, or {}."""
    path = step_dir.parent.parent / "config.json"
    if step_dir.parent.name != "checkpoints" or not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        logger.warning("cannot read %s (%s): the contract names no environment", path, e)
        return {}
    return data if isinstance(data, dict) else {}


def _env_dt(name: str, kwargs: Mapping[str, Any], imports: Sequence[str]) -> float | None:
    """The environment's `dt`, or None (with a warning) when this process cannot build it."""
    try:
        for module in imports:
            if not (module.endswith(".py") or os.sep in module):
                importlib.import_module(module)
        e = brax_envs.get_environment(name, **kwargs)
        # float32's shortest decimal (0.02, not 0.019999999552965164)
        return float(str(np.float32(np.asarray(e.dt)))) if hasattr(e, "dt") else None
    except Exception as e:  # the env is built only for its dt: a user env's failure must not stop the export
        logger.warning("cannot build environment %r for its dt (%s): the contract records dt null", name, e)
        return None


def _action_fn(policy: Callable[..., Any]) -> Callable[[jax.Array], jax.Array]:
    """`obs -> action` of a deterministic policy, its key a constant (so the graph holds no RNG)."""
    key = jax.random.PRNGKey(0)

    def fn(obs: jax.Array) -> jax.Array:
        return jnp.asarray(policy(obs, key)[0], jnp.float32)

    return fn


def _scaled(fn: Callable[[jax.Array], jax.Array], low: np.ndarray, high: np.ndarray) -> Any:
    """`fn` with its [-1, 1] actions mapped linearly onto [low, high]."""
    half, mid = ((high - low) / 2)[None], ((high + low) / 2)[None]  # (1, action_size) like the actions' rank
    return lambda obs: fn(obs) * half + mid


def _action_size(fn: Callable[[jax.Array], jax.Array], spec: Any, expected: int | None) -> int:
    """The action size `fn` returns for `spec`; `ExportError` unless it is `(batch, expected)`."""
    try:
        out = jax.eval_shape(fn, spec)
    except jcore.InconclusiveDimensionOperation as e:
        raise ExportError(f"the policy cannot be traced with a symbolic batch dimension: {e}") from e
    shape = tuple(out.shape)
    if len(shape) != 2 or not isinstance(shape[1], int) or (expected is not None and shape[1] != expected):
        want = "(batch, action_size)" if expected is None else f"(batch, {expected})"
        raise ExportError(f"the policy returns actions of shape {shape}, expected {want}")
    return int(shape[1])


def _bounds(action_range: tuple[Any, Any] | None, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-dimension `(low, high)` of `action_range` (our envs' [-1, 1] when None)."""
    lo, hi = (-1.0, 1.0) if action_range is None else action_range
    low = np.broadcast_to(np.asarray(lo, np.float32), (n,)).copy()
    high = np.broadcast_to(np.asarray(hi, np.float32), (n,)).copy()
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high)) and np.all(low < high)):
        raise ValueError(f"action_range must be finite with low < high, got {action_range!r}")
    return low, high


def _primitives(jaxpr: jcore.Jaxpr) -> set[str]:
    """Names of the primitives in `jaxpr` and its sub-jaxprs."""
    names = {e.primitive.name for e in jaxpr.eqns}
    for e in jaxpr.eqns:
        for sub in jcore.jaxprs_in_params(e.params):
            names |= _primitives(sub)
    return names


def _stablehlo(
    fn: Callable[[jax.Array], jax.Array], spec: Any, platforms: tuple[str, ...]
) -> tuple[bytes, dict[str, Any]]:
    """Serialized `jax.export` of `fn` and the contract's details; `ExportError` naming what failed."""
    try:
        with jax.default_matmul_precision("highest"):  # a deployment gets float32 matmuls, not TF32
            exported = jax.export.export(jax.jit(fn), platforms=platforms)(spec)
        data = bytes(exported.serialize())
    except ImportError as e:  # jax's serializer imports flatbuffers, which jax does not declare
        raise ImportError(f"StableHLO export needs the flatbuffers package: {_EXTRA}") from e
    except (NotImplementedError, RuntimeError, ValueError, TypeError) as e:
        callbacks = sorted(_primitives(jax.make_jaxpr(fn)(spec).jaxpr) & set(_CALLBACKS))
        if callbacks:  # jax's own message for these can be as bare as "std::bad_cast"
            raise ExportError(
                f"the policy uses JAX primitive {callbacks[0]!r} (a call back into Python), which the "
                "stablehlo format cannot express"
            ) from e
        raise ExportError(f"stablehlo export failed: {e}") from e
    details = {
        "platforms": list(exported.platforms),
        "calling_convention_version": exported.calling_convention_version,
        "load": "jax.export.deserialize(data).call(observation)",
    }
    return data, details


def _import_onnx() -> Any:
    """The onnx package, or an `ImportError` naming the extra that installs it."""
    try:
        import onnx
    except ImportError as e:
        raise ImportError(f"ONNX export needs the onnx package: {_EXTRA}") from e
    return onnx


def _onnx(fn: Callable[[jax.Array], jax.Array], spec: Any, n: int) -> tuple[bytes, dict[str, Any]]:
    """The serialized ONNX model of `fn` and the contract's details."""
    onnx = _import_onnx()
    closed = jax.make_jaxpr(fn)(spec)
    graph = _OnnxGraph(onnx, spec.shape[0])
    consts = [graph.const(c) for c in closed.consts]
    (out,) = graph.emit(closed.jaxpr, consts, [INPUT_NAME], [True])
    assert out is not None
    graph.nodes.append(onnx.helper.make_node("Identity", [out], [OUTPUT_NAME]))
    used = {name for node in graph.nodes for name in node.input}  # folded constants leave their inputs unused
    obs = ["batch", *spec.shape[1:]]
    model = onnx.helper.make_model(
        onnx.helper.make_graph(
            graph.nodes,
            "brax_train_policy",
            [onnx.helper.make_tensor_value_info(INPUT_NAME, onnx.TensorProto.FLOAT, obs)],
            [onnx.helper.make_tensor_value_info(OUTPUT_NAME, onnx.TensorProto.FLOAT, ["batch", n])],
            [t for t in graph.initializers if t.name in used],
        ),
        opset_imports=[onnx.helper.make_opsetid("", ONNX_OPSET)],
        producer_name="brax-train",
        ir_version=ONNX_IR_VERSION,
    )
    try:
        onnx.checker.check_model(model, full_check=True)
    except onnx.checker.ValidationError as e:
        raise ExportError(f"onnx export produced an invalid model: {e}") from e
    load = f"onnxruntime.InferenceSession(path).run(None, {{'{INPUT_NAME}': obs}})[0]"
    details = {"opset": ONNX_OPSET, "load": load}
    return model.SerializeToString(), details


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


class _OnnxGraph:
    """ONNX nodes and initializers (onnx.helper) for a jaxpr, one JAX primitive at a time."""

    def __init__(self, onnx: Any, batch: Any) -> None:
        self.onnx = onnx
        self.batch = batch  # the symbolic batch dimension of the traced input
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
            self._batch_size = self.op1("Shape", [INPUT_NAME], start=0, end=1)
        parts = []
        for d in dims:
            if _is_int(d):
                parts.append(self.const(np.asarray([d], np.int64)))
            elif d == self.batch:
                parts.append(self._batch_size)
            else:
                raise ExportError(f"onnx export: dimension {d} is neither a constant nor the batch size")
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
        """Nodes of one equation; `ExportError` for a primitive ONNX export cannot express."""
        p, params = eqn.primitive.name, eqn.params
        if p in _CALLS:
            sub = params.get("jaxpr", params.get("call_jaxpr"))
            consts: list[str] = []
            if isinstance(sub, jcore.ClosedJaxpr):
                consts, sub = [self.const(c) for c in sub.consts], sub.jaxpr
            if isinstance(sub, jcore.Jaxpr):
                return self.emit(sub, consts, ins, [v in needed for v in eqn.outvars])
        folded = self._fold(eqn, ins)
        if folded is not None:
            return list(folded)
        if p in _UNARY:
            return [self.op1(_UNARY[p], ins)]
        if p in _BINARY:
            return [self.op1(_BINARY[p], ins)]
        (shape_in, dtype), (shape_out, _) = (
            _aval(eqn.invars[0] if eqn.invars else eqn.outvars[0]),
            _aval(eqn.outvars[0]),
        )
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
        raise ExportError(f"the policy uses JAX primitive {p!r}, which the onnx export cannot express")

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
            raise ExportError(f"onnx export: gather {dn} is more than indexing one axis with constants")
        idx = np.clip(indices[..., 0].astype(np.int64), 0, shape[k] - sizes[k])  # as XLA clamps starts
        if tuple(dn.collapsed_slice_dims) == () and idx.ndim == 0:  # a slice [i, i + size)
            args = [np.asarray([a], np.int64) for a in (idx, idx + sizes[k], k)]
            return self.op1("Slice", [x, *(self.const(a) for a in args)])
        if tuple(dn.collapsed_slice_dims) != (k,) or sizes[k] != 1:
            raise ExportError(f"onnx export: gather {dn} is more than indexing one axis with constants")
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
            raise ExportError(f"onnx export: slice {starts}:{limits} of a batch-sized dimension")
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


__all__ = [
    "CONTRACT_FORMAT",
    "DEFAULT_PLATFORMS",
    "FORMATS",
    "INPUT_NAME",
    "ONNX_IR_VERSION",
    "ONNX_OPSET",
    "OUTPUT_NAME",
    "ExportError",
    "Exported",
    "Format",
    "contract_path",
    "export_policy",
]
