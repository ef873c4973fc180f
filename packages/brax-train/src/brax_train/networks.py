"""Feed-forward networks (flax linen MLPs) and recording callables by importable name.

Activations and initializers are recorded in checkpoints as dotted names such as `jax.nn.tanh` or
`jax.nn.initializers.lecun_uniform`, so a policy can be rebuilt from a checkpoint alone.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import json
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar, cast

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen

from brax_train import running_statistics
from brax_train.distribution import NormalTanhDistribution
from brax_train.types import PRNGKey

ActivationFn = Callable[[jax.Array], jax.Array]
"""An elementwise activation function."""
Initializer = Callable[..., jax.Array]
"""A flax/jax initializer `init(key, shape, dtype)`."""

# Public namespaces searched (in order) for the name of a callable.
_NAMESPACES = (
    "jax.nn",
    "jax.nn.initializers",
    "jax.numpy",
    "jax.lax",
    "flax.linen",
    "flax.linen.initializers",
)


def callable_name(fn: Any) -> str | None:
    """An importable dotted name `module.attr` that resolves to `fn` itself, or None.

    Public namespaces (`jax.nn`, `jax.nn.initializers`, `jax.numpy`, `jax.lax`, `flax.linen`) are
    searched first, then `fn.__module__ + '.' + fn.__qualname__`. Lambdas, closures and
    `functools.partial` objects have no such name.
    """
    for ns in _NAMESPACES:
        mod = importlib.import_module(ns)
        for attr in sorted(vars(mod)):
            if not attr.startswith("_") and vars(mod)[attr] is fn:
                return f"{ns}.{attr}"
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str) and "<" not in qualname:
        name = f"{module}.{qualname}"
        try:
            if resolve_name(name) is fn:
                return name
        except (ImportError, AttributeError):
            return None
    return None


def resolve_name(name: str) -> Any:
    """The object a dotted name `pkg.module.attr[.attr]` refers to (inverse of `callable_name`)."""
    parts = name.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(f"cannot import {name!r}")


class MLP(linen.Module):
    """Dense layers `hidden_0..hidden_{n-1}` with `activation` between them (not after the last)."""

    layer_sizes: Sequence[int]
    """Output width of every layer; the last one is the output size."""
    activation: ActivationFn = jax.nn.relu
    """Applied after every layer but the last (and after the last with `activate_final`)."""
    kernel_init: Initializer = jax.nn.initializers.lecun_uniform()
    """Kernel initializer of every layer."""
    activate_final: bool = False
    """Also apply the activation after the last layer."""
    bias: bool = True
    """Use biases."""
    layer_norm: bool = False
    """LayerNorm after every hidden activation."""

    @linen.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        """Apply the MLP to `x` (..., in)."""
        for i, size in enumerate(self.layer_sizes):
            x = linen.Dense(size, name=f"hidden_{i}", kernel_init=self.kernel_init, use_bias=self.bias)(x)
            if i < len(self.layer_sizes) - 1 or self.activate_final:
                x = self.activation(x)
                if self.layer_norm:
                    x = linen.LayerNorm()(x)
        return x


@dataclasses.dataclass(frozen=True)
class FeedForwardNetwork:
    """A network as a pair of pure functions."""

    init: Callable[[PRNGKey], Any]
    """`init(key) -> params`."""
    apply: Callable[..., jax.Array]
    """`apply(normalizer_params, params, obs) -> output`."""


@dataclasses.dataclass(frozen=True)
class Recorded:
    """Networks carrying the JSON recipe their factory recorded (`Recipe.record`), as checkpoints store it."""

    description: dict[str, Any] = dataclasses.field(default_factory=dict, kw_only=True)
    """JSON-able recipe to rebuild these networks (see their factory); empty when unknown."""


@dataclasses.dataclass(frozen=True)
class TanhGaussianPolicyNetworks(Recorded):
    """A policy network and its tanh-Gaussian action distribution (APG's and BC's networks)."""

    policy_network: FeedForwardNetwork
    """Observations -> distribution parameters `[loc, raw_scale]`."""
    parametric_action_distribution: NormalTanhDistribution
    """Maps policy outputs to actions (`loc` and `scale`, reparameterized samples)."""


def observation_shapes(obs_size: Any) -> Any:
    """Per-sample shapes of an observation size (`brax_envs.ObservationSize`; an int n is shape (n,))."""
    if isinstance(obs_size, Mapping):
        return {str(k): observation_shapes(v) for k, v in obs_size.items()}
    return (int(obs_size),) if isinstance(obs_size, int) else tuple(int(d) for d in obs_size)


def observation_size_to_json(obs_size: Any) -> Any:
    """An observation size as JSON (ints and lists)."""
    if isinstance(obs_size, Mapping):
        return {str(k): observation_size_to_json(v) for k, v in obs_size.items()}
    return int(obs_size) if isinstance(obs_size, int) else [int(d) for d in obs_size]


def observation_size_from_json(value: Any) -> Any:
    """The observation size `observation_size_to_json` wrote (`brax_envs.ObservationSize`)."""
    if isinstance(value, Mapping):
        return {str(k): v if isinstance(v, int) else tuple(v) for k, v in value.items()}
    if isinstance(value, int):
        return value
    shape = tuple(int(d) for d in value)
    return shape[0] if len(shape) == 1 else shape


def observation_feature_size(obs_size: Any, obs_key: str) -> int:
    """Length of the (last axis of the) observation entry a network reads."""
    if isinstance(obs_size, Mapping):
        if obs_key not in obs_size:
            raise KeyError(f"observation key {obs_key!r} not in the observation's keys {sorted(obs_size)}")
        obs_size = obs_size[obs_key]
    if isinstance(obs_size, int):
        return obs_size
    shape = tuple(obs_size)
    if not shape:
        raise ValueError("observations must have at least one axis")
    return int(shape[-1])


PreprocessObservationFn = Callable[[Any, Any], Any]
"""`fn(obs, normalizer_params) -> obs`, e.g. `running_statistics.normalize` or the identity."""


def identity_observation_preprocessor(obs: Any, normalizer_params: Any) -> Any:
    """Return observations unchanged."""
    del normalizer_params
    return obs


def preprocessor(normalize: bool) -> PreprocessObservationFn:
    """`running_statistics.normalize` when `normalize`, else the identity."""
    return running_statistics.normalize if normalize else identity_observation_preprocessor


_REBUILD_HINT = "pass network_factory= to load_policy"


def record_callable(fn: Any, what: str, notes: list[str]) -> str | None:
    """`fn`'s importable name for a network description (None for None); notes an unnameable one."""
    if fn is None:
        return None
    name = callable_name(fn)
    if name is None:
        notes.append(f"{what}={fn!r} has no importable name; {_REBUILD_HINT}")
    return name


