"""`distributed` in one process (the multi-process runs are in tests-integration/multihost_test.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding

from brax_train import distributed, ppo, runner
from brax_train.cli import main


def test_one_process_is_primary_and_needs_no_watchdog() -> None:
    assert distributed.is_primary()
    distributed.watch_peers(lambda: "x")  # no-op: nobody to watch
    assert distributed._watchdog is None
    distributed.barrier("one process")  # returns at once
    distributed.settle()


def test_to_host_gathers_the_global_value() -> None:
    mesh = Mesh(np.array(jax.devices()[:2]), (runner.AXIS,))
    x = jax.device_put(jnp.arange(8.0).reshape(4, 2), NamedSharding(mesh, runner.P(runner.AXIS)))
    out = distributed.to_host({"x": x, "k": jax.random.PRNGKey(3)})
    assert isinstance(out["x"], np.ndarray) and out["x"].shape == (4, 2)
    np.testing.assert_array_equal(out["x"], np.arange(8.0).reshape(4, 2))
    np.testing.assert_array_equal(out["k"], np.asarray(jax.random.PRNGKey(3)))


def test_mesh_devices_take_each_process_capped() -> None:
    assert jax.local_device_count() == 2  # conftest.py
    assert runner.mesh_devices(ppo.PPOConfig()) == jax.devices()
    assert runner.mesh_devices(ppo.PPOConfig(max_devices_per_host=1)) == jax.devices()[:1]


def test_loss_message_names_process_and_checkpoint() -> None:
    text = distributed.describe_loss([1], "/runs/a/checkpoints/480", 21.4)
    assert text == (
        "lost process 1 of 1 (silent for 21 s); process 0 stops; "
        "last complete checkpoint: /runs/a/checkpoints/480"
    )
    assert "processes 1, 3" in distributed.describe_loss([1, 3], None, 30)
    assert distributed.describe_loss([2], None, 30).endswith("none (no checkpoint saved yet)")


def test_cli_process_flags_fail_before_training(capsys: pytest.CaptureFixture[str]) -> None:
    # jax has run computations in this process already, so jax.distributed refuses to start: the
    # error names our flags and nothing trains.
    jnp.zeros(1).block_until_ready()
    argv = ["train", "--env", "fast", "--num-processes", "2", "--process-id", "1"]
    assert main([*argv, "--coordinator-address", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert "--coordinator-address/--num-processes/--process-id: " in err
    assert "jax.distributed.initialize() must be called before" in err
