"""End-to-end tests of `ppo.train` on the `fast` environment (2 forced CPU devices by default)."""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import pathlib
from typing import Any

import brax_envs
import jax
import jax.numpy as jnp
import numpy as np
import onnxruntime  # type: ignore[import-untyped]  # ships no py.typed
import pytest

from brax_train import _testing, checkpoint, export
from brax_train._testing import PPO_ON_FAST, Untouchable, assert_same_actions, fast, leaves_equal
from brax_train.ppo import (
    PPOConfig,
    PPOConfigError,
    PPOParams,
    TrainResult,
    make_ppo_networks,
    train,
)

SMALL_NETS = functools.partial(
    make_ppo_networks, policy_hidden_layer_sizes=(16, 16), value_hidden_layer_sizes=(16, 16)
)
BASE: dict[str, Any] = {**PPO_ON_FAST, "network_factory": SMALL_NETS}
STEP = 16 * 10 * 4  # env steps per training step: batch_size * unroll_length * num_minibatches
# `fast` learns reliably without observation normalization and with a long horizon (Google Brax's
# PPO behaves the same on it: with normalization its progress is much slower).
LEARN: dict[str, Any] = {
    **BASE,
    "unroll_length": 20,
    "num_updates_per_batch": 4,
    "learning_rate": 3e-3,
    "entropy_cost": 1e-2,
    "discounting": 0.99,
    "normalize_observations": False,
    "seed": 1,
    "num_eval_envs": 16,
}
LEARN_STEP = 16 * 20 * 4


# ---- validation ---------------------------------------------------------------------------------------


def test_validation_names_keys_and_rules() -> None:
    with pytest.raises(PPOConfigError) as e:
        train(fast(), num_timesteps=1000, episode_length=10, num_envs=3, batch_size=5, num_minibatches=2)
    msg = str(e.value)
    assert "num_envs (3) must be divisible by the number of devices used (2" in msg
    assert "batch_size * num_minibatches (5 * 2 = 10) must be divisible by num_envs (3)" in msg
    assert "batch_size (5)" in msg
    with pytest.raises(PPOConfigError, match="episode_length is required"):
        train(fast(), num_timesteps=1000, num_envs=2, batch_size=2, num_minibatches=1)
    with pytest.raises(PPOConfigError, match="did you mean 'num_envs'"):
        train(fast(), num_timesteps=1000, num_env=2)
    with pytest.raises(PPOConfigError, match="learning_rate_schedule"):
        train(fast(), **{**BASE, "learning_rate_schedule": "COSINE"})


def test_config_and_keywords_must_not_overlap() -> None:
    cfg = PPOConfig(num_timesteps=0, **BASE)
    with pytest.raises(PPOConfigError, match=r"'num_envs'.*both"):
        train(fast(), config=cfg, num_envs=32)
    result = train(fast(), config=cfg, seed=3)  # a key the config leaves at its default is fine
    assert isinstance(result, TrainResult) and isinstance(result.params, PPOParams)


# ---- learning, metrics, callbacks -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def learned() -> dict[str, Any]:
    return _testing.recorded(train, fast(), **LEARN, num_timesteps=40 * LEARN_STEP, num_evals=3)._asdict()


def test_learns_fast_env(learned: dict[str, Any]) -> None:
    progress = learned["progress"]
    assert [s for s, _ in progress] == [0, 20 * LEARN_STEP, 40 * LEARN_STEP]
    first, last = progress[0][1]["eval/episode_reward"], progress[-1][1]["eval/episode_reward"]
    assert first < -80.0
    assert last > -65.0, progress
    assert learned["result"].metrics == progress[-1][1]
    for key in (
        "training/total_loss",
        "training/policy_loss",
        "training/v_loss",
        "training/entropy_loss",
        "training/sps",
        "eval/avg_episode_length",
        "eval/episode_reward_distance",
    ):
        assert key in progress[-1][1]


def test_params_are_typed_and_policies_act(learned: dict[str, Any]) -> None:
    make_policy, params, _ = learned["result"]
    assert isinstance(params, PPOParams)
    obs = jnp.zeros((5, 2), jnp.float32)
    action, extras = make_policy(params, deterministic=True)(obs, jax.random.PRNGKey(0))
    assert action.shape == (5, 1) and extras == {}
    action, extras = make_policy(params)(obs, jax.random.PRNGKey(0))
    assert action.shape == (5, 1) and set(extras) == {"log_prob", "raw_action", "distribution_params"}
    assert bool(jnp.all(jnp.abs(action) < 1.0))
    with pytest.raises(TypeError, match=r"PPOParams\(\*params\)"):
        make_policy(tuple(params))
    with pytest.raises(TypeError, match="expects PPOParams"):
        make_policy({"policy": params.policy})


