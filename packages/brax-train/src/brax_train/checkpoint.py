"""Orbax checkpoints of training runs (every agent), and rebuilding policies from them.

A run directory holds one subdirectory per saved env step (`<run>/<step>/`), written by an orbax
`CheckpointManager` (temporary directory + rename, so a killed save never looks complete) with
three items: `params` (the policy's parameters, `PPOParams` for PPO), `train_state` (the agent's
whole state, the training RNG key and the environment state)
and `meta` (JSON: step counters, config, network description). After orbax finishes, a
`brax_train_manifest.json` with the SHA-256 of every file is written atomically; a step without
it is incomplete and never chosen, and a step whose files do not match it raises
`CorruptCheckpointError` naming the file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import pathlib
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

import brax_io
import jax
import orbax.checkpoint as ocp  # type: ignore[import-untyped]  # orbax ships no py.typed

from brax_train import agents, networks, running_statistics
from brax_train.config import RunConfig
from brax_train.types import Policy

C = TypeVar("C", bound=RunConfig)

logger = logging.getLogger("brax_train.checkpoint")

MANIFEST = "brax_train_manifest.json"
"""Name of the per-step manifest file that marks a step complete."""
FORMAT = "brax_train/1"
"""Checkpoint format identifier stored in `meta` (which also names the agent: `meta["agent"]`)."""
_READABLE = (FORMAT, "brax_train.ppo/1")  # the first release's PPO-only format reads as agent "ppo"


class CheckpointError(Exception):
    """Base class of checkpoint errors."""


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
    """No (complete) checkpoint at the given path."""


class IncompleteCheckpointError(CheckpointError):
    """A step directory from a save that never finished (no manifest)."""


class CorruptCheckpointError(CheckpointError):
    """A checkpoint file is missing or does not match its recorded checksum."""

    def __init__(self, message: str, path: pathlib.Path) -> None:
        """`path` is the offending file."""
        super().__init__(message)
        self.path = path


class CheckpointMismatchError(CheckpointError):
    """A checkpoint does not fit the structure (networks, environments) it is restored into."""


def _sha256(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _files(step_dir: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in step_dir.rglob("*") if p.is_file() and p.name != MANIFEST)


def write_manifest(step_dir: pathlib.Path) -> None:
    """Record the checksum of every file of a finished step, atomically."""
    entries = {p.relative_to(step_dir).as_posix(): _sha256(p) for p in _files(step_dir)}
    text = json.dumps({"format": FORMAT, "files": entries}, indent=1, sort_keys=True)
    brax_io.write_atomic(step_dir / MANIFEST, lambda f: f.write(text.encode()))


def verify(step_dir: pathlib.Path) -> None:
    """Check a step against its manifest; raises `IncompleteCheckpointError` or `CorruptCheckpointError`."""
    manifest = step_dir / MANIFEST
    if not manifest.is_file():
        raise IncompleteCheckpointError(f"{step_dir} is incomplete (no {MANIFEST}; the save did not finish)")
    try:
        files = json.loads(manifest.read_text())["files"]
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptCheckpointError(f"{manifest} is unreadable: {e}", manifest) from e
    for rel, digest in files.items():
        path = step_dir / rel
        if not path.is_file():
            raise CorruptCheckpointError(f"checkpoint file {path} is missing", path)
        if _sha256(path) != digest:
            raise CorruptCheckpointError(f"checkpoint file {path} is corrupted (checksum mismatch)", path)


def _is_step_dir(p: pathlib.Path) -> bool:
    return (p / "meta").is_dir() or (p / MANIFEST).is_file() or (p / "_CHECKPOINT_METADATA").is_file()


def resolve(path: str | os.PathLike[str]) -> pathlib.Path:
    """The verified step directory for `path`: a step directory itself, or a run directory's latest
    complete step (incomplete steps are skipped with a warning; a corrupted latest step raises); a
    `brax-train train` run directory stands for its `checkpoints/`."""
    p = pathlib.Path(path).absolute()
    if not p.is_dir():
        raise CheckpointNotFoundError(f"no checkpoint directory at {p}")
    if _is_step_dir(p):
        verify(p)
        return p
    if (p / "checkpoints").is_dir() and (p / "config.json").is_file():
        return resolve(p / "checkpoints")
    steps = sorted(
        (d for d in p.iterdir() if d.is_dir() and d.name.isdigit()), key=lambda d: int(d.name), reverse=True
    )
    for d in steps:
        try:
            verify(d)
        except IncompleteCheckpointError as e:
            logger.warning("skipping %s", e)
            continue
        return d
    raise CheckpointNotFoundError(f"no complete checkpoint step in {p}")


def read_meta(step_dir: pathlib.Path) -> dict[str, Any]:
    """The JSON `meta` item of a step."""
    path = step_dir / "meta" / "metadata"
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise CorruptCheckpointError(f"checkpoint metadata {path} is unreadable: {e}", path) from e
    if not isinstance(meta, dict) or meta.get("format") not in _READABLE:
        raise CheckpointMismatchError(f"{path} is not a {FORMAT} checkpoint")
    return meta


def _is_empty(x: Any) -> bool:
    return bool(getattr(x, "size", 1) == 0)


def _drop_empty(tree: Any) -> Any:
    """`tree` with zero-size arrays replaced by None: orbax refuses to save them (e.g. the contact
    arrays of a model without collisions), and they carry no data to restore."""
    return jax.tree.map(lambda x: None if _is_empty(x) else x, tree)


def restore_item(step_dir: pathlib.Path, name: str, target: Any) -> Any:
    """Restore item `name` of a step into the structure, dtypes and shardings of `target`."""
    path = step_dir / name
    try:
        out = ocp.StandardCheckpointer().restore(path, _drop_empty(target))
    except (ValueError, KeyError, TypeError) as e:
        raise CheckpointMismatchError(f"{path} does not match the expected structure: {e}") from e
    # zero-size leaves were not saved: take them (shape and dtype) from the target
    flat_t, treedef = jax.tree.flatten(target)
    flat_o = jax.tree.flatten(out, is_leaf=lambda x: x is None)[0]
    if len(flat_o) != len(flat_t):
        raise CheckpointMismatchError(
            f"{path} has {len(flat_o)} leaves, the expected structure {len(flat_t)}"
        )
    leaves = [t if _is_empty(t) else o for t, o in zip(flat_t, flat_o, strict=True)]
    return jax.tree.unflatten(treedef, leaves)


class Saver:
    """Writes checkpoint steps into a run directory (orbax `CheckpointManager`, synchronous).

    The calling process writes alone: in a multi-process run only one process (the primary) makes a
    `Saver` and passes it host (numpy) arrays of the global values.
    """

    def __init__(self, directory: str | os.PathLike[str], max_to_keep: int | None = None) -> None:
        """Save into `directory`, keeping at most `max_to_keep` steps (None keeps all)."""
        self.directory = pathlib.Path(directory).absolute()
        alone = {jax.process_index()}
        if jax.process_count() > 1:  # orbax would otherwise wait for every process at its barriers
            self.directory.mkdir(parents=True, exist_ok=True)  # orbax cannot create it for a subset
        options = ocp.CheckpointManagerOptions(
            max_to_keep=max_to_keep,
            enable_async_checkpointing=False,
            create=jax.process_count() == 1,
            multiprocessing_options=ocp.options.MultiprocessingOptions(
                primary_host=jax.process_index(), active_processes=alone if jax.process_count() > 1 else None
            ),
        )
        self._manager = ocp.CheckpointManager(self.directory, options=options)

    def save(self, step: int, params: Any, train_state: Any, meta: dict[str, Any]) -> pathlib.Path:
        """Write step `step` (a Python int; 64-bit safe) and return its directory."""
        meta = {**meta, "format": FORMAT, "step": int(step)}
        self._manager.save(
            int(step),
            args=ocp.args.Composite(
                params=ocp.args.StandardSave(params),
                train_state=ocp.args.StandardSave(_drop_empty(train_state)),
                meta=ocp.args.JsonSave(meta),
            ),
            force=True,
        )
        self._manager.wait_until_finished()
        step_dir = self.directory / str(int(step))
        write_manifest(step_dir)
        return step_dir

    def close(self) -> None:
        """Finish pending work and release the manager."""
        self._manager.wait_until_finished()
        self._manager.close()


def rebuild_networks(
    step_dir: pathlib.Path,
    meta: dict[str, Any],
    network_factory: Callable[..., Any] | None,
    from_description: Callable[[dict[str, Any]], Any],
    agent: str,
) -> Any:
    """`agent`'s networks for a checkpoint step: `network_factory` when given, else from the description.

    `network_factory` is called as trainers call it: `fn(observation_size, action_size,
    preprocess_observations_fn=)`; otherwise `from_description(meta["network"])` rebuilds them. A
    checkpoint of another agent, or a description that cannot be rebuilt, raises
    `CheckpointMismatchError` naming the meta file.
    """
    written_by = meta.get("agent", "ppo")  # checkpoints of format brax_train.ppo/1 name no agent
    if written_by != agent:
        raise CheckpointMismatchError(f"{step_dir / 'meta'}: written by agent {written_by!r}, not {agent!r}")
    if network_factory is not None:
        return network_factory(
            networks.observation_size_from_json(meta["observation_shapes"]),
            int(meta["action_size"]),
            preprocess_observations_fn=networks.preprocessor(bool(meta.get("normalize_observations"))),
        )
    try:
        return from_description(meta.get("network", {}))
    except (ValueError, ImportError, AttributeError, KeyError, TypeError) as e:
        raise CheckpointMismatchError(f"{step_dir / 'meta'}: {e}; pass network_factory=") from e


def normalizer_target(meta: dict[str, Any]) -> running_statistics.RunningStatisticsState:
    """Fresh observation statistics shaped as a checkpoint's (the restore target of its normalizer)."""
    return running_statistics.init_state(
        networks.observation_shapes(meta["observation_shapes"]),
        std_eps=float(meta.get("normalize_observations_std_eps", 0.0)),
        mode=str(meta.get("normalize_observations_mode", "welford")),
    )


