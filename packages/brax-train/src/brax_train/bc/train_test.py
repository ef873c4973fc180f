"""Tests of `bc.train` on the `fast` environment (2 forced CPU devices, see the root conftest.py)."""

from __future__ import annotations

import pathlib
from typing import Any

import brax_envs
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from brax_envs.envs.fast import Fast

from brax_train import _testing, checkpoint, ppo, running_statistics
from brax_train._testing import assert_same_actions, fast, leaves_equal, on_both_devices, resumed_is_bit_exact
from brax_train.bc import (
    BCConfig,
    BCConfigError,
    BCParams,
    bc_loss,
    make_bc_networks,
    policy_from_checkpoint,
    teacher_first,
    teacher_label,
    train,
)

BASE = _testing.on_fast(
    8,
    8,
    demo_length=50,
    batch_size=80,
    epochs=30,
    learning_rate=3e-3,
    network_factory={"policy_hidden_layer_sizes": (16, 16)},
)
STEP = 8 * 50  # env steps per DAgger step: num_envs * demo_length


def teacher(obs: jax.Array, key: jax.Array) -> tuple[jax.Array, dict[str, Any]]:
    """A PD controller that drives `fast`'s point mass to its target at 1."""
    del key
    return jnp.clip(3.0 * (1.0 - obs[..., :1]) - 2.0 * obs[..., 1:2], -1.0, 1.0), {}


@jax.jit
def teacher_obs() -> jax.Array:
    """(8 * 100, 2) observations of the teacher's 100-step episodes from 8 resets of `fast`."""
    env = fast()

    def episode(key: jax.Array) -> jax.Array:
        def body(st: brax_envs.State, _: None) -> tuple[brax_envs.State, jax.Array]:
            return env.step(st, teacher(st.obs, key)[0]), st.obs

        return jax.lax.scan(body, env.reset(key), None, length=100)[1]

    return jnp.reshape(jax.vmap(episode)(jax.random.split(jax.random.PRNGKey(5), 8)), (-1, 2))


def grid_obs() -> jax.Array:
    """(64, 2) observations where `fast` trajectories live: positions [-0.1, 1.1], velocities [0, 0.8]."""
    pos, vel = jnp.meshgrid(jnp.linspace(-0.1, 1.1, 8), jnp.linspace(0.0, 0.8, 8))
    return jnp.stack([pos.ravel(), vel.ravel()], axis=-1)


# ---- validation -----------------------------------------------------------------------------------------


def test_validation_names_keys_and_rules() -> None:
    with pytest.raises(BCConfigError) as e:
        train(
            fast(), episode_length=10, num_envs=4, demo_length=5, batch_size=3, epochs=0, madrona_backend=True
        )
    msg = str(e.value)
    assert "give exactly one teacher" in msg and "got neither" in msg
    assert "epochs must be an int >= 1, got 0" in msg
    assert "madrona_backend=True is not supported" in msg
    with pytest.raises(BCConfigError) as e:
        train(fast(), **{**BASE, "batch_size": 30}, teacher_inference_fn=teacher)
    msg = str(e.value)
    assert "batch_size (30) must divide num_envs * demo_length (8 * 50 = 400)" in msg
    assert "batch_size (30) must be divisible by the number of devices used (2)" not in msg  # 30 is even
    with pytest.raises(BCConfigError, match="demo_length is required"):
        train(fast(), episode_length=10, teacher_inference_fn=teacher)
    with pytest.raises(BCConfigError, match="got both"):
        train(fast(), **BASE, teacher_inference_fn=teacher, teacher_checkpoint_path="/nowhere")
    with pytest.raises(BCConfigError, match="did you mean 'dagger_steps'"):
        train(fast(), **BASE, teacher_inference_fn=teacher, dagger_step=3)
    with pytest.raises(BCConfigError, match=r"eval_length \(50\) and episode_length \(100\) disagree"):
        train(fast(), **BASE, teacher_inference_fn=teacher, eval_length=50)
    with pytest.raises(BCConfigError, match=r"dagger_steps \(3\) and num_timesteps \(2000\) disagree"):
        train(fast(), **BASE, teacher_inference_fn=teacher, dagger_steps=3, num_timesteps=2000)
    with pytest.raises(BCConfigError, match="give the environment once"):
        train(fast(), env=fast(), **BASE, teacher_inference_fn=teacher)


