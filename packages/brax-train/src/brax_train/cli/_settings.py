"""Resolving a run's settings from defaults, a config file, `--set` items and flags; `RunSpec` (config.json).

Keys are `ppo.train` keywords (`PPOConfig` field names), `env.<kwarg>` for keyword options of the
environment factory, `network_factory.<kwarg>` for `make_ppo_networks` keywords, and in a config file
also `env` (the name, or a table of `name` and keyword options), `backend` and `import` (a list of
modules). Fields that need Python objects or that the CLI owns (callbacks, checkpoint paths) are
refused with a message naming them.
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
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from brax_train.cli import _defaults
from brax_train.cli._errors import UsageError, one_line
from brax_train.cli._parser import DEFAULT_ENV

FORMAT = "brax-train-run/1"
"""`format` of config.json."""

NOT_SETTABLE: dict[str, str] = {
    "progress_fn": "the CLI reports progress itself",
    "policy_params_fn": "it needs a Python callable",
    "wrap_env_fn": "it needs a Python callable",
    "randomization_fn": "it needs a Python callable",
    "randomize_per_episode": "it only applies with randomization_fn, which needs a Python callable",
    "eval_env": "it needs a Python object",
    "restore_params": "it needs Python objects",
    "save_checkpoint_path": "checkpoints go to <run dir>/checkpoints",
    "restore_checkpoint_path": "use `brax-train resume DIR`",
}
"""PPOConfig fields the command line cannot set, with the reason."""

_NAMED_CALLABLE_KEYS = ("activation", "policy_network_kernel_init_fn", "value_network_kernel_init_fn")


def _ppo_fields() -> dict[str, dataclasses.Field[Any]]:
    from brax_train.ppo.config import PPOConfig

    return {f.name: f for f in dataclasses.fields(PPOConfig)}


def settable_keys() -> tuple[str, ...]:
    """`PPOConfig` fields that `--set` and config files accept."""
    return tuple(k for k in _ppo_fields() if k not in NOT_SETTABLE)


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """What a run trains: environment, its options, modules to import, and every PPO setting."""

    env: str
    """Registered environment name."""
    env_kwargs: dict[str, Any]
    """Keyword options of the environment factory (JSON values)."""
    imports: tuple[str, ...]
    """Modules (dotted names or absolute .py paths) imported before the environment is built."""
    ppo: dict[str, Any]
    """Every settable `PPOConfig` field (JSON values; callables by importable name)."""

    def to_json(self) -> dict[str, Any]:
        """The JSON object stored as config.json."""
        return {
            "format": FORMAT,
            "env": self.env,
            "env_kwargs": self.env_kwargs,
            "imports": list(self.imports),
            "ppo": self.ppo,
        }

    @classmethod
    def from_json(cls, data: Any, where: str) -> RunSpec:
        """Parse config.json contents; `where` names the file in errors."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise UsageError(f"{where}: not a brax-train run configuration (format {FORMAT!r})")
        try:
            env, env_kwargs, imports, ppo = data["env"], data["env_kwargs"], data["imports"], data["ppo"]
        except KeyError as e:
            raise UsageError(f"{where}: missing key {e.args[0]!r}") from None
        if not (isinstance(env, str) and isinstance(env_kwargs, dict) and isinstance(ppo, dict)):
            raise UsageError(f"{where}: env must be a string, env_kwargs and ppo objects")
        if not isinstance(imports, list) or not all(isinstance(i, str) for i in imports):
            raise UsageError(f"{where}: imports must be a list of strings")
        return cls(env=env, env_kwargs=env_kwargs, imports=tuple(imports), ppo=ppo)


def _coerce(key: str, value: Any) -> Any:
    """Integral floats (`1e6` in JSON or TOML) become ints for integer settings."""
    field = _ppo_fields().get(key)
    if field is None:
        return value
    kind = str(field.type)
    if isinstance(value, float) and value.is_integer() and kind.startswith("int") and "float" not in kind:
        return int(value)
    return value