def test_policy_params_fn_gets_ppo_params(learned: dict[str, Any]) -> None:
    snaps = learned["snapshots"]
    assert [s for s, _, _ in snaps] == [0, 20 * LEARN_STEP, 40 * LEARN_STEP]
    for _, make_policy, params in snaps:
        assert isinstance(params, PPOParams)
        make_policy(params, deterministic=True)(jnp.zeros((2,), jnp.float32), jax.random.PRNGKey(0))
    assert leaves_equal(snaps[-1][2], learned["result"].params)


def test_training_metrics_without_eval_env() -> None:
    reports: list[tuple[int, dict[str, float]]] = []
    train(
        fast(),
        **{**BASE, "learning_rate": 1e-3},
        num_timesteps=8 * STEP,
        num_evals=0,
        log_training_metrics=True,
        training_metrics_steps=2 * STEP,
        eval_env=Untouchable("the eval env must not be built"),
        learning_rate_schedule="ADAPTIVE_KL",
        desired_kl=1e-4,
        progress_fn=lambda s, m: reports.append((s, dict(m))),
    )
    assert [s for s, _ in reports] == [2 * STEP, 4 * STEP, 6 * STEP, 8 * STEP]
    for _, m in reports:
        assert not any(k.startswith("eval/") for k in m)
        assert {"training/sps", "training/total_loss", "training/learning_rate", "episode/count"} <= set(m)
    done = [m for _, m in reports if m["episode/count"] > 0]
    assert done and all(-200.0 < m["episode/sum_reward"] < 0.0 and m["episode/length"] == 100.0 for m in done)
    lrs = [m["training/learning_rate"] for _, m in reports]
    assert lrs[-1] != pytest.approx(1e-3)  # the adaptive-KL schedule moved the learning rate


def test_linear_schedule_reaches_its_final_rate_at_num_timesteps() -> None:
    """LINEAR: the rate falls by equal steps per Adam update, to the min rate at `num_timesteps`."""
    reports: list[dict[str, float]] = []
    train(
        fast(),
        **{**BASE, "learning_rate": 1e-3},
        num_timesteps=4 * STEP,
        num_evals=0,
        log_training_metrics=True,
        training_metrics_steps=STEP,
        learning_rate_schedule="LINEAR",
        learning_rate_schedule_min_lr=2e-4,
        progress_fn=lambda s, m: reports.append(dict(m)),
    )
    updates = BASE["num_updates_per_batch"] * BASE["num_minibatches"]  # Adam updates a training step
    total = 4 * updates
    # a report is the mean over its training step's updates, those numbered (k-1) * updates + (0..updates-1)
    expected = [1e-3 + (2e-4 - 1e-3) * ((k - 1) * updates + (updates - 1) / 2) / total for k in (1, 2, 3, 4)]
    assert [m["training/learning_rate"] for m in reports] == pytest.approx(expected, rel=1e-5)


# ---- checkpoints and exact resume -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("ckpt")
    steps_a: list[int] = []
    full = train(fast(), **BASE, num_timesteps=8 * STEP, num_evals=3)
    a = train(
        fast(),
        **BASE,
        num_timesteps=4 * STEP,
        num_evals=3,
        save_checkpoint_path=root / "a",
        progress_fn=lambda s, m: steps_a.append(s),
    )
    b = train(
        fast(),
        **BASE,
        num_timesteps=8 * STEP,
        num_evals=3,
        restore_checkpoint_path=root / "a",
        save_checkpoint_path=root / "b",
        checkpoint_max_to_keep=1,
    )
    return {"root": root, "full": full, "a": a, "b": b, "steps_a": steps_a}


def test_resume_is_bit_exact(runs: dict[str, Any]) -> None:
    assert not leaves_equal(runs["a"].params, runs["full"].params)
    assert leaves_equal(runs["b"].params, runs["full"].params)