def test_config_resolves_brax_names() -> None:
    from brax_train.bc.config import resolve

    c = resolve(BCConfig(**{**BASE, "episode_length": None}, eval_length=30, dagger_steps=3))
    assert (c.episode_length, c.num_timesteps, c.num_resets_per_eval) == (30, 3 * STEP, 1)
    c = resolve(BCConfig(**BASE, num_timesteps=5 * STEP, reset=False))
    assert (c.num_timesteps, c.num_resets_per_eval) == (5 * STEP, 0)
    assert float(teacher_first(jnp.asarray(0))) == 1.0 and float(teacher_first(jnp.asarray(3))) == 0.0
    assert BCConfig().to_json()["dagger_beta_fn"] == {"callable": "brax_train.bc.config.teacher_first"}


def test_loss_is_the_squared_error_of_the_squashed_mean() -> None:
    net = make_bc_networks(2, 1, policy_hidden_layer_sizes=(4,))
    params = net.policy_network.init(jax.random.PRNGKey(0))
    normalizer = running_statistics.init_state((2,))
    obs = grid_obs()
    labels = jnp.linspace(-0.9, 0.9, 64)[:, None]
    out = np.asarray(net.policy_network.apply(normalizer, params, obs), np.float64)
    want = np.mean((np.tanh(out[:, :1]) - np.asarray(labels, np.float64)) ** 2)
    np.testing.assert_allclose(float(bc_loss(params, normalizer, obs, labels, net)), want, rtol=1e-5)
    loc = jnp.asarray([[0.3, -2.0]])
    np.testing.assert_allclose(
        np.asarray(teacher_label(jnp.zeros((1, 2)), {"loc": loc})), np.tanh(loc), rtol=1e-6
    )
    assert teacher_label(loc, {}) is loc


# ---- learning, callbacks, checkpoints -------------------------------------------------------------------