def record_value(value: Any, what: str, notes: list[str]) -> Any:
    """`value` for a network description if it is JSON-serializable, else None with a note."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        notes.append(f"{what}={value!r} is not JSON-serializable; {_REBUILD_HINT}")
        return None
    return value


def records_normalizer(preprocess: Any, notes: list[str]) -> bool:
    """Whether `preprocess` is the running-statistics normalizer (noting any other than the identity)."""
    if preprocess is running_statistics.normalize:
        return True
    if preprocess is not identity_observation_preprocessor:
        notes.append(
            f"preprocess_observations_fn={preprocess!r} is neither running_statistics.normalize nor the "
            f"identity; {_REBUILD_HINT}"
        )
    return False


_Built = TypeVar("_Built")


def factory(
    network_factory: Callable[..., _Built] | Mapping[str, Any], default: Callable[..., _Built]
) -> Callable[..., _Built]:
    """A config's `network_factory`: a callable as given, or a mapping of keywords bound to `default`
    (JSON lists as tuples)."""
    if isinstance(network_factory, Mapping):
        kw = {k: tuple(v) if isinstance(v, list) else v for k, v in network_factory.items()}
        return functools.partial(default, **kw)
    return network_factory


def tanh_gaussian_policy(
    dist: Any, policy_network: FeedForwardNetwork, check_params: Callable[[Any], Any]
) -> Callable[..., Any]:
    """`make_policy(params, deterministic=False)` for a tanh-squashed Gaussian policy (SAC's, APG's):
    samples `dist.sample(logits, key)`, deterministic `dist.mode(logits)`, empty extras."""

    def make_policy(params: Any, deterministic: bool = False) -> Callable[..., Any]:
        p = check_params(params)

        def policy(obs: Any, key: PRNGKey) -> tuple[jax.Array, dict[str, Any]]:
            logits = policy_network.apply(p.normalizer, p.policy, obs)
            if deterministic:
                return dist.mode(logits), {}
            return dist.sample(logits, key), {}

        return policy

    return make_policy


def deterministic_policy(
    act: Callable[[Any, Any, Any], jax.Array], check_params: Callable[[Any], Any]
) -> Callable[..., Any]:
    """`make_policy(params, deterministic=False)` for a deterministic policy (ES's, ARS's): actions
    `act(normalizer, policy_params, obs)` whatever `deterministic` says, empty extras."""

    def make_policy(params: Any, deterministic: bool = False) -> Callable[..., Any]:
        del deterministic  # the policy is deterministic either way
        p = check_params(params)

        def policy(obs: Any, key: PRNGKey) -> tuple[jax.Array, dict[str, Any]]:
            del key
            return act(p.normalizer, p.policy, obs), {}

        return policy

    return make_policy


def describe(
    factory: str,
    observation_size: Any,
    action_size: int,
    kwargs: dict[str, Any],
    normalize: bool,
    notes: list[str],
) -> dict[str, Any]:
    """A network description as checkpoints store it: `factory`'s importable name and JSON keywords."""
    sizes = {"observation_size": observation_size_to_json(observation_size), "action_size": int(action_size)}
    return {
        "factory": factory,
        "kwargs": {**sizes, **kwargs},
        "normalize_observations": normalize,
        "recordable": not notes,
        "notes": notes,
    }


