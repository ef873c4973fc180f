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
- ONNX (opset 18, IR 8): built with onnx's own `onnx.helper` from the policy's jaxpr (`_onnx.py`), not with
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
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import brax_envs
import brax_io
import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core as jcore

from brax_train import _versions, checkpoint
from brax_train._onnx import OnnxGraph, TranslationError

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
        "observation": _observation_contract(src.observation_shape, info),
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


def _observation_contract(shape: tuple[int, ...], info: dict[str, Any]) -> dict[str, Any]:
    """The contract's `observation` entry: size, shape and where the policy's input comes from."""
    entry: dict[str, Any] = {
        "size": int(np.prod(shape)),
        "shape": list(shape),
        "layout": "the environment's observation array (state.obs), raw: the normalizer is in the graph",
    }
    if "observation_key" in info:
        key = info["observation_key"]
        entry["key"] = key
        entry["layout"] = (
            f"the environment's state.obs[{key!r}] array, raw: the normalizer is in the graph (the "
            "other keys are the critic's)"
        )
    return entry


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
    graph = OnnxGraph(onnx, spec.shape[0], INPUT_NAME)
    consts = [graph.const(c) for c in closed.consts]
    try:
        (out,) = graph.emit(closed.jaxpr, consts, [INPUT_NAME], [True])
    except TranslationError as e:
        raise ExportError(str(e)) from e
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
