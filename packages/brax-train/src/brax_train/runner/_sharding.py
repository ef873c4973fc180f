"""The environment and the devices: wrapping, the device axis and its shardings, per-device stepping.

The batch is sharded over devices along the environment axis (`AXIS`) with `jax.sharding`; under
`jax.distributed` the mesh spans every process's devices (`mesh_devices`).
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import brax_envs
import jax
from brax_envs import wrappers
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from brax_train.config import RunConfig
from brax_train.types import PRNGKey

logger = logging.getLogger("brax_train.runner")


AXIS = "dev"
"""Name of the device axis the environment batch is sharded over."""


def P(*axes: str | None) -> PartitionSpec:
    """A `PartitionSpec` (typed wrapper)."""
    return PartitionSpec(*axes)  # type: ignore[no-untyped-call]


def constrain(x: Any, sharding: Any) -> Any:
    """`jax.lax.with_sharding_constraint` (typed wrapper)."""
    return jax.lax.with_sharding_constraint(x, sharding)  # type: ignore[no-untyped-call]


def wrap_env(
    environment: brax_envs.Env, c: RunConfig, num_envs: int, key: PRNGKey, per_episode: bool = False
) -> brax_envs.Env:
    """Training/eval wrapping as in Brax: `randomization_fn` gets one key per environment as `rng=`.

    Once per run the keys are split from `key` here; with `per_episode` the wrappers pass each
    reset's keys instead (`key` is unused, so the once-per-run key stream is unchanged).
    """
    if not c.wrap_env:
        return environment
    randomization_fn = None
    if c.randomization_fn is not None:
        randomization_fn = (
            c.randomization_fn
            if per_episode
            else functools.partial(c.randomization_fn, rng=jax.random.split(key, num_envs))
        )
    assert c.episode_length is not None
    if c.wrap_env_fn is not None:
        env: brax_envs.Env = c.wrap_env_fn(
            environment,
            episode_length=c.episode_length,
            action_repeat=c.action_repeat,
            randomization_fn=randomization_fn,
        )
        return env
    return wrappers.wrap_for_training(
        environment,
        episode_length=c.episode_length,
        action_repeat=c.action_repeat,
        randomization_fn=randomization_fn,
        randomize_per_episode=per_episode,
        fresh_reset=c.fresh_reset,
    )


class _PerDevice(brax_envs.Wrapper):
    """The batched environment run as one program per device (`jax.shard_map` over `AXIS`).

    Under automatic partitioning, a physics step's while loops (the constraint solver's iterations)
    loop as long as any environment of the whole batch needs to, deciding that with a cross-device
    reduction every iteration; per device, each device's loops end with its own environments and
    nothing is communicated. Every state leaf is batched along axis 0 (checked when wrapping).
    """

    def __init__(self, env: brax_envs.Env, mesh: Mesh) -> None:
        super().__init__(env)
        split = P(AXIS)
        # check_vma off: a step also outputs per-environment copies of model constants (contact
        # pair data), which the replication checker cannot see as varying like their inputs.
        self._reset = jax.shard_map(env.reset, mesh=mesh, in_specs=split, out_specs=split, check_vma=False)
        self._step = jax.shard_map(
            env.step, mesh=mesh, in_specs=(split, split), out_specs=split, check_vma=False
        )

    def reset(self, rng: jax.Array) -> brax_envs.State:
        """Reset every environment, each device its own."""
        state: brax_envs.State = self._reset(rng)
        return state

    def step(self, state: brax_envs.State, action: jax.Array) -> brax_envs.State:
        """Step every environment, each device its own."""
        out: brax_envs.State = self._step(state, action)
        return out


def per_device(env: brax_envs.Env, state_shape: brax_envs.State, num_envs: int, mesh: Mesh) -> brax_envs.Env:
    """`env` (batched, `num_envs`) stepped per device when that is exact: every state leaf batched on
    axis 0 and more than one device; else `env` itself."""
    leaves = jax.tree.leaves(state_shape)
    if mesh.devices.size == 1 or not all(x.ndim >= 1 and x.shape[0] == num_envs for x in leaves):
        return env
    return _PerDevice(env, mesh)


def _env_shardings(tree: Any, num_envs: int, mesh: Mesh) -> Any:
    shard, repl = NamedSharding(mesh, P(AXIS)), NamedSharding(mesh, P())
    # Zero-size leaves (a model without contacts) leave a jitted chunk replicated whatever they
    # came in as; giving them that sharding from the start keeps the next chunk from recompiling.
    return jax.tree.map(lambda x: shard if x.ndim >= 1 and x.shape[0] == num_envs and x.size else repl, tree)


def local_devices(c: RunConfig) -> list[jax.Device]:
    """The local devices a run uses (`max_devices_per_host` caps them)."""
    local: list[jax.Device] = jax.local_devices()
    return local[: min(len(local), c.max_devices_per_host or len(local))]


def mesh_devices(c: RunConfig) -> list[jax.Device]:
    """Every process's devices a run uses, process by process (`max_devices_per_host` caps each)."""
    by_process: dict[int, list[jax.Device]] = {}
    for d in jax.devices():
        by_process.setdefault(d.process_index, []).append(d)
    cap = c.max_devices_per_host
    return [d for p in sorted(by_process) for d in by_process[p][: cap or len(by_process[p])]]


def log_devices(c: RunConfig, name: str) -> None:
    """Log the devices and processes a run of agent `name` uses."""
    devices = local_devices(c)
    logger.info(
        "brax_train.%s: matmul precision %r; %d of %d local devices (%s); %d process(es), %d devices in all",
        name,
        c.matmul_precision,
        len(devices),
        jax.local_device_count(),
        ", ".join(str(d) for d in devices),
        jax.process_count(),
        len(mesh_devices(c)),
    )
