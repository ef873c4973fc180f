"""Tests of `apg.train` on the `fast` environment (2 forced CPU devices, see the root conftest.py)."""

from __future__ import annotations

import functools
from typing import Any

import brax_envs
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from brax_envs import wrappers
from brax_envs.envs.fast import Fast

from brax_train import _testing, checkpoint, running_statistics
from brax_train._testing import assert_same_actions, fast, leaves_equal, on_both_devices, resumed_is_bit_exact
from brax_train.apg import (
    APGConfig,
    APGConfigError,
    APGParams,
    make_apg_networks,
    make_inference_fn,
    policy_from_checkpoint,
    rollout_loss,
    train,
)

NETS = {"hidden_layer_sizes": (8, 8)}
BASE = _testing.on_fast(
    8, 8, horizon_length=16, learning_rate=1e-2, normalize_observations=True, network_factory=NETS
)
STEP = 8 * 16  # env steps per policy update: num_envs * horizon_length
LEARN: dict[str, Any] = {**BASE, "truncation_length": 8}


# ---- validation -----------------------------------------------------------------------------------------


def test_validation_names_keys_and_rules() -> None:
    with pytest.raises(APGConfigError) as e:
        train(
            fast(),
            policy_updates=2,
            episode_length=10,
            num_envs=3,
            horizon_length=2,
            action_repeat=4,
            learning_rate=-1.0,
            adam_b=(1.5, 0.9),
            use_float64=True,
            truncation_length=0,
        )
    msg = str(e.value)
    assert "num_envs (3) must be divisible by the number of devices used (2" in msg
    assert "horizon_length (2) must be >= action_repeat (4)" in msg
    assert "learning_rate must be a number > 0, got -1.0" in msg
    assert "adam_b must be a pair (b1, b2) of numbers in [0, 1), got (1.5, 0.9)" in msg
    assert "use_float64=True is not supported" in msg
    assert "truncation_length must be None or an int >= 1, got 0" in msg
    with pytest.raises(APGConfigError, match="did you mean 'horizon_length'"):
        train(fast(), horizon_lenght=4)
    with pytest.raises(APGConfigError, match="episode_length is required"):
        train(fast(), policy_updates=1)
    with pytest.raises(APGConfigError, match=r"policy_updates \(3\) and num_timesteps \(1000\) disagree"):
        train(fast(), **BASE, policy_updates=3, num_timesteps=1000)
    with pytest.raises(APGConfigError, match=r"'learning_rate'.*both"):
        train(fast(), config=APGConfig(learning_rate=0.5), learning_rate=0.1)


# ---- the differentiated rollout -------------------------------------------------------------------------


class _Rollout:
    """A 4-env `fast` rollout and its loss, jitted once for the module's gradient tests."""

    def __init__(self) -> None:
        self.env = wrappers.wrap_for_training(fast(), episode_length=50)
        self.state = jax.jit(self.env.reset)(jax.random.split(jax.random.PRNGKey(0), 4))
        # No layer norm: over the near-zero initial activations it rescales by ~1/std, a curvature that
        # central differences in float32 cannot resolve. Larger weights, so every step's action matters.
        self.net = make_apg_networks(2, 1, hidden_layer_sizes=(8,), layer_norm=False)
        self.params = jax.tree.map(lambda x: x * 5.0, self.net.policy_network.init(jax.random.PRNGKey(1)))
        self.normalizer = running_statistics.init_state((2,))
        self.key, self.length = jax.random.PRNGKey(2), 8
        self.loss = jax.jit(self._loss, static_argnums=1)
        self.grad = jax.jit(jax.grad(self._loss), static_argnums=1)

    def policy(self, p: Any) -> Any:
        return make_inference_fn(self.net)(APGParams(self.normalizer, p))

    def _loss(self, p: Any, truncation_length: int | None) -> jax.Array:
        return rollout_loss(self.policy(p), self.env, self.state, self.key, self.length, truncation_length)[0]


@pytest.fixture(scope="module")
def rollout() -> _Rollout:
    return _Rollout()