def _unknown(key: str, source: str) -> UsageError:
    candidates = [*settable_keys(), "env", "backend", "import"]
    close = difflib.get_close_matches(key, candidates, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return UsageError(
        f"{source}: unknown key {key!r}{hint}; accepted: ppo.train keywords (see PPOConfig), "
        "env.<kwarg>, network_factory.<kwarg>"
    )


def load_config_file(path: str) -> list[tuple[str, Any]]:
    """(key, value) items of a .json or .toml settings file, nested tables flattened to dotted keys."""
    p = pathlib.Path(path)
    suffix = p.suffix.lower()
    if suffix not in (".json", ".toml"):
        raise UsageError(f"--config: expected a .json or .toml file, got {path!r}")
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise UsageError(f"--config: cannot read {path!r}: {e.strerror or e}") from None
    try:
        data = json.loads(raw) if suffix == ".json" else tomllib.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise UsageError(
            f"--config: {path!r} is not valid {suffix[1:].upper()}: {one_line(str(e))}"
        ) from None
    if not isinstance(data, dict):
        raise UsageError(f"--config: {path!r} must hold an object of settings")
    items: list[tuple[str, Any]] = []
    for key, value in data.items():
        if key in ("env", "network_factory") and isinstance(value, dict):
            # A table of options; `network_factory` stays one mapping value (Playground style).
            if key == "network_factory":
                items.append((key, value))
            else:
                items.extend((f"env.{k}", v) for k, v in value.items())
        else:
            items.append((str(key), value))
    return items


def import_module(spec: str, flag: str = "--import") -> None:
    """Import a dotted module name, or a .py file by path (its directory goes first on sys.path)."""
    try:
        if spec.endswith(".py") or os.sep in spec:
            path = pathlib.Path(spec).absolute()
            if not path.is_file():
                raise UsageError(f"{flag}: no such file {spec!r}")
            name = path.stem
            if name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(path):
                return
            module_spec = importlib.util.spec_from_file_location(name, path)
            if module_spec is None or module_spec.loader is None:
                raise UsageError(f"{flag}: cannot import {spec!r}")
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[name] = module
            module_spec.loader.exec_module(module)
        else:
            # Like `python -m`: modules in the working directory are importable.
            if "" not in sys.path and os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            importlib.import_module(spec)
    except UsageError:
        raise
    except Exception as e:  # any failure of user code is a bad --import argument
        raise UsageError(f"{flag}: cannot import {spec!r}: {type(e).__name__}: {one_line(str(e))}") from None


def canonical_import(spec: str) -> str:
    """How an import is recorded in config.json: .py paths made absolute, module names as given."""
    if spec.endswith(".py") or os.sep in spec:
        return str(pathlib.Path(spec).absolute())
    return spec


def check_env(name: str, flag: str = "--env") -> None:
    """Raise `UsageError` listing the registered names unless `name` is registered."""
    import brax_envs

    names = brax_envs.registered_environments()
    if name not in names:
        close = difflib.get_close_matches(name, names, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UsageError(f"{flag}: unknown environment {name!r}{hint}; accepted: {', '.join(names)}")


def resolve(
    env: str | None,
    backend: str | None,
    config_file: str | None,
    settings: Sequence[tuple[str, Any]],
    imports: Iterable[str],
    flags: Mapping[str, Any],
) -> RunSpec:
    """The run's settings: env defaults < config file < `--set` items < flags (those not None)."""
    file_items = load_config_file(config_file) if config_file else []
    file_env = None
    file_imports: list[str] = []
    rest: list[tuple[str, Any, str]] = []
    for key, value in file_items:
        if key in ("env", "env.name"):
            if not isinstance(value, str):
                raise UsageError(f"--config {config_file}: env must be an environment name, got {value!r}")
            file_env = value
        elif key in ("import", "imports"):
            values = [value] if isinstance(value, str) else value
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise UsageError(f"--config {config_file}: import must be a module name or a list of them")
            file_imports.extend(values)
        else:
            rest.append((key, value, f"--config {config_file}"))
    for key, value in settings:
        if key in ("env", "env.name"):
            raise UsageError(f"--set {key}: choose the environment with --env NAME")
        if key in ("import", "imports"):
            raise UsageError(f"--set {key}: use --import MODULE")
        rest.append((key, value, "--set"))

    all_imports = tuple(dict.fromkeys(canonical_import(i) for i in [*file_imports, *imports]))
    for module in all_imports:
        import_module(module)
    name = env or file_env or DEFAULT_ENV
    check_env(name)

    ppo = _defaults.defaults_for(name)
    env_kwargs: dict[str, Any] = {}
    settable = set(settable_keys())
    for key, value, source in rest:
        if key.startswith("env.") and len(key) > 4:
            env_kwargs[key[4:]] = value
        elif key == "backend":
            env_kwargs["backend"] = value
        elif key.startswith("network_factory.") and len(key) > 16:
            nf = ppo.get("network_factory")
            if not isinstance(nf, dict):
                nf = {}
            nf[key.removeprefix("network_factory.")] = value
            ppo["network_factory"] = nf
        elif key in NOT_SETTABLE:
            raise UsageError(f"{source} {key}: cannot be set from the command line ({NOT_SETTABLE[key]})")
        elif key in settable:
            ppo[key] = _coerce(key, value)
        else:
            raise _unknown(key, source)
    if backend is not None:
        env_kwargs["backend"] = backend
    for key, value in flags.items():
        if value is not None:
            ppo[key] = value
    spec = RunSpec(env=name, env_kwargs=env_kwargs, imports=all_imports, ppo=ppo)
    check_ppo(spec)
    return spec


def ppo_kwargs(ppo: Mapping[str, Any]) -> dict[str, Any]:
    """`ppo.train` keywords from a `RunSpec.ppo` mapping (named callables resolved)."""
    from brax_train import networks

    out = dict(ppo)
    nf = out.get("network_factory")
    try:
        if isinstance(nf, str):
            out["network_factory"] = networks.resolve_name(nf)
        elif isinstance(nf, Mapping):
            resolved = dict(nf)
            for k in _NAMED_CALLABLE_KEYS:
                if isinstance(resolved.get(k), str):
                    resolved[k] = networks.resolve_name(resolved[k])
            out["network_factory"] = resolved
    except (ImportError, AttributeError, ValueError) as e:
        raise UsageError(f"network_factory: cannot resolve {one_line(str(e))}") from None
    return out


def check_ppo(spec: RunSpec) -> None:
    """Validate the PPO settings as `ppo.train` will (same device count), as a one-line `UsageError`."""
    import jax

    from brax_train.ppo import config as ppo_config

    kwargs = ppo_kwargs(spec.ppo)
    try:
        c = ppo_config.merge(None, kwargs)
        local = len(jax.local_devices())
        n_dev = (
            min(local, c.max_devices_per_host or local) if isinstance(c.max_devices_per_host, int) else local
        )
        ppo_config.validate(c, max(n_dev, 1))
    except ppo_config.PPOConfigError as e:
        raise UsageError(one_line(str(e))) from None
    except TypeError as e:  # a value of the wrong kind that the dataclass itself rejects
        raise UsageError(f"invalid PPO settings: {one_line(str(e))}") from None
    nf = kwargs.get("network_factory")
    if not (callable(nf) or isinstance(nf, Mapping)):
        raise UsageError(
            "network_factory: expected a table of make_ppo_networks keywords or an importable name, "
            f"got {nf!r}"
        )
    bad = [k for k, v in spec.ppo.items() if not _jsonable(v)]
    if bad:
        raise UsageError(f"settings {', '.join(bad)}: values must be plain JSON values")


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


__all__ = [
    "FORMAT",
    "NOT_SETTABLE",
    "RunSpec",
    "canonical_import",
    "check_env",
    "check_ppo",
    "import_module",
    "load_config_file",
    "ppo_kwargs",
    "resolve",
    "settable_keys",
]