class PolicyParams(NamedTuple):
    """A feed-forward policy's parameters: observation statistics and the policy network's variables.

    Each agent names its own subclass (`apg.APGParams`, ...); a NamedTuple, so Brax-style indexing
    (`params[0]` normalizer, `params[1]` policy) keeps working.
    """

    normalizer: running_statistics.RunningStatisticsState
    """Observation running statistics (used only when observations are normalized)."""
    policy: Any
    """Policy network parameters (flax variables dict)."""


_Pair = TypeVar("_Pair", bound=tuple[Any, ...])


def pair_params(params: Any, cls: type[_Pair], agent: str) -> _Pair:
    """`params` as `cls`, a `(normalizer, policy)` NamedTuple (a Brax-style pair converts), else TypeError."""
    expected = (
        f"{cls.__name__}(normalizer: running_statistics.RunningStatisticsState, policy: params) or a "
        f"Brax-style (normalizer, policy) tuple, as returned by {agent}.train or given to policy_params_fn"
    )
    if not isinstance(params, tuple) or len(params) != 2:
        raise TypeError(f"make_policy expects {expected}; got {type(params).__name__}")
    if not isinstance(params[0], running_statistics.RunningStatisticsState):
        raise TypeError(f"make_policy expects {expected}; got normalizer of type {type(params[0]).__name__}")
    return params if isinstance(params, cls) else cls(*params)  # type: ignore[call-arg]


def description_kwargs(
    description: Mapping[str, Any], callables: Sequence[str] = (), sequences: Sequence[str] = ()
) -> dict[str, Any]:
    """The factory keywords of a recorded network description, names resolved, for rebuilding.

    Raises `ValueError` with the recorded notes when the description is not recordable. Keywords
    named in `callables` are resolved by name (dropped when None), those in `sequences` become
    tuples, and `observation_size` keeps its recorded kind (an int stays an int, a shape a shape).
    Adds `preprocess_observations_fn` from the recorded `normalize_observations`.
    """
    if not description.get("recordable", False):
        notes = "; ".join(description.get("notes", [])) or "no network description was recorded"
        raise ValueError(f"the networks cannot be rebuilt from their description: {notes}")
    kw = dict(description["kwargs"])
    obs = kw["observation_size"]
    kw["observation_size"] = obs if isinstance(obs, int) else observation_shapes(obs)
    for name in callables:
        if kw.get(name) is not None:
            kw[name] = resolve_name(kw[name])
        else:
            kw.pop(name, None)
    for name in sequences:
        kw[name] = tuple(kw[name])
    kw["preprocess_observations_fn"] = preprocessor(bool(description.get("normalize_observations")))
    return kw


def description_of(nets: Any) -> dict[str, Any]:
    """`nets.description`, or an unrecordable one for networks a custom factory made without it."""
    description: dict[str, Any] | None = getattr(nets, "description", None)
    if description:
        return description
    note = f"a network_factory whose networks carry no description; {_REBUILD_HINT}"
    return {"recordable": False, "notes": [note]}


_Factory = TypeVar("_Factory", bound=Callable[..., Any])
_Nets = TypeVar("_Nets")