def _no_options(meta: dict[str, Any]) -> dict[str, Any]:
    """No inference options recorded."""
    del meta
    return {}


@dataclasses.dataclass(frozen=True)
class NetworksCodec:
    """How one agent's networks and parameters come back from a checkpoint step's `meta` alone."""

    agent: str
    """The agent's name (`meta["agent"]` of its checkpoints)."""
    from_description: Callable[[dict[str, Any]], Any]
    """Networks rebuilt from `meta["network"]`, the description the trainer recorded."""
    params_type: Callable[..., Any]
    """The agent's parameters, a NamedTuple of `normalizer` and one field per network: field `f`
    is initialized by the networks' `f_network` (or by the networks themselves, if a bare network)."""
    make_inference_fn: Callable[..., Callable[..., Policy]]
    """`make_inference_fn(networks, **inference_options(meta)) -> make_policy`."""
    inference_options: Callable[[dict[str, Any]], dict[str, Any]] = _no_options
    """Keywords of `make_inference_fn` recorded in `meta` (BC's `tanh_squash`)."""
    adapt_factory: Callable[[Callable[..., Any], dict[str, Any]], Callable[..., Any]] | None = None
    """`(network_factory, meta) -> factory` called as `rebuild_networks` calls one, where the agent's
    trainer calls its factory otherwise (RPPO's adds the hidden state's size)."""

    def params_target(self, net: Any, meta: dict[str, Any]) -> Any:
        """Freshly initialized parameters shaped as a checkpoint's (the restore target)."""
        fields = [f for f in self.params_type._fields if f != "normalizer"]  # type: ignore[attr-defined]
        keys = jax.random.split(jax.random.PRNGKey(0), len(fields))
        inits = {f: getattr(net, f"{f}_network", net).init(k) for f, k in zip(fields, keys, strict=True)}
        return self.params_type(normalizer=normalizer_target(meta), **inits)

    def policy_from_checkpoint(
        self, step_dir: pathlib.Path, meta: dict[str, Any], network_factory: Callable[..., Any] | None = None
    ) -> tuple[Callable[..., Policy], Any]:
        """`(make_policy, params)` of a checkpoint step of this agent, networks rebuilt from `meta`.

        Give `network_factory` (called like the agent's trainer calls it) when the checkpoint notes
        that its networks cannot be rebuilt.
        """
        factory = network_factory
        if factory is not None and self.adapt_factory is not None:
            factory = self.adapt_factory(factory, meta)
        net = rebuild_networks(step_dir, meta, factory, self.from_description, self.agent)
        params = restore_item(step_dir, "params", self.params_target(net, meta))
        return self.make_inference_fn(net, **self.inference_options(meta)), params

    def spec(
        self, config_class: type[C], validate: Callable[[C, int], None], train: Callable[..., Any],
        env_steps_per_update: Callable[[C], int], **options: Any,
    ) -> agents.AgentSpec[C]:
        """The agent's `agents.AgentSpec`, named as this codec and restoring its policies by it;
        `options` are the spec's optional fields (`resolve`, `counts_env_steps`, `policy_env`)."""
        return agents.AgentSpec(
            name=self.agent, config_class=config_class, validate=validate, train=train,
            env_steps_per_update=env_steps_per_update, policy_from_checkpoint=self.policy_from_checkpoint,
            **options,
        )