def test_checkpoint_layout(runs: dict[str, Any]) -> None:
    root: pathlib.Path = runs["root"]
    assert sorted(int(p.name) for p in (root / "a").iterdir() if p.name.isdigit()) == [2 * STEP, 4 * STEP]
    assert [p.name for p in (root / "b").iterdir() if p.name.isdigit()] == [str(8 * STEP)]  # max_to_keep=1
    step_dir = checkpoint.resolve(root / "a")
    assert step_dir.name == str(4 * STEP)
    meta = checkpoint.read_meta(step_dir)
    assert meta["step"] == 4 * STEP and meta["network"]["kwargs"]["activation"] == "jax.nn.silu"
    assert meta["config"]["num_envs"] == 16 and meta["config"]["network_factory"]["callable"] is None
    assert meta["network"]["recordable"] is True


def test_load_policy_from_checkpoint_alone(runs: dict[str, Any]) -> None:
    policy = checkpoint.load_policy(runs["root"] / "a", deterministic=True)
    make_policy, params, _ = runs["a"]
    obs = jax.random.normal(jax.random.PRNGKey(1), (7, 2))
    assert_same_actions(policy, make_policy(params, deterministic=True), obs)


def _copy_run(src: pathlib.Path, dst: pathlib.Path) -> pathlib.Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_corrupted_checkpoint_raises_naming_file(runs: dict[str, Any], tmp_path: pathlib.Path) -> None:
    run = _copy_run(runs["root"] / "a", tmp_path / "run")
    latest = run / str(4 * STEP)
    victim = max((p for p in (latest / "params").rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    with pytest.raises(checkpoint.CorruptCheckpointError) as e:
        checkpoint.load_policy(run)
    assert e.value.path == victim and str(victim) in str(e.value)


def test_incomplete_checkpoint_is_never_chosen(
    runs: dict[str, Any], tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    run = _copy_run(runs["root"] / "a", tmp_path / "run")
    (run / str(4 * STEP) / checkpoint.MANIFEST).unlink()  # as if killed before the save finished
    (run / "99999.orbax-checkpoint-tmp-123").mkdir()  # an orbax temporary directory
    with caplog.at_level(logging.WARNING, logger="brax_train.checkpoint"):
        assert checkpoint.resolve(run).name == str(2 * STEP)
    assert "incomplete" in caplog.text
    with pytest.raises(checkpoint.IncompleteCheckpointError):
        checkpoint.resolve(run / str(4 * STEP))


def test_step_counters_beyond_32_bits(runs: dict[str, Any], tmp_path: pathlib.Path) -> None:
    # Re-save run a's last checkpoint as if it were taken just below 2**32 env steps.
    src = checkpoint.resolve(runs["root"] / "a")
    start = (2**32 // STEP) * STEP - STEP  # a multiple of STEP just below 2**32
    meta = checkpoint.read_meta(src)
    saver = checkpoint.Saver(tmp_path / "big")
    params = checkpoint.load(src).params
    target = {"optimizer_state": None, "train_key": None, "env_state": None}
    del target
    import orbax.checkpoint as ocp  # type: ignore[import-untyped]

    train_state = ocp.StandardCheckpointer().restore(src / "train_state")
    saver.save(start, params, train_state, {**meta, "training_step": start // STEP})
    saver.close()
    steps: list[int] = []
    train(
        fast(),
        **BASE,
        num_timesteps=start + 4 * STEP,
        num_evals=3,
        restore_checkpoint_path=tmp_path / "big",
        save_checkpoint_path=tmp_path / "big",
        progress_fn=lambda s, m: steps.append(s),
    )
    assert steps == [start, start + 2 * STEP, start + 4 * STEP]
    assert steps[-1] > 2**32
    names = sorted(int(p.name) for p in (tmp_path / "big").iterdir() if p.name.isdigit())
    assert names == [start, start + 2 * STEP, start + 4 * STEP]
    assert json.loads((tmp_path / "big" / str(start + 4 * STEP) / "meta" / "metadata").read_text())[
        "step"
    ] == (start + 4 * STEP)


def test_nan_guard_names_step_quantity_and_checkpoint(runs: dict[str, Any]) -> None:
    kw = {**BASE, "learning_rate": float("nan"), "num_timesteps": 8 * STEP, "num_evals": 3}
    msg = _testing.assert_nan_guard(train, fast(), kw, runs["root"] / "a", "parameters", 5 * STEP, 4 * STEP)
    assert f"env step {5 * STEP}" in msg


def test_restore_value_fn_false_is_a_warm_start(runs: dict[str, Any]) -> None:
    steps: list[int] = []
    result = train(
        fast(),
        **BASE,
        num_timesteps=0,
        restore_checkpoint_path=runs["root"] / "a",
        restore_value_fn=False,
        progress_fn=lambda s, m: steps.append(s),
    )
    a = runs["a"].params
    assert leaves_equal(result.params.policy, a.policy) and leaves_equal(
        result.params.normalizer, a.normalizer
    )
    assert not leaves_equal(result.params.value, a.value)
    full = train(fast(), **BASE, num_timesteps=0, restore_checkpoint_path=runs["root"] / "a")
    assert leaves_equal(full.params, a)


def test_config_dataclass_is_frozen() -> None:
    cfg = PPOConfig(num_timesteps=10)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.num_timesteps = 5  # type: ignore[misc]
    assert cfg.replace(num_envs=4).num_envs == 4


# ---- dict observations, domain randomization ---------------------------------------------------------


class DictObs(brax_envs.Wrapper):
    """`fast` with observations {'state': [pos, vel], 'privileged_state': [pos, vel, target - pos]}."""

    def _obs(self, state: brax_envs.State) -> brax_envs.State:
        x: jax.Array = state.obs
        priv = jnp.concatenate([x, (1.0 - x[:1])])
        return state.replace(obs={"state": x, "privileged_state": priv})

    def reset(self, rng: jax.Array) -> brax_envs.State:
        return self._obs(self.env.reset(rng))

    def step(self, state: brax_envs.State, action: jax.Array) -> brax_envs.State:
        inner = self.env.step(state.replace(obs=state.obs["state"]), action)
        return self._obs(inner)

    @property
    def observation_size(self) -> Any:
        return {"state": (2,), "privileged_state": (3,)}


def test_dict_observations_train_and_checkpoint(tmp_path: pathlib.Path) -> None:
    nets = {
        "policy_hidden_layer_sizes": (8,),
        "value_hidden_layer_sizes": (8,),
        "value_obs_key": "privileged_state",
    }
    make_policy, params, _ = train(
        DictObs(fast()),
        **{**BASE, "network_factory": nets},
        num_timesteps=2 * STEP,
        num_evals=2,
        save_checkpoint_path=tmp_path,
    )
    assert set(params.normalizer.mean) == {"state", "privileged_state"}
    assert params.value["params"]["hidden_0"]["kernel"].shape == (3, 8)
    obs = {"state": jnp.zeros((1, 2), jnp.float32), "privileged_state": jnp.zeros((1, 3), jnp.float32)}
    assert_same_actions(checkpoint.load_policy(tmp_path), make_policy(params, deterministic=True), obs)
    # exported on the key the policy reads: ONNX takes the 'state' array alone
    exported = export.export_policy(tmp_path, tmp_path / "policy.onnx", "onnx")
    assert exported.contract["input"]["shape"] == ["batch", 2]
    assert exported.contract["observation"]["key"] == "state"
    x = np.asarray([[0.3, -0.2], [1.0, 0.5]], np.float32)
    session = onnxruntime.InferenceSession(str(exported.path), providers=["CPUExecutionProvider"])
    both = {"state": jnp.asarray(x), "privileged_state": jnp.zeros((2, 3))}
    want, _ = make_policy(params, deterministic=True)(both, jax.random.PRNGKey(0))
    np.testing.assert_allclose(session.run(None, {export.INPUT_NAME: x})[0], np.asarray(want), atol=1e-6)


def _randomize_mass(sys: Any, rng: jax.Array) -> tuple[Any, Any]:
    """Reads `sys` inside jax.vmap, as MuJoCo Playground randomizers do."""

    @jax.vmap
    def one(key: jax.Array) -> jax.Array:
        out: jax.Array = sys.body_mass * jax.random.uniform(key, (), jnp.float32, 0.5, 2.0)
        return out

    in_axes = jax.tree.map(lambda _: None, sys).replace(body_mass=0)
    return sys.replace(body_mass=one(rng)), in_axes


_RANDOMIZED: dict[str, Any] = {**_testing.smallest_ppo(4, 4), "num_eval_envs": 2, "num_evals": 2}
"""The randomization tests' run: the least PPO training on 4 envs, 2 evaluations in 2 envs."""


@pytest.mark.parametrize("with_eval_env", [False, True])
def test_randomization_fn(with_eval_env: bool) -> None:
    from brax_envs.envs import PendulumSwingup

    env = PendulumSwingup(n_frames=1)
    seen: list[int] = []

    def randomize(sys: Any, rng: jax.Array) -> tuple[Any, Any]:
        seen.append(int(rng.shape[0]))
        return _randomize_mass(sys, rng)

    _, params, metrics = train(
        env,
        **_RANDOMIZED,
        num_timesteps=4 * 2 * 2,
        episode_length=4,
        randomization_fn=randomize,
        eval_env=PendulumSwingup(n_frames=1) if with_eval_env else None,
    )
    assert seen == [4, 2]  # one key per training env, then one per eval env
    assert np.isfinite(metrics["eval/episode_reward"])
    assert all(np.all(np.isfinite(np.asarray(x))) for x in jax.tree.leaves(params))


def test_randomize_per_episode_draws_inside_training_and_evaluates_once_per_run() -> None:
    from brax_envs.envs import PendulumSwingup

    calls: list[tuple[int, bool]] = []

    def randomize(sys: Any, rng: jax.Array) -> tuple[Any, Any]:
        calls.append((int(rng.shape[0]), isinstance(rng, jax.core.Tracer)))
        return _randomize_mass(sys, rng)

    progress: list[dict[str, float]] = []
    _, params, metrics = train(
        PendulumSwingup(n_frames=1),
        **_RANDOMIZED,
        num_timesteps=3 * 4 * 2,
        episode_length=3,
        log_training_metrics=True,
        progress_fn=lambda _, m: progress.append(dict(m)),
        randomization_fn=randomize,
        randomize_per_episode=True,
    )
    # Training: one eager check with 2 keys, then draws traced inside the reset (4 keys for the whole
    # batch's abstract state, 2 in the per-device reset on each of conftest.py's 2 devices) and
    # auto-resets (restart slices of ceil(2 / 16) = 1 env). Evaluation: one eager draw of 2 systems.
    assert jax.local_device_count() == 2
    assert calls[0] == (2, False) and calls.count((2, False)) == 2
    assert {n for n, traced in calls if traced} == {4, 2, 1}
    assert not any(n not in (2, 4, 1) for n, _ in calls)
    assert np.isfinite(metrics["eval/episode_reward"])
    assert sum(m.get("episode/count", 0.0) for m in progress) > 0  # training episodes ended and restarted
    assert all(np.all(np.isfinite(np.asarray(x))) for x in jax.tree.leaves(params))


def test_randomize_per_episode_validation() -> None:
    small = {**BASE, "num_timesteps": STEP}
    with pytest.raises(PPOConfigError, match="needs a randomization_fn"):
        train(fast(), **small, randomize_per_episode=True)
    with pytest.raises(PPOConfigError, match="wrap_env_fn"):
        train(
            fast(),
            **small,
            randomize_per_episode=True,
            randomization_fn=_randomize_mass,
            wrap_env_fn=lambda env, **_: env,
        )
    with pytest.raises(PPOConfigError, match="randomize_per_episode must be a bool"):
        train(fast(), **small, randomize_per_episode=1)
    assert PPOConfig().randomize_per_episode is False
    assert PPOConfig(randomize_per_episode=True).to_json()["randomize_per_episode"] is True


def test_fresh_reset_reaches_the_auto_reset_and_is_validated() -> None:
    from brax_envs import wrappers

    from brax_train import runner

    small = {**BASE, "num_timesteps": STEP}
    for fresh, expected in ((None, False), (True, True), (False, False)):
        c = PPOConfig(**{**small, "fresh_reset": fresh})
        env = runner.wrap_env(fast(), c, 2, jax.random.PRNGKey(0))
        assert isinstance(env, wrappers.AutoResetWrapper) and env.fresh_reset is expected
    with pytest.raises(PPOConfigError, match="fresh_reset must be None or a bool, got 1"):
        train(fast(), **small, fresh_reset=1)
    with pytest.raises(PPOConfigError, match="fresh_reset=False cannot restart randomize_per_episode=True"):
        train(fast(), **small, fresh_reset=False, randomize_per_episode=True,
              randomization_fn=_randomize_mass)
    assert PPOConfig(fresh_reset=True).to_json()["fresh_reset"] is True


def test_value_clipping_trains() -> None:
    """`clipping_epsilon_value` is live: it clips around the rollout-time value (was a KeyError)."""
    kw: dict[str, Any] = {**BASE, "num_timesteps": 2 * STEP, "num_evals": 0, "seed": 4}
    clipped = train(fast(), **kw, clipping_epsilon_value=1e-3)
    free = train(fast(), **kw)
    assert all(np.all(np.isfinite(np.asarray(x))) for x in jax.tree.leaves(clipped.params))
    assert not leaves_equal(clipped.params.value, free.params.value)
