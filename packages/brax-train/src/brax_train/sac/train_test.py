"""End-to-end tests of `sac.train` on the `fast` environment (2 forced CPU devices by default)."""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import subprocess
import sys
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp  # type: ignore[import-untyped]
import pytest

from brax_train import _testing, checkpoint, networks
from brax_train._testing import Untouchable, fast, leaves_equal
from brax_train.sac import (
    NonFiniteError,
    SACConfig,
    SACConfigError,
    SACNetworks,
    SACParams,
    make_sac_networks,
    policy_from_checkpoint,
    train,
)

NUM_ENVS = 8
STEP = NUM_ENVS  # env steps per training step
BASE: dict[str, Any] = dict(
    episode_length=3,  # episodes hit the time limit every third step: truncated transitions in the buffer
    num_envs=NUM_ENVS,
    batch_size=16,
    grad_updates_per_step=2,
    min_replay_size=2 * NUM_ENVS - 1,  # rounded up to two prefill steps
    max_replay_size=5 * NUM_ENVS,  # five rows: the ring wraps within the runs below
    learning_rate=3e-3,
    discounting=0.95,
    reward_scaling=2.0,
    normalize_observations=True,
    network_factory={"hidden_layer_sizes": (8,)},
    run_evals=False,
    num_evals=5,  # a checkpoint every 2 training steps of 8
)


def train_state(step_dir: pathlib.Path) -> Any:
    """A checkpoint step's whole training state, as saved (nested dicts of numpy arrays)."""
    return ocp.StandardCheckpointer().restore(step_dir / "train_state")


# ---- validation ---------------------------------------------------------------------------------------


def test_validation_names_every_bad_setting_before_anything_runs(tmp_path: pathlib.Path) -> None:
    with pytest.raises(SACConfigError) as e:
        train(
            Untouchable(),
            num_timesteps=1000,
            episode_length=10,
            num_envs=3,
            batch_size=5,
            max_replay_size=4,
            min_replay_size=6,
            tau=1.5,
            discounting=-0.1,
            checkpoint_logdir=tmp_path,
            save_checkpoint_path=tmp_path,
        )
    msg = str(e.value)
    assert isinstance(e.value, ValueError)
    for part in (
        "num_envs (3) must be divisible by the number of devices used (2",
        "batch_size (5) must be divisible by the number of devices used (2)",
        "max_replay_size = 4 must be >= batch_size (5)",
        "min_replay_size (6) must be <= max_replay_size = 4",
        "tau must be a number in [0, 1], got 1.5",
        "discounting must be a number in [0, 1], got -0.1",
        "checkpoint_logdir and save_checkpoint_path",
    ):
        assert part in msg, (part, msg)
    with pytest.raises(
        SACConfigError, match=r"max_replay_size \(None: num_timesteps\) = 100 must be >= batch_size"
    ):
        train(Untouchable(), num_timesteps=100, episode_length=10, num_envs=2, batch_size=256)
    with pytest.raises(SACConfigError, match=r"max_replay_size = 6 must be >= num_envs \(8\)"):
        train(
            Untouchable(), num_timesteps=100, episode_length=10, num_envs=8, batch_size=4, max_replay_size=6
        )
    with pytest.raises(SACConfigError, match=r"min_replay_size \(100\) must be below num_timesteps \(100\)"):
        train(
            Untouchable(), num_timesteps=100, episode_length=10, num_envs=2, batch_size=2, min_replay_size=100
        )
    with pytest.raises(SACConfigError, match="did you mean 'grad_updates_per_step'"):
        train(Untouchable(), num_timesteps=100, grad_update_per_step=2)
    with pytest.raises(SACConfigError, match="episode_length is required"):
        train(Untouchable(), num_timesteps=100, num_envs=2, batch_size=2)
    with pytest.raises(SACConfigError, match=r"'batch_size'.*both"):
        train(Untouchable(), config=SACConfig(batch_size=8), batch_size=16)


# ---- a run, its checkpoints, exact resume -------------------------------------------------------------


def _nearly_constant_policy(
    observation_size: Any, action_size: int, preprocess_observations_fn: Any
) -> SACNetworks:
    """Q networks as usual; a policy that always acts 0 (std 0.001), so any spread comes from prefill."""
    base = make_sac_networks(
        observation_size, action_size, preprocess_observations_fn, hidden_layer_sizes=(8,)
    )
    bias = jnp.asarray([0.0] * action_size + [-30.0] * action_size, jnp.float32)

    def apply(normalizer: Any, p: Any, obs: jax.Array) -> jax.Array:
        del normalizer
        return jnp.broadcast_to(p["bias"], (*obs.shape[:-1], 2 * action_size))

    policy = networks.FeedForwardNetwork(init=lambda key: {"bias": bias}, apply=apply)
    return dataclasses.replace(base, policy_network=policy, description={})


