"""The on-device replay buffer: a ring of whole environment steps, sharded like the environments.

The buffer holds `capacity` rows; row `t` is one step of all `num_envs` environments, so every
leaf has shape (capacity, num_envs, ...) and its environment axis is split over the devices
(`runner.AXIS`) exactly as the environment batch is: each device stores the transitions of its own
environments and never sends them elsewhere. When full, a new row overwrites the oldest one.

Sampling is uniform with replacement over the filled rows and stratified over environments: slot
`j` of a batch of `B` draws its environment from `[j * num_envs / B, (j + 1) * num_envs / B)`, a
range inside the block of environments of the device that computes slot `j` (the batch is split
over devices in equal blocks). So each device gathers its share of the batch from its own part of
the buffer, and the batch is the same for any number of devices.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding

from brax_train.runner import AXIS, P, constrain
from brax_train.types import PRNGKey


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class ReplayBuffer:
    """Ring buffer state: data plus where the next row goes and how many rows are filled."""

    data: Any
    """Pytree of transitions, every leaf (capacity, num_envs, ...)."""
    insert_position: jax.Array
    """() int32 row the next insert writes."""
    size: jax.Array
    """() int32 number of filled rows (at most capacity)."""

    @property
    def capacity(self) -> int:
        """Rows the buffer holds."""
        return int(jax.tree.leaves(self.data)[0].shape[0])

    @property
    def num_envs(self) -> int:
        """Transitions per row."""
        return int(jax.tree.leaves(self.data)[0].shape[1])


def init(row: Any, capacity: int) -> ReplayBuffer:
    """An empty buffer of `capacity` rows shaped like `row` (leaves (num_envs, ...), arrays or shapes)."""
    if capacity < 1:
        raise ValueError(f"a replay buffer needs at least one row, got capacity {capacity}")
    data = jax.tree.map(lambda x: jnp.zeros((capacity, *x.shape), x.dtype), row)
    zero = jnp.zeros((), jnp.int32)
    return ReplayBuffer(data=data, insert_position=zero, size=zero)


def insert(buffer: ReplayBuffer, row: Any) -> ReplayBuffer:
    """`buffer` with `row` (leaves (num_envs, ...)) written at the insert position, over the oldest row."""
    pos = buffer.insert_position
    data = jax.tree.map(lambda d, x: jax.lax.dynamic_update_index_in_dim(d, x, pos, 0), buffer.data, row)
    capacity = buffer.capacity
    return ReplayBuffer(
        data=data,
        insert_position=(pos + 1) % capacity,
        size=jnp.minimum(buffer.size + 1, capacity),
    )


def shard(buffer: ReplayBuffer, mesh: Mesh) -> ReplayBuffer:
    """`buffer` constrained to its layout: data split over devices along the environment axis."""
    split, repl = NamedSharding(mesh, P(None, AXIS)), NamedSharding(mesh, P())
    out: ReplayBuffer = constrain(buffer, jax.tree.map(lambda x: split if x.ndim >= 2 else repl, buffer))
    return out


def sample_indices(
    key: PRNGKey, size: jax.Array, num_envs: int, shape: tuple[int, int]
) -> tuple[jax.Array, jax.Array]:
    """Rows and environments of `shape = (num_batches, batch_size)` samples, both int32.

    Rows are uniform over `[0, size)`; slot `j` of each batch draws its environment uniformly from
    `floor((j * num_envs + w) / batch_size)` with `w` uniform in `[0, num_envs)`, which is uniform over
    all environments for a random slot and stays within the slot's device block.
    """
    key_row, key_env = jax.random.split(key)
    rows = jax.random.randint(key_row, shape, 0, size, jnp.int32)
    w = jax.random.randint(key_env, shape, 0, num_envs, jnp.int32)
    slot = jnp.arange(shape[1], dtype=jnp.int32)[None, :]
    envs = (slot * jnp.int32(num_envs) + w) // jnp.int32(shape[1])
    return rows, envs


def gather(buffer: ReplayBuffer, rows: jax.Array, envs: jax.Array, mesh: Mesh) -> Any:
    """The transitions at (`rows`, `envs`), each of shape (num_batches, batch_size); leaves
    (num_batches, batch_size, ...) with the batch axis split over devices.

    Each device reads only its own part of the buffer: slot `j` must name an environment of the
    device that holds slot `j` (as `sample_indices` guarantees).
    """
    split = P(None, AXIS)

    def local(data: Any, rows: jax.Array, envs: jax.Array) -> Any:
        def take(x: jax.Array) -> jax.Array:
            first = jax.lax.axis_index(AXIS).astype(jnp.int32) * jnp.int32(x.shape[1])
            return x[rows, envs - first]

        return jax.tree.map(take, data)

    data_specs = jax.tree.map(lambda _: split, buffer.data)
    fn = jax.shard_map(local, mesh=mesh, in_specs=(data_specs, split, split), out_specs=data_specs)
    return fn(buffer.data, rows, envs)


def sample(buffer: ReplayBuffer, key: PRNGKey, shape: tuple[int, int], mesh: Mesh) -> Any:
    """`shape = (num_batches, batch_size)` transitions drawn as `sample_indices` describes."""
    rows, envs = sample_indices(key, buffer.size, buffer.num_envs, shape)
    return gather(buffer, rows, envs, mesh)


__all__ = ["ReplayBuffer", "gather", "init", "insert", "sample", "sample_indices", "shard"]