def test_rollout_gradient_matches_finite_differences(rollout: _Rollout) -> None:
    params = rollout.params
    leaves = jax.tree.leaves(params)
    keys = jax.random.split(jax.random.PRNGKey(4), len(leaves))
    direction = jax.tree.unflatten(
        jax.tree.structure(params),
        [jax.random.normal(k, x.shape, x.dtype) for k, x in zip(keys, leaves, strict=True)],
    )
    eps = 1e-2
    plus = rollout.loss(jax.tree.map(lambda p, d: p + eps * d, params, direction), None)
    minus = rollout.loss(jax.tree.map(lambda p, d: p - eps * d, params, direction), None)
    fd = float(plus - minus) / (2 * eps)
    grads = rollout.grad(params, None)
    analytic = sum(
        float(jnp.sum(g * d)) for g, d in zip(jax.tree.leaves(grads), jax.tree.leaves(direction), strict=True)
    )
    assert abs(fd) > 1e-3  # the direction moves the loss
    np.testing.assert_allclose(analytic, fd, rtol=1e-2)


def test_truncation_differentiates_each_reward_through_its_own_step_only(rollout: _Rollout) -> None:
    r = rollout

    # Oracle: replay the forward pass's states and action keys; each reward then sees the policy
    # only through its own step's action.
    @jax.jit
    def states_and_keys(p: Any) -> tuple[brax_envs.State, jax.Array]:
        def body(carry: tuple[brax_envs.State, jax.Array], _: None) -> tuple[Any, Any]:
            st, k = carry
            k, k_act = jax.random.split(k)
            return (r.env.step(st, r.policy(p)(st.obs, k_act)[0]), k), (st, k_act)

        return jax.lax.scan(body, (r.state, r.key), None, length=r.length)[1]  # type: ignore[no-any-return]

    states, keys = states_and_keys(r.params)

    def one_step_each(p: Any) -> jax.Array:
        def step(st: brax_envs.State, k: jax.Array) -> jax.Array:
            return r.env.step(st, r.policy(p)(st.obs, k)[0]).reward

        return -jnp.mean(jax.vmap(step)(states, keys))

    got = r.grad(r.params, 1)
    want = jax.jit(jax.grad(one_step_each))(r.params)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-6)
    # Without truncation, earlier actions also move later rewards.
    assert not leaves_equal(r.grad(r.params, None), got)


# ---- learning, callbacks, checkpoints -------------------------------------------------------------------


