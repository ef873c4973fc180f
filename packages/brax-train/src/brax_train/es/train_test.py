"""End-to-end tests of `es.train` on the `fast` environment (2 forced CPU devices by default)."""

from __future__ import annotations

import dataclasses
from typing import Any

import brax_envs
import jax
import jax.numpy as jnp
import pytest

from brax_train import _testing, agents, checkpoint
from brax_train._testing import POPULATION_STEP as STEP
from brax_train._testing import assert_same_actions, fast, leaves_equal
from brax_train.es import (
    ESConfig,
    ESConfigError,
    ESParams,
    FitnessShaping,
    policy_from_checkpoint,
    train,
)

BASE = _testing.population_on_fast(
    ESConfig,
    learning_rate=0.05,
    perturbation_std=0.1,
    fitness_shaping=FitnessShaping.CENTERED_RANK,
    network_factory={"hidden_layer_sizes": (8,)},
)


# ---- validation ---------------------------------------------------------------------------------------


def test_validation_names_every_bad_setting() -> None:
    with pytest.raises(ESConfigError) as e:
        train(
            fast(),
            population_size=0,
            perturbation_std=0.0,
            l2coeff=-1.0,
            fitness_shaping="BEST",
            num_envs=5,
            center_fitness=1,
        )
    msg = str(e.value)
    for part in (
        "population_size must be an int >= 1, got 0",
        "perturbation_std must be a number > 0, got 0.0",
        "l2coeff must be a number >= 0, got -1.0",
        "fitness_shaping must be one of ORIGINAL, CENTERED_RANK, WIERSTRA, got 'BEST'",
        "center_fitness must be a bool, got 1",
    ):
        assert part in msg
    with pytest.raises(ESConfigError, match=r"num_envs \(5\) is not a setting of es.train: .* = 16 rollouts"):
        train(fast(), population_size=8, num_envs=5)
    with pytest.raises(ESConfigError, match=r"episode_length \(2\) must be >= action_repeat \(4\)"):
        train(fast(), episode_length=2, action_repeat=4)
    with pytest.raises(ESConfigError, match="did you mean 'population_size'"):
        train(fast(), populaton_size=8)
    with pytest.raises(ESConfigError, match=r"'population_size'.*both"):
        train(fast(), config=ESConfig(population_size=4), population_size=8)