PREFILL_ENVS = 128
PREFILL_NAN: dict[str, Any] = {
    **BASE,
    "network_factory": _nearly_constant_policy,
    "num_envs": PREFILL_ENVS,
    "min_replay_size": 2 * PREFILL_ENVS,  # two training steps of uniform actions
    "max_replay_size": 4 * PREFILL_ENVS,
    "num_evals": 5,  # a checkpoint after every training step (of the four)
    "learning_rate": float("nan"),  # any gradient step makes the parameters NaN
    "num_timesteps": 4 * PREFILL_ENVS,
}


def _child_main(run_settings: str, nan_dir: str) -> None:
    """The child process's runs (meanwhile, on the other core): `run_settings` on one device, and the
    prefill / NaN-guard run of `PREFILL_NAN` saving into `nan_dir`; prints their results as JSON."""
    jax.config.update("jax_numpy_dtype_promotion", "strict")
    jax.config.update("jax_numpy_rank_promotion", "raise")
    jax.config.update("jax_default_matmul_precision", "highest")
    _, params, _ = train(fast(), **json.loads(run_settings), max_devices_per_host=1)
    out: dict[str, Any] = {
        "one_device": [np.asarray(x, np.float64).ravel().tolist() for x in jax.tree.leaves(params)]
    }
    try:
        train(fast(), **PREFILL_NAN, save_checkpoint_path=nan_dir)
        out["nan"] = None
    except NonFiniteError as e:
        out["nan"] = {"step": e.step, "quantity": e.quantity, "message": str(e)}
    print("RESULT" + json.dumps(out))


CHILD = (
    "import importlib.util, sys; "
    "spec = importlib.util.spec_from_file_location('sac_train_test_child', sys.argv[1]); "
    "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module); "
    "module._child_main(*sys.argv[2:])"
)


