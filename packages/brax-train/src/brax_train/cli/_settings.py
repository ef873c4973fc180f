"""A run's settings from the environment's preset, a config file, `--set` items and flags; `RunSpec`.

Keys are field names of the agent's config (`PPOConfig` for `--agent ppo`), `env.<kwarg>` for keyword
options of the environment factory and `network_factory.<kwarg>` for the agent's network-factory
keywords; a config file may also hold `env` (the name, or a table of `name` and options), `backend`
and `import`. Each config item becomes its tyro flag (`num_evals=5` -> `--num-evals 5`) parsed on top
of what came before, so tyro types every value.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import importlib.util
import json
import os
import pathlib
import sys
import tomllib
from collections.abc import Iterable, Mapping
from typing import Any

import brax_envs

from brax_train import agents, config, networks, presets, runner
from brax_train.cli import _parser
from brax_train.cli._errors import UsageError, one_line
from brax_train.cli._parser import NOT_SETTABLE

FORMAT = "brax-train-run/1"
"""`format` of config.json."""


def settable(config_class: type[config.RunConfig]) -> tuple[str, ...]:
    """The fields of an agent's config that flags, `--set` and config files accept."""
    return tuple(f.name for f in dataclasses.fields(config_class) if f.name not in NOT_SETTABLE)
_NAMED_CALLABLES = ("activation", "policy_network_kernel_init_fn", "value_network_kernel_init_fn")
_CHOSEN_ELSEWHERE = ("env", "env.name", "import", "imports")  # --env and --import, or a config file


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """What a run trains (config.json): environment, its options, imports, the agent and its settings."""

    env: str
    env_kwargs: dict[str, Any]
    imports: tuple[str, ...]
    settings: dict[str, Any]
    agent: str = "ppo"

    def to_json(self) -> dict[str, Any]:
        """The JSON object stored as config.json (the settings under the agent's name)."""
        spec = {"env": self.env, "env_kwargs": self.env_kwargs, "imports": list(self.imports)}
        return {"format": FORMAT, **spec, "agent": self.agent, self.agent: self.settings}

    @classmethod
    def from_json(cls, data: Any, where: str) -> RunSpec:
        """Parse config.json contents; `where` names the file in errors."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise UsageError(f"{where}: not a brax-train run configuration (format {FORMAT!r})")
        agent = data.get("agent", "ppo")  # the first runs were PPO's and name no agent
        if agent not in agents.AGENTS:
            raise UsageError(f"{where}: unknown agent {agent!r}; accepted: {', '.join(agents.AGENTS)}")
        if missing := [k for k in ("env", "env_kwargs", "imports", agent) if k not in data]:
            raise UsageError(f"{where}: missing key {missing[0]!r}")
        env, env_kwargs, imports, settings = data["env"], data["env_kwargs"], data["imports"], data[agent]
        if not (isinstance(env, str) and isinstance(env_kwargs, dict) and isinstance(settings, dict)):
            raise UsageError(f"{where}: env must be a string, env_kwargs and {agent} objects")
        if not isinstance(imports, list) or not all(isinstance(i, str) for i in imports):
            raise UsageError(f"{where}: imports must be a list of strings")
        return cls(env, env_kwargs, tuple(imports), settings, agent)


def split_item(text: str) -> tuple[str, Any]:
    """`KEY=VALUE` -> (key, parsed value)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise UsageError(f"--set: expected KEY=VALUE, got {text!r}")
    return key.strip(), _parser.parse_value(value.strip())