def test_config_defaults_are_braxs() -> None:
    c = ESConfig()
    assert (c.num_timesteps, c.episode_length, c.population_size, c.learning_rate) == (100, 1000, 128, 1e-3)
    assert (c.perturbation_std, c.l2coeff, c.fitness_shaping, c.center_fitness) == (
        0.1,
        0.0,
        FitnessShaping.ORIGINAL,
        False,
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.population_size = 5  # type: ignore[misc]


# ---- learning, callbacks, checkpoints and exact resume ---------------------------------------------------


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """16 generations in one run (with evaluations), and as 8 to a checkpoint + 8 resumed from it."""
    root = tmp_path_factory.mktemp("es_ckpt")
    reports: list[tuple[int, dict[str, float]]] = []
    kw: dict[str, Any] = {**BASE, "seed": 1}
    full, progress, snapshots = _testing.recorded(
        train, fast(), **kw, num_timesteps=16 * STEP, num_evals=3, deterministic_eval=True
    )
    a = train(
        fast(), **kw, num_timesteps=8 * STEP, num_evals=2, run_evals=False, save_checkpoint_path=root / "a"
    )
    # one training-metrics report per generation: chunks of one step, unlike the other runs
    b = train(
        fast(),
        **kw,
        num_timesteps=16 * STEP,
        num_evals=2,
        run_evals=False,
        log_training_metrics=True,
        progress_fn=lambda s, m: reports.append((s, dict(m))),
        restore_checkpoint_path=root / "a",
    )
    return {
        "root": root,
        "full": full,
        "a": a,
        "b": b,
        "progress": progress,
        "snapshots": snapshots,
        "reports": reports,
    }


def test_learns_fast_env(runs: dict[str, Any]) -> None:
    progress = runs["progress"]
    assert [s for s, _ in progress] == [0, 8 * STEP, 16 * STEP]
    first, last = progress[0][1]["eval/episode_reward"], progress[-1][1]["eval/episode_reward"]
    assert last > first + 10.0, progress
    m = progress[-1][1]
    for key in ("training/params_norm", "training/eval_scores_mean", "training/weights", "training/sps"):
        assert key in m
    assert runs["full"].metrics == m


def test_policy_params_fn_and_params(runs: dict[str, Any]) -> None:
    snaps = runs["snapshots"]
    assert [s for s, _, _ in snaps] == [0, 8 * STEP, 16 * STEP]
    make_policy, params, _ = runs["full"]
    assert isinstance(params, ESParams) and leaves_equal(snaps[-1][2], params)
    assert params.normalizer.count.to_int() > 0  # statistics come from the rollouts' observations
    action, extras = make_policy(params)(jnp.zeros((3, 2)), jax.random.PRNGKey(0))
    assert action.shape == (3, 1) and extras == {} and bool(jnp.all(jnp.abs(action) <= 1.0))
    pair, _ = make_policy(tuple(params))(jnp.zeros((3, 2)), jax.random.PRNGKey(0))  # a Brax-style pair
    assert bool(jnp.all(pair == action))
    with pytest.raises(TypeError, match="expects ESParams"):
        make_policy(params.policy)


def test_resume_is_bit_exact(runs: dict[str, Any]) -> None:
    assert not leaves_equal(runs["a"].params, runs["full"].params)
    assert leaves_equal(runs["b"].params, runs["full"].params)


def test_training_metrics_count_first_episodes(runs: dict[str, Any]) -> None:
    reports = runs["reports"]
    assert sorted({s for s, _ in reports}) == [g * STEP for g in range(9, 17)]
    for _, m in reports:
        assert m["episode/count"] == 16.0  # one first episode per rollout, ended by the time limit
        assert m["episode/length"] == 50.0
        assert m["episode/sum_reward"] == pytest.approx(m["training/eval_scores_mean"], rel=1e-5)
        assert m["training/rollout_length"] == 50.0


def test_checkpoint_rebuilds_the_policy(runs: dict[str, Any]) -> None:
    step_dir = checkpoint.resolve(runs["root"] / "a")
    assert step_dir.name == str(8 * STEP)
    meta = checkpoint.read_meta(step_dir)
    assert meta["agent"] == "es" and meta["network"]["kwargs"]["activation"] == "jax.nn.relu"
    assert meta["config"]["fitness_shaping"] == "CENTERED_RANK" and meta["config"]["num_envs"] == 16
    make_policy, params = policy_from_checkpoint(step_dir, meta)
    assert leaves_equal(params, runs["a"].params)
    obs = jax.random.normal(jax.random.PRNGKey(1), (7, 2))
    assert_same_actions(make_policy(params, deterministic=True), runs["a"].make_policy(runs["a"].params), obs)


def test_checkpoint_load_policy_dispatches_on_the_agent(runs: dict[str, Any]) -> None:
    obs = jax.random.normal(jax.random.PRNGKey(2), (5, 2))
    loaded = checkpoint.load_policy(runs["root"] / "a")
    assert_same_actions(loaded, runs["a"].make_policy(runs["a"].params), obs)


def test_nan_guard_names_step_quantity_and_checkpoint(runs: dict[str, Any]) -> None:
    kw = {
        **BASE, "learning_rate": float("nan"), "num_timesteps": 16 * STEP, "num_evals": 2, "run_evals": False
    }
    _testing.assert_nan_guard(train, fast(), kw, runs["root"] / "a", "parameters", 9 * STEP, 8 * STEP)


def test_dict_observations_are_refused() -> None:
    class DictObs(brax_envs.Wrapper):
        @property
        def observation_size(self) -> Any:
            return {"state": (2,)}

    with pytest.raises(ValueError, match="array observations only"):
        train(DictObs(fast()), **BASE, num_timesteps=STEP)


def test_exposes_what_the_agent_registry_reads() -> None:
    """`brax_train.agents.spec("es")` is the package's explicit `SPEC`."""
    from brax_train import es
    from brax_train.es import config as es_config

    assert es.ESConfig is ESConfig and es_config.validate is not None
    assert es.env_steps_per_update(ESConfig(population_size=4, episode_length=10, action_repeat=2)) == 80
    assert es.policy_from_checkpoint is policy_from_checkpoint and es.train is train
    spec = agents.spec("es")
    assert spec is es.SPEC and spec.config_class is ESConfig and spec.counts_env_steps
    assert spec.policy_from_checkpoint is policy_from_checkpoint and es.CODEC.agent == "es"


class _OneStep(brax_envs.Wrapper):
    """`fast` whose every episode ends after its first step."""

    def step(self, state: brax_envs.State, action: jax.Array) -> brax_envs.State:
        s = self.env.step(state, action)
        return s.replace(done=jnp.ones_like(s.done))


def test_counts_only_steps_before_done_as_brax() -> None:
    """A generation counts the steps of running episodes (16 here, not STEP): 8 generations of 16."""
    reports: list[tuple[int, dict[str, float]]] = []
    train(
        _OneStep(fast()),
        **BASE,
        num_timesteps=8 * 16,
        num_evals=3,
        run_evals=False,
        progress_fn=lambda s, m: reports.append((s, dict(m))),
    )
    assert [s for s, _ in reports] == [64, 128]
    assert all(m["training/rollout_length"] == 1.0 for _, m in reports)
