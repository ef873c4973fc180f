"""The replay ring buffer: insert order, wrap-around, stratified sampling, per-device gathers."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding

from brax_train.runner import AXIS, P
from brax_train.sac import replay


def _row(value: float, num_envs: int) -> dict[str, np.ndarray]:
    """A row whose `obs` encodes (row value, env) as `value * 100 + env`."""
    env = np.arange(num_envs, dtype=np.float32)
    obs = np.stack([np.float32(value * 100.0) + env, -env], axis=-1)
    return {"obs": obs, "reward": np.full((num_envs,), value, np.float32)}


def test_insert_fills_then_overwrites_the_oldest_row() -> None:
    buf = replay.init(jax.eval_shape(lambda: _row(0.0, 4)), capacity=3)
    assert buf.capacity == 3 and buf.num_envs == 4
    assert buf.data["obs"].shape == (3, 4, 2) and buf.data["reward"].dtype == jnp.float32
    sizes, positions = [], []
    insert = jax.jit(replay.insert)
    for value in range(5):
        buf = insert(buf, _row(float(value), 4))
        sizes.append(int(buf.size))
        positions.append(int(buf.insert_position))
    assert sizes == [1, 2, 3, 3, 3]
    assert positions == [1, 2, 0, 1, 2]
    # rows 0 and 1 were overwritten by the 4th and 5th inserts; row 2 holds the 3rd
    np.testing.assert_array_equal(np.asarray(buf.data["reward"][:, 0]), [3.0, 4.0, 2.0])
    np.testing.assert_array_equal(np.asarray(buf.data["obs"][1, :, 0]), [400.0, 401.0, 402.0, 403.0])
    with pytest.raises(ValueError, match="at least one row"):
        replay.init(_row(0.0, 4), capacity=0)


@pytest.mark.parametrize("num_envs, batch_size", [(8, 4), (6, 6), (12, 8)])
def test_sampled_slots_stay_in_their_device_block_and_cover_envs_uniformly(
    num_envs: int, batch_size: int
) -> None:
    draw = jax.jit(replay.sample_indices, static_argnums=(2, 3))
    rows, envs = draw(jax.random.PRNGKey(0), jnp.int32(3), num_envs, (4000, batch_size))
    rows, envs = np.asarray(rows), np.asarray(envs)
    assert rows.dtype == np.int32 and rows.min() == 0 and rows.max() == 2  # only filled rows
    for devices in (1, 2):
        block = np.arange(batch_size) // (batch_size // devices)  # device of each batch slot
        assert np.all(envs // (num_envs // devices) == block[None, :])
    counts = np.bincount(envs.ravel(), minlength=num_envs)
    expected = envs.size / num_envs
    assert counts.shape == (num_envs,) and np.all(np.abs(counts - expected) < 5 * np.sqrt(expected))
    row_counts = np.bincount(rows.ravel(), minlength=3)
    assert np.all(np.abs(row_counts - rows.size / 3) < 5 * np.sqrt(rows.size / 3))


def _filled(mesh: Mesh, num_envs: int, rows: int) -> replay.ReplayBuffer:
    """A buffer of `rows + 1` rows holding `_row(0) ... _row(rows - 1)`, sharded over `mesh`."""
    filled = [_row(float(v), num_envs) for v in range(rows)]
    data = jax.tree.map(lambda *xs: np.stack([*xs, np.zeros_like(xs[0])]), *filled)  # one empty row
    buf = replay.ReplayBuffer(data=data, insert_position=jnp.int32(rows), size=jnp.int32(rows))
    split, repl = NamedSharding(mesh, P(None, AXIS)), NamedSharding(mesh, P())
    out: replay.ReplayBuffer = jax.device_put(
        buf, jax.tree.map(lambda x: split if x.ndim >= 2 else repl, buf)
    )
    return out


def test_gather_is_local_per_device_and_independent_of_the_device_count() -> None:
    assert jax.device_count() >= 2, "the root conftest forces 2 CPU devices"
    num_envs, batch = 8, 6
    key = jax.random.PRNGKey(3)
    out = {}
    for n in (1, 2):
        mesh = Mesh(np.array(jax.devices()[:n]), (AXIS,))
        buf = _filled(mesh, num_envs, rows=3)
        compiled = (
            jax.jit(lambda b, k, mesh=mesh: replay.sample(b, k, (5, batch), mesh)).lower(buf, key).compile()
        )
        out[n] = compiled(buf, key)
        if n == 2:
            hlo = compiled.as_text()
            assert (
                hlo is not None
                and "all-gather" not in hlo
                and "all-reduce" not in hlo
                and "all-to-all" not in hlo
            )
            assert out[n]["obs"].sharding.spec == P(None, AXIS)
            # each device's part of the buffer holds only its own environments
            shard = next(s for s in buf.data["obs"].addressable_shards if s.index[1].start == num_envs // 2)
            np.testing.assert_array_equal(np.asarray(shard.data)[0, :, 0], [4.0, 5.0, 6.0, 7.0])
    np.testing.assert_array_equal(np.asarray(out[1]["obs"]), np.asarray(out[2]["obs"]))
    rows, envs = replay.sample_indices(key, jnp.int32(3), num_envs, (5, batch))
    obs = np.asarray(out[2]["obs"])
    np.testing.assert_array_equal(obs[..., 0], np.asarray(rows) * 100.0 + np.asarray(envs))
    np.testing.assert_array_equal(obs[..., 1], -np.asarray(envs, np.float32))
    np.testing.assert_array_equal(np.asarray(out[2]["reward"]), np.asarray(rows, np.float32))


def test_insert_into_a_sharded_buffer_stays_local() -> None:
    mesh = Mesh(np.array(jax.devices()[:2]), (AXIS,))
    buf = _filled(mesh, 4, rows=2)
    row = jax.device_put(_row(7.0, 4), NamedSharding(mesh, P(AXIS)))
    compiled = jax.jit(lambda b, r: replay.shard(replay.insert(b, r), mesh)).lower(buf, row).compile()
    hlo = compiled.as_text()
    assert hlo is not None and "all-gather" not in hlo and "all-reduce" not in hlo
    new = compiled(buf, row)
    assert int(new.size) == 3 and int(new.insert_position) == 0
    np.testing.assert_array_equal(np.asarray(new.data["reward"][2]), [7.0] * 4)