@pytest.fixture(scope="module")
def learned(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("apg")
    run = _testing.recorded(
        train,
        fast(),
        **LEARN,
        policy_updates=60,
        num_evals=3,
        log_training_metrics=True,
        training_metrics_steps=30 * STEP,
        save_checkpoint_path=root,
    )
    return {"root": root, **run._asdict()}


def test_learns_fast_env(learned: dict[str, Any]) -> None:
    evals = [(s, m) for s, m in learned["progress"] if "eval/episode_reward" in m]
    assert [s for s, _ in evals] == [0, 30 * STEP, 60 * STEP]
    first, last = evals[0][1]["eval/episode_reward"], evals[-1][1]["eval/episode_reward"]
    assert first < -90.0 and last > first + 25.0, evals
    final = evals[-1][1]
    assert learned["result"].metrics == final
    assert {"training/loss", "training/grad_norm", "training/params_norm", "training/sps"} <= set(final)
    # Staggered episode clocks: training episodes end before the first episode_length steps have passed.
    assert final["episode/count"] > 0


def test_policy_params_fn_and_params(learned: dict[str, Any]) -> None:
    snaps = learned["snapshots"]
    assert [s for s, _, _ in snaps] == [0, 30 * STEP, 60 * STEP]
    assert all(isinstance(p, APGParams) for _, _, p in snaps)
    assert leaves_equal(snaps[-1][2], learned["result"].params)
    make_policy, params, _ = learned["result"]
    obs = jnp.zeros((5, 2), jnp.float32)
    action, extras = make_policy(params)(obs, jax.random.PRNGKey(0))
    assert action.shape == (5, 1) and extras == {} and bool(jnp.all(jnp.abs(action) < 1.0))
    det, _ = make_policy(tuple(params), deterministic=True)(obs, jax.random.PRNGKey(0))  # Brax-style pair
    assert det.shape == (5, 1)
    with pytest.raises(TypeError, match="expects APGParams"):
        make_policy({"policy": params.policy})


def test_checkpoint_rebuilds_the_policy_from_the_directory_alone(learned: dict[str, Any]) -> None:
    step_dir = checkpoint.resolve(learned["root"])
    assert step_dir.name == str(60 * STEP)
    meta = checkpoint.read_meta(step_dir)
    assert meta["agent"] == "apg" and meta["network"]["recordable"]
    assert meta["network"]["kwargs"]["activation"] == "jax.nn.elu"
    make_policy, params = policy_from_checkpoint(step_dir, meta)
    obs = jax.random.normal(jax.random.PRNGKey(1), (7, 2))
    want = learned["result"].make_policy(learned["result"].params, deterministic=True)
    assert_same_actions(make_policy(params, deterministic=True), want, obs)


def test_policy_from_checkpoint_refuses_another_agent(learned: dict[str, Any]) -> None:
    step_dir = checkpoint.resolve(learned["root"])
    meta = {**checkpoint.read_meta(step_dir), "agent": "ppo"}
    with pytest.raises(checkpoint.CheckpointMismatchError, match="not 'apg'"):
        policy_from_checkpoint(step_dir, meta)


# ---- exact resume, NaN guard -------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs(learned: dict[str, Any]) -> dict[str, Any]:
    """90 updates in one go, and the `learned` run (60 updates) resumed to 90."""
    kw = {**LEARN, "policy_updates": 90, "run_evals": False}
    return _testing.full_and_resumed(train, kw, learned["root"])


def test_resume_is_bit_exact(learned: dict[str, Any], runs: dict[str, Any]) -> None:
    assert resumed_is_bit_exact(learned["result"].params, runs["full"].params, runs["resumed"].params)


def test_trains_on_both_forced_devices(runs: dict[str, Any]) -> None:
    assert on_both_devices(runs["full"].params)


class _NaNGradient(Fast):
    """`fast` whose reward is finite (the NaN guard wrapper zeroes it) but has a NaN derivative."""

    def step(self, state: brax_envs.State, action: jax.Array) -> brax_envs.State:
        out = super().step(state, action)
        return out.replace(reward=out.reward + 0.0 * jnp.sqrt(out.pipeline_state[0] - 100.0))


def test_nan_guard_names_the_gradients(learned: dict[str, Any]) -> None:
    kw = {**LEARN, "policy_updates": 90, "num_evals": 2, "run_evals": False}
    _testing.assert_nan_guard(train, _NaNGradient(), kw, learned["root"], "gradients", 61 * STEP, 60 * STEP)


def test_config_resolves_policy_updates_to_env_steps() -> None:
    from brax_train.apg.config import resolve

    c = APGConfig(**BASE, policy_updates=5, action_repeat=4)
    assert resolve(c).num_timesteps == 5 * 8 * 16
    assert resolve(c.replace(policy_updates=None, num_timesteps=7)).num_timesteps == 7
    assert APGConfig().to_json()["adam_b"] == "(0.7, 0.95)"


def test_networks_record_their_description() -> None:
    net = make_apg_networks(3, 2, hidden_layer_sizes=(4,), activation=jax.nn.tanh, layer_norm=False)
    assert net.description["kwargs"] == {
        "observation_size": 3,
        "action_size": 2,
        "hidden_layer_sizes": [4],
        "activation": "jax.nn.tanh",
        "layer_norm": False,
        "policy_obs_key": "state",
    }
    unnamed = make_apg_networks(3, 2, activation=functools.partial(jax.nn.leaky_relu, negative_slope=0.1))
    assert not unnamed.description["recordable"]