@pytest.fixture(scope="module")
def learned(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("bc")
    run = _testing.recorded(
        train,
        env=fast(),
        **BASE,
        teacher_inference_fn=teacher,
        dagger_steps=6,
        num_evals=3,
        log_training_metrics=True,
        save_checkpoint_path=root,
    )
    return {"root": root, **run._asdict()}


def test_student_imitates_the_teacher(learned: dict[str, Any]) -> None:
    make_policy, params, _ = learned["result"]
    obs = teacher_obs()
    want, _ = teacher(obs, jax.random.PRNGKey(0))
    got, extras = make_policy(params)(obs, jax.random.PRNGKey(0))
    assert set(extras) == {"loc", "scale"}
    np.testing.assert_allclose(np.asarray(got), np.tanh(np.asarray(extras["loc"])), rtol=1e-6)
    assert float(np.mean(np.abs(np.asarray(got) - np.asarray(want)))) < 0.1
    evals = [m for _, m in learned["progress"] if "eval/episode_reward" in m]
    assert evals[0]["eval/episode_reward"] < -80.0  # the untrained student
    assert evals[-1]["eval/episode_reward"] > -60.0  # the teacher scores about -45


def test_dagger_schedule_and_training_metrics(learned: dict[str, Any]) -> None:
    train_reports = [(s, m) for s, m in learned["progress"] if "eval/episode_reward" not in m]
    assert [s for s, _ in train_reports] == [i * STEP for i in range(1, 7)]
    # Brax's default schedule: the teacher drives the first DAgger step, the student every later one.
    assert [m["training/beta"] for _, m in train_reports] == [1.0] + [0.0] * 5
    assert [m["training/teacher_fraction"] for _, m in train_reports] == [1.0] + [0.0] * 5
    last = train_reports[-1][1]
    assert (
        last["training/actor_loss"] < 0.01 and last["training/actor_loss"] < last["training/first_epoch_loss"]
    )


def test_policy_params_fn_and_checkpoint(learned: dict[str, Any]) -> None:
    snaps = learned["snapshots"]
    assert [s for s, _, _ in snaps] == [0, 3 * STEP, 6 * STEP]
    assert all(isinstance(p, BCParams) for _, _, p in snaps)
    assert leaves_equal(snaps[-1][2], learned["result"].params)
    step_dir = checkpoint.resolve(learned["root"])
    assert step_dir.name == str(6 * STEP)
    meta = checkpoint.read_meta(step_dir)
    assert meta["agent"] == "bc" and meta["tanh_squash"] is True and meta["teacher"]["checkpoint"] is None
    make_policy, params = policy_from_checkpoint(step_dir, meta)
    obs = grid_obs()
    assert_same_actions(make_policy(params), learned["result"].make_policy(learned["result"].params), obs)
    with pytest.raises(checkpoint.CheckpointMismatchError, match="not 'bc'"):
        policy_from_checkpoint(step_dir, {**meta, "agent": "apg"})


def test_restore_params_starts_from_them(learned: dict[str, Any]) -> None:
    params = learned["result"].params
    out = train(fast(), **BASE, teacher_inference_fn=teacher, dagger_steps=0, restore_params=params)
    assert leaves_equal(out.params, params)
    with pytest.raises(BCConfigError, match="restore_params must be None or BCParams"):
        train(fast(), **BASE, teacher_inference_fn=teacher, restore_params=tuple(params))


# ---- a PPO checkpoint as the teacher --------------------------------------------------------------------


class _ThreeObs(Fast):
    """`fast` with a third, constant observation (the wrong size for a `fast` teacher)."""

    def _pad(self, s: brax_envs.State) -> brax_envs.State:
        return s.replace(obs=jnp.concatenate([s.pipeline_state, jnp.ones((1,), jnp.float32)]))

    def reset(self, rng: jax.Array) -> brax_envs.State:
        return self._pad(super().reset(rng))

    def step(self, state: brax_envs.State, action: jax.Array) -> brax_envs.State:
        return self._pad(super().step(state, action))

    @property
    def observation_size(self) -> int:
        return 3


@pytest.fixture(scope="module")
def ppo_teacher(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    root = tmp_path_factory.mktemp("ppo_teacher")
    ppo.train(
        fast(),
        **_testing.smallest_ppo(8, 8),
        num_timesteps=8 * 2,
        episode_length=20,
        learning_rate=1e-2,
        run_evals=False,
        save_checkpoint_path=root,
    )
    return root


def test_ppo_checkpoint_teaches_with_a_custom_schedule(ppo_teacher: pathlib.Path) -> None:
    reports: list[dict[str, float]] = []
    result = train(
        fast(),
        **BASE,
        teacher_checkpoint_path=ppo_teacher,
        dagger_steps=2,
        dagger_beta_fn=lambda step: jnp.asarray(0.5, jnp.float32),
        scramble_time=100,
        reset=False,
        log_training_metrics=True,
        progress_fn=lambda s, m: reports.append(dict(m)),
    )
    loaded = checkpoint.load(ppo_teacher)
    # Reset states (visited by every episode): the student acts as the PPO policy does there.
    obs = jnp.stack([jnp.linspace(-0.1, 0.1, 16), jnp.zeros((16,))], axis=-1)
    want, _ = loaded.make_policy(loaded.params, deterministic=True)(obs, jax.random.PRNGKey(0))
    got, _ = result.make_policy(result.params)(obs, jax.random.PRNGKey(0))
    assert float(np.mean(np.abs(np.asarray(got) - np.asarray(want)))) < 0.05
    assert reports[-1]["training/actor_loss"] < 0.01
    assert all(abs(m["training/teacher_fraction"] - 0.5) < 0.1 for m in reports)
    # Staggered episode clocks: episodes end within the first 50 of 100 steps.
    assert reports[0]["episode/count"] > 0
    with pytest.raises(BCConfigError, match=r"teacher_checkpoint_path .* observations \[2\].*\[3\]"):
        train(_ThreeObs(), **BASE, teacher_checkpoint_path=ppo_teacher, dagger_steps=1)


# ---- exact resume, devices, NaN guard -------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs(learned: dict[str, Any]) -> dict[str, Any]:
    """9 DAgger steps in one go, and the `learned` run (6 steps) resumed to 9.

    Evaluation intervals of 3 steps in every run, so the per-interval resets (`reset=True`) line up.
    """
    kw = {**BASE, "teacher_inference_fn": teacher, "dagger_steps": 9, "run_evals": False}
    return _testing.full_and_resumed(train, kw, learned["root"])


def test_resume_is_bit_exact(learned: dict[str, Any], runs: dict[str, Any]) -> None:
    assert resumed_is_bit_exact(learned["result"].params, runs["full"].params, runs["resumed"].params)


def test_trains_on_both_forced_devices(runs: dict[str, Any]) -> None:
    assert on_both_devices(runs["full"].params)


def test_nan_guard_names_the_loss(learned: dict[str, Any]) -> None:
    def nan_teacher(obs: jax.Array, key: jax.Array) -> tuple[jax.Array, dict[str, Any]]:
        return jnp.full((obs.shape[0], 1), jnp.nan, jnp.float32), {}

    kw = {**BASE, "teacher_inference_fn": nan_teacher, "run_evals": False, "dagger_steps": 9, "num_evals": 2}
    _testing.assert_nan_guard(train, fast(), kw, learned["root"], "loss", 7 * STEP, 6 * STEP)
