"""Tests of ARS: the top-direction update against hand values, and `ars.train` end to end on `fast`."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from brax_train import _testing, agents, checkpoint, running_statistics
from brax_train._testing import POPULATION_STEP as STEP
from brax_train._testing import assert_same_actions, fast, leaves_equal
from brax_train.ars import (
    ARSConfig,
    ARSConfigError,
    ARSParams,
    make_inference_fn,
    make_policy_network,
    policy_from_checkpoint,
    step_direction,
    top_direction_mask,
    train,
)

BASE = _testing.population_on_fast(ARSConfig, top_directions=4, step_size=0.05, exploration_noise_std=0.05)


# ---- the update ---------------------------------------------------------------------------------------

PLUS = jnp.asarray([1.0, 5.0, 2.0, 0.0])
MINUS = jnp.asarray([3.0, 0.0, 2.0, 4.0])  # max(r+, r-) = 3, 5, 2, 4: the top two are directions 1 and 3


def test_top_direction_selection() -> None:
    assert np.asarray(top_direction_mask(PLUS, MINUS, 2)).tolist() == [False, True, False, True]
    assert np.asarray(top_direction_mask(PLUS, MINUS, 4)).tolist() == [True] * 4
    # ties keep the lower index
    tied = top_direction_mask(jnp.asarray([1.0, 1.0, 1.0]), jnp.asarray([0.0, 0.0, 0.0]), 2)
    assert np.asarray(tied).tolist() == [True, True, False]


def test_step_direction_hand_values() -> None:
    noise = {"m": jnp.asarray([[1.0, 0.0], [0.0, 1.0], [7.0, 7.0], [1.0, 1.0]])}
    got = np.asarray(step_direction(noise, PLUS, MINUS, 2)["m"])
    # selected returns 5, 0 (direction 1) and 0, 4 (direction 3): std of [5, 0, 0, 4]
    sigma = math.sqrt(((5 - 2.25) ** 2 + 2 * 2.25**2 + (4 - 2.25) ** 2) / 4)
    expected = ((5 - 0) * np.asarray([0.0, 1.0]) + (0 - 4) * np.asarray([1.0, 1.0])) / (2 * sigma)
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_equal_returns_do_not_divide_by_zero() -> None:
    noise = {"m": jnp.ones((2, 3))}
    got = step_direction(noise, jnp.asarray([1.0, 1.0]), jnp.asarray([1.0, 1.0]), 1)
    np.testing.assert_array_equal(np.asarray(got["m"]), np.zeros(3))


def test_linear_policy_is_clipped_to_the_action_range() -> None:
    net = make_policy_network(3, 2, preprocess_observations_fn=running_statistics.normalize)
    assert np.asarray(net.init(jax.random.PRNGKey(0))).tolist() == [[0.0, 0.0]] * 3
    matrix = jnp.asarray([[1.0, -1.0], [0.5, 0.0], [0.0, 0.0]])
    stats = running_statistics.update(
        running_statistics.init_state((3,)), jnp.asarray([[1.0, 0, 0], [3, 0, 0]])
    )
    policy = make_inference_fn(net)(ARSParams(stats, matrix))
    action, extras = policy(jnp.asarray([[2.5, 1.0, 0.0], [2.0, 0.0, 0.0]]), jax.random.PRNGKey(0))
    # normalized with mean [2, 0, 0] and std [1, 1e-6, 1e-6] (clipped): rows [0.5, 1e6, 0] and 0
    assert extras == {}
    np.testing.assert_allclose(np.asarray(action), [[1.0, -0.5], [0.0, 0.0]])


# ---- validation ---------------------------------------------------------------------------------------


def test_validation_names_every_bad_setting() -> None:
    with pytest.raises(ARSConfigError) as e:
        train(
            fast(), number_of_directions=0, top_directions=0, step_size=float("nan"), exploration_noise_std=-1
        )
    msg = str(e.value)
    for part in (
        "number_of_directions must be an int >= 1, got 0",
        "top_directions must be an int >= 1, got 0",
        "step_size must be a number > 0, got nan",
        "exploration_noise_std must be a number > 0, got -1",
    ):
        assert part in msg
    with pytest.raises(ARSConfigError, match="did you mean 'number_of_directions'"):
        train(fast(), number_of_direction=8)
    with pytest.raises(ARSConfigError, match=r"num_envs \(3\) is not a setting of ars.train"):
        train(fast(), num_envs=3)


def test_config_defaults_are_braxs() -> None:
    c = ARSConfig()
    assert (c.num_timesteps, c.episode_length, c.number_of_directions, c.top_directions) == (
        100,
        1000,
        60,
        20,
    )
    assert (c.step_size, c.exploration_noise_std, c.reward_shift, c.normalize_observations) == (
        0.015,
        0.025,
        0.0,
        False,
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.step_size = 1.0  # type: ignore[misc]


# ---- training, checkpoints, resume ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """8 generations in one run (top_directions above number_of_directions is capped, as in Brax),
    and as 4 to a checkpoint + 4 resumed from it."""
    root = tmp_path_factory.mktemp("ars_ckpt")
    kw: dict[str, Any] = {**BASE, "seed": 2, "top_directions": 20}
    full, progress, recorded = _testing.recorded(
        train, fast(), **kw, num_timesteps=8 * STEP, num_evals=3, run_evals=False
    )
    snapshots = [s for s, _, _ in recorded]  # the steps only
    a = train(fast(), **kw, num_timesteps=4 * STEP, num_evals=2, run_evals=False, save_checkpoint_path=root)
    b = train(
        fast(), **kw, num_timesteps=8 * STEP, num_evals=2, run_evals=False, restore_checkpoint_path=root
    )
    return {"root": root, "full": full, "a": a, "b": b, "progress": progress, "snapshots": snapshots}


def test_callbacks_and_metrics(runs: dict[str, Any]) -> None:
    # without evaluations, progress_fn gets training metrics at the evaluation points (none at 0)
    assert [s for s, _ in runs["progress"]] == [4 * STEP, 8 * STEP]
    assert runs["snapshots"] == [0, 4 * STEP, 8 * STEP]
    m = runs["progress"][-1][1]
    assert m["training/weights"] == 1.0  # all 8 directions used: top_directions capped at 8
    for key in ("training/params_norm", "training/eval_scores_mean", "training/rollout_length"):
        assert np.isfinite(m[key])
    assert m["episode/count"] == 4 * 16.0  # a first episode per rollout over the interval's 4 generations
    assert not any(k.startswith("eval/") for k in m)
    params = runs["full"].params
    assert isinstance(params, ARSParams) and params.policy.shape == (2, 1)
    assert float(jnp.abs(params.policy).sum()) > 0.0  # moved from the zero initialization


def test_resume_is_bit_exact(runs: dict[str, Any]) -> None:
    assert not leaves_equal(runs["a"].params, runs["full"].params)
    assert leaves_equal(runs["b"].params, runs["full"].params)


def test_checkpoint_rebuilds_the_policy(runs: dict[str, Any]) -> None:
    step_dir = checkpoint.resolve(runs["root"])
    meta = checkpoint.read_meta(step_dir)
    assert step_dir.name == str(4 * STEP) and meta["agent"] == "ars"
    make_policy, params = policy_from_checkpoint(step_dir, meta)
    assert leaves_equal(params, runs["a"].params)
    obs = 3.0 * jax.random.normal(jax.random.PRNGKey(1), (7, 2))
    assert_same_actions(make_policy(params, deterministic=True), runs["a"].make_policy(runs["a"].params), obs)


def test_checkpoint_load_policy_dispatches_on_the_agent(runs: dict[str, Any]) -> None:
    obs = jax.random.normal(jax.random.PRNGKey(2), (5, 2))
    assert_same_actions(checkpoint.load_policy(runs["root"]), runs["a"].make_policy(runs["a"].params), obs)


def test_nan_guard_names_step_quantity_and_checkpoint(runs: dict[str, Any]) -> None:
    kw = {**BASE, "reward_shift": float("inf"), "num_timesteps": 8 * STEP, "num_evals": 2, "run_evals": False}
    # the non-finite returns play the loss's role
    _testing.assert_nan_guard(train, fast(), kw, runs["root"], "loss", 5 * STEP, 4 * STEP)


def test_exposes_what_the_agent_registry_reads() -> None:
    """`brax_train.agents.spec("ars")` is the package's explicit `SPEC`."""
    from brax_train import ars
    from brax_train.ars import config as ars_config

    assert ars.ARSConfig is ARSConfig and ars_config.validate is not None
    assert ars.env_steps_per_update(ARSConfig(number_of_directions=3, episode_length=10)) == 60
    assert ars.policy_from_checkpoint is policy_from_checkpoint and ars.train is train
    spec = agents.spec("ars")
    assert spec is ars.SPEC and spec.config_class is ARSConfig and spec.counts_env_steps
    assert spec.policy_from_checkpoint is policy_from_checkpoint and ars.CODEC.agent == "ars"