def start_child(run_settings: dict[str, Any], nan_dir: pathlib.Path) -> subprocess.Popen[str]:
    """`_child_main` in a child process with 2 forced CPU devices (it runs while the caller trains)."""
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, __file__, json.dumps(run_settings), os.fspath(nan_dir)],
        env=_testing.forced_devices_env(2),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One run to 8 training steps (checkpoints every 2), one resumed from its step-4 checkpoint; in a
    child process meanwhile, the first run on one device and the prefill / NaN-guard run."""
    assert jax.local_device_count() == 2, "the root conftest forces 2 CPU devices"
    root = tmp_path_factory.mktemp("sac")
    child = start_child({**BASE, "num_timesteps": 8 * STEP}, root / "nan")
    full, progress, snapshots = _testing.recorded(
        train,
        fast(),
        **BASE,
        num_timesteps=8 * STEP,
        checkpoint_logdir=root / "full",  # Brax's name of save_checkpoint_path
    )
    resumed = train(
        fast(),
        **BASE,
        num_timesteps=8 * STEP,
        restore_checkpoint_path=root / "full" / str(4 * STEP),
        save_checkpoint_path=root / "resumed",
    )
    stdout, stderr = child.communicate(timeout=600)
    assert child.returncode == 0, stderr[-4000:]
    return {
        "root": root,
        "full": full,
        "resumed": resumed,
        "progress": progress,
        "snapshots": snapshots,
        **_testing.result_line(stdout),
    }


def test_resume_is_bit_exact_including_the_replay_buffer(runs: dict[str, Any]) -> None:
    root = runs["root"]
    assert leaves_equal(runs["resumed"].params, runs["full"].params)
    full, resumed = train_state(root / "full" / str(8 * STEP)), train_state(root / "resumed" / str(8 * STEP))
    assert leaves_equal(full, resumed)  # buffer, optimizers, temperature, normalizer, RNG key, envs
    half = train_state(root / "full" / str(4 * STEP))
    assert not leaves_equal(
        half["agent_state"]["learner"]["policy_params"], full["agent_state"]["learner"]["policy_params"]
    )
    assert not np.array_equal(
        half["agent_state"]["buffer"]["data"]["action"], full["agent_state"]["buffer"]["data"]["action"]
    )
    buf = full["agent_state"]["buffer"]
    assert int(buf["size"]) == 5 and int(buf["insert_position"]) == 8 % 5  # the ring wrapped
    assert buf["data"]["observation"].shape == (5, NUM_ENVS, 2)
    assert np.any(buf["data"]["extras"]["state_extras"]["truncation"] == 1.0)


def test_prefill_takes_no_gradient_steps(runs: dict[str, Any]) -> None:
    init = runs["snapshots"][0][2]  # policy_params_fn at step 0: the initial parameters
    prefilled = train_state(runs["root"] / "full" / str(2 * STEP))["agent_state"]
    assert leaves_equal(prefilled["learner"]["policy_params"], init.policy)
    assert leaves_equal(prefilled["learner"]["q_params"], prefilled["learner"]["target_q_params"])
    assert int(prefilled["buffer"]["size"]) == 2
    assert not leaves_equal(prefilled["normalizer"]["mean"], init.normalizer.mean)  # statistics do update
    metrics = dict(runs["progress"])
    assert metrics[2 * STEP]["training/critic_loss"] == 0.0  # no gradient step yet
    assert metrics[4 * STEP]["training/critic_loss"] > 0.0
    assert metrics[4 * STEP]["training/buffer_current_size"] == (3 + 4) / 2 * NUM_ENVS  # window mean


def test_callbacks_and_training_metrics(runs: dict[str, Any]) -> None:
    assert [s for s, _ in runs["progress"]] == [2 * STEP, 4 * STEP, 6 * STEP, 8 * STEP]
    last = runs["progress"][-1][1]
    for key in (
        "training/actor_loss",
        "training/alpha",
        "training/alpha_loss",
        "training/sps",
        "episode/count",
    ):
        assert key in last
    ended = [m for _, m in runs["progress"] if m["episode/count"] > 0]  # episodes end every third step
    assert ended and all(m["episode/length"] == 3.0 for m in ended)
    assert runs["full"].metrics == last
    snaps = runs["snapshots"]
    assert [s for s, _, _ in snaps] == [0, 2 * STEP, 4 * STEP, 6 * STEP, 8 * STEP]
    for _, make_policy, params in snaps:
        assert isinstance(params, SACParams)
        make_policy(params, deterministic=True)(jnp.zeros((2,), jnp.float32), jax.random.PRNGKey(0))
    assert leaves_equal(snaps[-1][2], runs["full"].params)


def test_policy_from_checkpoint_gives_the_same_actions(runs: dict[str, Any]) -> None:
    step_dir = checkpoint.resolve(runs["root"] / "full")
    assert step_dir.name == str(8 * STEP)
    meta = checkpoint.read_meta(step_dir)
    assert meta["agent"] == "sac" and meta["network"]["recordable"]
    make_policy, params = policy_from_checkpoint(step_dir, meta)
    trained = runs["full"]
    assert isinstance(params, SACParams) and leaves_equal(params, trained.params)
    obs = jax.random.normal(jax.random.PRNGKey(1), (7, 2))
    for deterministic in (True, False):
        expected, _ = trained.make_policy(trained.params, deterministic=deterministic)(
            obs, jax.random.PRNGKey(5)
        )
        got, _ = make_policy(params, deterministic=deterministic)(obs, jax.random.PRNGKey(5))
        np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))


def test_two_devices_agree_with_one(runs: dict[str, Any]) -> None:
    # The same batches are drawn on any device count; only the order of cross-device sums differs,
    # which moves parameters by float32 rounding: the tolerance leaves a wide margin.
    two = [np.asarray(x, np.float64).ravel() for x in jax.tree.leaves(runs["full"].params)]
    one = [np.asarray(x) for x in runs["one_device"]]
    assert len(one) == len(two)
    for a, b in zip(one, two, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


# ---- exploration while prefilling, the NaN guard (run by the child process) ------------------------------


def test_prefill_acts_uniformly_and_the_nan_guard_fires_at_the_first_gradient_step(
    runs: dict[str, Any],
) -> None:
    n, nan_dir = PREFILL_ENVS, runs["root"] / "nan"
    # two prefill steps without gradient steps, then the first gradient step trips the guard
    assert runs["nan"] is not None, "the NaN guard did not fire"
    assert runs["nan"]["quantity"] == "parameters" and runs["nan"]["step"] == 3 * n
    message = runs["nan"]["message"]
    assert f"env step {3 * n}" in message and str(nan_dir / str(2 * n)) in message
    actions = train_state(nan_dir / str(2 * n))["agent_state"]["buffer"]["data"]["action"]
    prefill = actions[:2].ravel()
    # uniform on [-1, 1], not the policy's near-zero actions: standard deviation 1/sqrt(3), a quarter in
    # each quarter of the interval
    assert np.all(np.abs(prefill) <= 1.0) and 0.5 < np.std(prefill) < 0.66
    quarters = np.histogram(prefill, bins=4, range=(-1.0, 1.0))[0]
    assert np.all(np.abs(quarters - prefill.size / 4) < 0.4 * prefill.size / 4), quarters
    assert np.all(actions[2:] == 0.0)  # not written yet