def load_config_file(path: str) -> list[tuple[str, Any]]:
    """(key, value) items of a .json or .toml settings file; an `env` table becomes `env.<key>` items."""
    suffix = pathlib.Path(path).suffix.lower()
    if suffix not in (".json", ".toml"):
        raise UsageError(f"--config: expected a .json or .toml file, got {path!r}")
    try:
        raw = pathlib.Path(path).read_bytes()
        data = json.loads(raw) if suffix == ".json" else tomllib.loads(raw.decode("utf-8"))
    except OSError as e:
        raise UsageError(f"--config: cannot read {path!r}: {e.strerror or e}") from None
    except ValueError as e:  # JSON, TOML and UTF-8 errors
        kind = suffix[1:].upper()
        raise UsageError(f"--config: {path!r} is not valid {kind}: {one_line(str(e))}") from None
    if not isinstance(data, dict):
        raise UsageError(f"--config: {path!r} must hold an object of settings")
    # An `env` table holds environment options; a `network_factory` table stays one mapping (as Playground).
    env = data.pop("env") if isinstance(data.get("env"), dict) else {}
    return [(str(k), v) for k, v in data.items()] + [(f"env.{k}", v) for k, v in env.items()]


def import_module(spec: str, flag: str = "--import") -> None:
    """Import a dotted module name (from the working directory too, as `python -m`) or a .py file by path."""
    try:
        if not (spec.endswith(".py") or os.sep in spec):
            if "" not in sys.path and os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            importlib.import_module(spec)
            return
        path = pathlib.Path(spec).absolute()
        if not path.is_file():
            raise UsageError(f"{flag}: no such file {spec!r}")
        if getattr(sys.modules.get(path.stem), "__file__", None) == str(path):
            return
        module_spec = importlib.util.spec_from_file_location(path.stem, path)
        if module_spec is None or module_spec.loader is None:
            raise UsageError(f"{flag}: cannot import {spec!r}")
        sys.modules[path.stem] = module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
    except UsageError:
        raise
    except Exception as e:  # any failure of user code is a bad --import argument
        raise UsageError(f"{flag}: cannot import {spec!r}: {type(e).__name__}: {one_line(str(e))}") from None


def canonical_import(spec: str) -> str:
    """How an import is recorded in config.json: .py paths made absolute, module names as given."""
    return str(pathlib.Path(spec).absolute()) if spec.endswith(".py") or os.sep in spec else spec