class LoadedCheckpoint(NamedTuple):
    """A checkpoint's policy factory, parameters and metadata."""

    make_policy: Callable[..., Policy]
    """`make_policy(params, deterministic=...)`."""
    params: Any
    """Restored parameters (`ppo.PPOParams` for PPO; each agent's own type)."""
    meta: dict[str, Any]
    """The JSON metadata (step, config, network description)."""
    step_dir: pathlib.Path
    """The step directory that was loaded."""


def load(path: str | os.PathLike[str], network_factory: Callable[..., Any] | None = None) -> LoadedCheckpoint:
    """Load parameters and rebuild the policy of a checkpoint (run or step directory), any agent.

    The agent named in the step's `meta` (`agents.spec(name).policy_from_checkpoint`) rebuilds
    its networks from the recorded description; give `network_factory` (called like that agent's
    trainer calls it) when the checkpoint notes that they cannot be rebuilt.
    """
    step_dir = resolve(path)
    meta = read_meta(step_dir)
    name = str(meta.get("agent", "ppo"))  # checkpoints of format brax_train.ppo/1 name no agent
    try:
        agent = agents.spec(name)
    except ValueError as e:
        raise CheckpointMismatchError(f"{step_dir / 'meta'}: {e}") from None
    make_policy, params = agent.policy_from_checkpoint(step_dir, meta, network_factory)
    return LoadedCheckpoint(make_policy, params, meta, step_dir)


def load_policy(
    path: str | os.PathLike[str],
    deterministic: bool = True,
    network_factory: Callable[..., Any] | None = None,
) -> Policy:
    """The policy `policy(obs, key) -> (action, extras)` stored in a checkpoint, from the checkpoint alone."""
    loaded = load(path, network_factory=network_factory)
    return loaded.make_policy(loaded.params, deterministic=deterministic)


__all__ = [
    "MANIFEST",
    "CheckpointError",
    "CheckpointMismatchError",
    "CheckpointNotFoundError",
    "CorruptCheckpointError",
    "IncompleteCheckpointError",
    "LoadedCheckpoint",
    "NetworksCodec",
    "Saver",
    "load",
    "load_policy",
    "normalizer_target",
    "read_meta",
    "rebuild_networks",
    "resolve",
    "restore_item",
    "verify",
    "write_manifest",
]