def _plain(value: Any) -> Any:
    """A numpy/JAX scalar as the Python bool, int or float it holds; anything else as is."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return value


@dataclasses.dataclass(frozen=True)
class Recipe:
    """How a network factory's call is recorded in its networks' `description` and rebuilt from it.

    Decorating `make_X_networks(observation_size, action_size, preprocess_observations_fn, **kw)`
    with `record` gives its result (a dataclass with a `description` field) a description of the
    call: the factory's importable name and every keyword, callables by importable name, sequences
    as lists of ints, mappings as JSON objects, other values as JSON; `rebuild` calls the factory
    again from such a description.
    """

    callables: tuple[str, ...] = ()
    """Keywords holding callables (activations, initializers), recorded by importable name."""
    sequences: tuple[str, ...] = ()
    """Keywords holding sequences of ints (layer sizes)."""
    mappings: tuple[str, ...] = ()
    """Keywords holding an optional mapping of JSON values (None recorded as `{}`)."""
    ignored: tuple[str, ...] = ()
    """Keywords accepted for compatibility and not recorded."""

    def describe_call(self, factory: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The description of a call of `factory` (its importable name) with `arguments` (all of them)."""
        kw = dict(arguments)
        notes: list[str] = []
        observation_size, action_size = kw.pop("observation_size"), kw.pop("action_size")
        normalize = records_normalizer(kw.pop("preprocess_observations_fn"), notes)
        recorded: dict[str, Any] = {}
        for name, value in kw.items():
            if name in self.ignored:
                continue
            if name in self.callables:
                recorded[name] = record_callable(value, name, notes)
            elif name in self.sequences:
                recorded[name] = [int(s) for s in value]
            elif name in self.mappings:
                recorded[name] = record_value(dict(value or {}), name, notes)
            else:
                recorded[name] = record_value(_plain(value), name, notes)
        return describe(factory, observation_size, action_size, recorded, normalize, notes)

    def record(self, factory: _Factory) -> _Factory:
        """`factory`, its result carrying the description of each call (a decorator); the call's
        `action_size` must be a positive int."""
        signature = inspect.signature(factory)
        name = f"{factory.__module__}.{factory.__qualname__}"

        @functools.wraps(factory)
        def make(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            action_size = bound.arguments["action_size"]
            if isinstance(action_size, bool) or not isinstance(action_size, int) or action_size < 1:
                raise ValueError(f"action_size must be a positive int, got {action_size!r}")
            nets = factory(*args, **kwargs)
            return dataclasses.replace(nets, description=self.describe_call(name, bound.arguments))

        return cast(_Factory, make)

    def rebuild(self, factory: Callable[..., _Nets], description: Mapping[str, Any]) -> _Nets:
        """`factory`'s networks again, from a description its `record` wrote (as checkpoints store it)."""
        return factory(**description_kwargs(description, self.callables, self.sequences))


def select_observation(
    obs: Any, normalizer_params: Any, obs_key: str, preprocess_observations_fn: PreprocessObservationFn
) -> jax.Array:
    """The preprocessed observation a network reads: `obs[obs_key]` (with its statistics) for dict ones."""
    if isinstance(obs, Mapping):
        x = obs[obs_key]
        if isinstance(normalizer_params, running_statistics.RunningStatisticsState) and isinstance(
            normalizer_params.mean, Mapping
        ):
            normalizer_params = running_statistics.select(normalizer_params, obs_key)
    else:
        x = obs
    out: jax.Array = preprocess_observations_fn(x, normalizer_params)
    return out


def make_mlp_network(
    output_size: int,
    obs_size: Any,
    *,
    hidden_layer_sizes: Sequence[int],
    activation: ActivationFn,
    kernel_init: Initializer,
    obs_key: str = "state",
    preprocess_observations_fn: PreprocessObservationFn = identity_observation_preprocessor,
    layer_norm: bool = False,
    squeeze_output: bool = False,
) -> FeedForwardNetwork:
    """An MLP from (normalized) observations to `output_size` outputs."""
    module = MLP(
        layer_sizes=[*hidden_layer_sizes, output_size],
        activation=activation,
        kernel_init=kernel_init,
        layer_norm=layer_norm,
    )
    feature_size = observation_feature_size(obs_size, obs_key)

    def init(key: PRNGKey) -> Any:
        return module.init(key, jnp.zeros((1, feature_size), jnp.float32))

    def apply(normalizer_params: Any, params: Any, obs: Any) -> jax.Array:
        x = select_observation(obs, normalizer_params, obs_key, preprocess_observations_fn)
        out = module.apply(params, x)
        assert isinstance(out, jax.Array)
        return jnp.squeeze(out, axis=-1) if squeeze_output else out

    return FeedForwardNetwork(init=init, apply=apply)


__all__ = [
    "MLP",
    "ActivationFn",
    "FeedForwardNetwork",
    "Initializer",
    "PolicyParams",
    "PreprocessObservationFn",
    "Recipe",
    "Recorded",
    "TanhGaussianPolicyNetworks",
    "callable_name",
    "describe",
    "description_kwargs",
    "description_of",
    "deterministic_policy",
    "factory",
    "identity_observation_preprocessor",
    "make_mlp_network",
    "observation_feature_size",
    "observation_shapes",
    "observation_size_from_json",
    "observation_size_to_json",
    "pair_params",
    "preprocessor",
    "record_callable",
    "record_value",
    "records_normalizer",
    "resolve_name",
    "select_observation",
    "tanh_gaussian_policy",
]