def check_env(name: str, flag: str = "--env") -> None:
    """Raise `UsageError` listing the registered names unless `name` is registered."""
    names = brax_envs.registered_environments()
    if name not in names:
        close = difflib.get_close_matches(name, names, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        own = [n for n in names if not n.startswith("dm_control/")]
        suite = ("" if len(own) == len(names)
                 else ", and dm_control/DOMAIN-TASK for the suite's tasks (brax-train envs)")
        raise UsageError(f"{flag}: unknown environment {name!r}{hint}; accepted: {', '.join(own)}{suite}")


def _apply(c: Any, items: Iterable[tuple[str, Any]], source: str, env_kw: dict[str, Any]) -> Any:
    """Config `c` with the items applied through their tyro flags; environment options go to `env_kw`."""
    fields = [f.name for f in dataclasses.fields(c)]
    for key, value in items:
        if key in _CHOSEN_ELSEWHERE:
            use = "choose the environment with --env NAME" if key.startswith("env") else "use --import MODULE"
            raise UsageError(f"{source} {key}: {use}")
        if key == "backend" or (key.startswith("env.") and len(key) > 4):
            env_kw[key.removeprefix("env.")] = value
            continue
        if key.startswith("network_factory.") and len(key) > 16:
            nf = c.network_factory if isinstance(c.network_factory, Mapping) else {}
            key, value = "network_factory", {**nf, key[16:]: value}
        if key in NOT_SETTABLE:
            raise UsageError(f"{source} {key}: cannot be set from the command line ({NOT_SETTABLE[key]})")
        if key not in fields:
            close = difflib.get_close_matches(key, [*settable(type(c)), "env", "backend", "import"], n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            accepted = f"{type(c).__name__} fields, env.<kwarg>, network_factory.<kwarg>"
            raise UsageError(f"{source}: unknown key {key!r}{hint}; accepted: {accepted}")
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # `1e6` in JSON or TOML: an integer for integer fields, exact for floats
        token = json.dumps(value) if isinstance(value, dict | list) else str(value)
        c = _parser.parse_settings(c, [f"--{key.replace('_', '-')}", token], f"{source} {key}")
    return c


def resolve(train: _parser.Train, device_count: int | None = None) -> tuple[RunSpec, Any]:
    """The run of `brax-train train`: preset < config file < `--set` items < flags; validated (as in
    `agent_config`)."""
    source, items = f"--config {train.config}", (load_config_file(train.config) if train.config else [])
    file = dict(items)
    file_env = file.get("env", file.get("env.name"))
    file_imports = file.get("import", file.get("imports", []))
    file_imports = [file_imports] if isinstance(file_imports, str) else file_imports
    if not isinstance(file_env, str | None):
        raise UsageError(f"{source}: env must be an environment name, got {file_env!r}")
    if not isinstance(file_imports, list) or not all(isinstance(v, str) for v in file_imports):
        raise UsageError(f"{source}: import must be a module name or a list of them")
    set_items = [split_item(text) for text in train.set]
    imports = tuple(dict.fromkeys(canonical_import(i) for i in [*file_imports, *train.imports]))
    for module in imports:
        import_module(module)
    name = train.env or file_env or _parser.DEFAULT_ENV
    check_env(name)
    if train.agent not in agents.AGENTS:
        raise UsageError(f"--agent: unknown agent {train.agent!r}; accepted: {', '.join(agents.AGENTS)}")
    env_kwargs: dict[str, Any] = {}
    file_items = [(k, v) for k, v in items if k not in _CHOSEN_ELSEWHERE]
    c = presets.preset(name, train.agent)
    c = _apply(_apply(c, file_items, source, env_kwargs), set_items, "--set", env_kwargs)
    if train.backend is not None:
        env_kwargs["backend"] = train.backend
    c = _parser.parse_train_flags(train, c)
    settings = {k: _recordable(getattr(c, k)) for k in settable(type(c))}
    spec = RunSpec(name, env_kwargs, imports, settings, train.agent)
    return spec, agent_config(spec, device_count=device_count)


def _recordable(value: Any) -> Any:
    """A setting as config.json holds it: mappings as dicts, a callable (a default factory) by name."""
    if isinstance(value, Mapping):
        return dict(value)
    return (networks.callable_name(value) or value) if callable(value) else value


def agent_config(spec: RunSpec, where: str = "", device_count: int | None = None) -> Any:
    """The validated config of a run's agent (named callables resolved); errors are one-line `UsageError`s.

    Validated for `device_count` devices (default: the run's devices, which starts JAX's backend).
    """
    prefix, kwargs = f"{where}: " if where else "", dict(spec.settings)
    agent = agents.spec(spec.agent)
    defaults = agent.config_class()
    key = ""
    try:
        for key, value in spec.settings.items():  # a callable setting is recorded by importable name
            if isinstance(value, str) and callable(getattr(defaults, key, None)):
                kwargs[key] = networks.resolve_name(value)
        key, nf = "network_factory", kwargs.get("network_factory")
        if isinstance(nf, Mapping):
            names = {k: v for k, v in nf.items() if k in _NAMED_CALLABLES and isinstance(v, str)}
            kwargs["network_factory"] = {**nf, **{k: networks.resolve_name(v) for k, v in names.items()}}
    except (ImportError, AttributeError, ValueError) as e:
        raise UsageError(f"{prefix}{key}: cannot resolve {one_line(str(e))}") from None
    try:
        c = config.merge(agent.config_class, None, kwargs, f"{spec.agent}.train")
        agent.validate(c, len(runner.mesh_devices(c)) if device_count is None else device_count)
    except config.ConfigError as e:
        raise UsageError(prefix + one_line(str(e))) from None
    return agent.resolve(c)


__all__ = [
    "FORMAT", "NOT_SETTABLE", "RunSpec", "agent_config", "canonical_import", "check_env", "import_module",
    "load_config_file", "resolve", "settable", "split_item",
]
