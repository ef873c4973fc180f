"""Settings: preset < config file < --set < flags, all typed by tyro; env and network options; config.json."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import jax
import pytest

from brax_train import agents, presets
from brax_train.cli._errors import UsageError, one_line
from brax_train.cli._parser import Train, parse
from brax_train.cli._settings import RunSpec, agent_config, load_config_file, resolve, settable
from brax_train.es import ESConfig
from brax_train.ppo.config import PPOConfig, validate


def _resolve(*argv: str) -> tuple[RunSpec, Any]:
    train = parse(["train", *argv])
    assert isinstance(train, Train)
    return resolve(train)


def test_presets_are_ppo_configs() -> None:
    spec, config = _resolve("--env", "fast")
    assert config == presets.PPO_PRESETS["fast"] and spec.env == "fast"
    assert spec.settings == {k: getattr(config, k) for k in settable(PPOConfig)}
    assert spec.env_kwargs == {} and spec.imports == ()
    assert _resolve()[0].env == "inverted_pendulum"
    assert presets.preset("custom") is presets.PPO_BASE
    # The CLI's base differs from Google Brax's defaults, which stay in PPOConfig alone.
    assert (presets.PPO_BASE.learning_rate, PPOConfig().learning_rate) == (3e-4, 1e-4)
    for name, preset in presets.PPO_PRESETS.items():
        validate(preset, 1)
        assert preset.log_training_metrics and isinstance(preset.network_factory, dict), name


def test_agent_choice() -> None:
    spec, config = _resolve("--agent", "ppo", "--env", "fast")
    assert spec.agent == "ppo" and spec.to_json()["ppo"] == spec.settings and isinstance(config, PPOConfig)
    with pytest.raises(UsageError, match=r"--agent: unknown agent 'dqn'; accepted: ppo"):
        _resolve("--agent", "dqn")
    # Another agent: its own config class gives the flags, --set keys and the config.json entry.
    spec, es = _resolve("--agent", "es", "--env", "fast", "--population-size", "8", "--set", "l2coeff=0.5")
    assert isinstance(es, ESConfig) and (es.population_size, es.l2coeff) == (8, 0.5)
    assert spec.to_json()["agent"] == "es" and spec.to_json()["es"]["population_size"] == 8
    assert RunSpec.from_json(json.loads(json.dumps(spec.to_json())), "x") == spec
    with pytest.raises(UsageError, match=r"--set: unknown key 'batch_size'.*ESConfig fields"):
        _resolve("--agent", "es", "--set", "batch_size=4")
    # An agent's tuned preset, and its base settings elsewhere.
    tuned = _resolve("--agent", "sac", "--env", "inverted_pendulum")[1]
    assert tuned == presets.preset("inverted_pendulum", "sac")
    base = _resolve("--agent", "sac", "--env", "ant", "--num-envs", "2")[1]
    assert base.num_timesteps == presets.RUN_BASE["num_timesteps"]


def test_every_agent_preset_validates() -> None:
    for agent in agents.AGENTS:
        for env in (*presets.environments(agent), "custom"):
            if agent != "bc":  # BC's every run needs a teacher from the user
                agents.spec(agent).validate(presets.preset(env, agent), 1)
    assert presets.environments("apg") == ("reacher",) and presets.environments("bc") == ()


def test_derived_settings_are_resolved_before_the_run() -> None:
    # APG's `policy_updates` (Brax's) sets num_timesteps: the planned final step and resume need it.
    argv = ("--agent", "apg", "--env", "reacher", "--num-timesteps=0", "--set", "policy_updates=5")
    spec, apg = _resolve(*argv)
    assert apg.num_timesteps == 5 * apg.num_envs * apg.horizon_length * apg.action_repeat
    assert agent_config(spec) == apg and spec.settings["num_timesteps"] == 0


def test_precedence(tmp_path: pathlib.Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        'env = "fast"\nnum_evals = 7\nlearning_rate = 1e-3\nnum_timesteps = 2e4\nseed = 4\n'
        "[network_factory]\npolicy_hidden_layer_sizes = [8]\n"
    )
    _, config = _resolve("--config", str(cfg), "--set", "learning_rate=5e-4", "--set", "seed=5", "--seed=6")
    assert config.num_evals == 7  # file over the preset
    assert config.learning_rate == 5e-4  # --set over the file
    assert config.seed == 6  # flag over --set
    assert config.num_envs == presets.PPO_PRESETS["fast"].num_envs
    assert config.num_timesteps == 20_000 and isinstance(config.num_timesteps, int)
    assert config.network_factory == {"policy_hidden_layer_sizes": [8]}
    _, config = _resolve("--env", "fast", "--learning-rate", "1e-2", "--set", "learning_rate=5e-4")
    assert config.learning_rate == 1e-2  # every PPOConfig field is a flag


def test_set_values_are_typed_by_the_field() -> None:
    _, config = _resolve(
        "--env", "fast",
        "--set", "learning_rate_schedule=null",
        "--set", "normalize_observations=true",
        "--set", "num_timesteps=1_000_000",
        "--set", "reward_scaling=2",
        "--set", 'network_factory={"policy_hidden_layer_sizes": [16]}',
        "--set", "network_factory.value_hidden_layer_sizes=[4]",
    )  # fmt: skip
    assert config.learning_rate_schedule is None and config.normalize_observations is True
    assert config.num_timesteps == 1_000_000 and config.reward_scaling == 2.0
    assert config.network_factory == {"policy_hidden_layer_sizes": [16], "value_hidden_layer_sizes": [4]}


def test_env_and_network_options(tmp_path: pathlib.Path) -> None:
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"env": {"name": "fast", "target": 0.5}, "env.damping": 2.0}))
    spec, config = _resolve(
        "--config", str(cfg), "--backend", "none", "--set", "network_factory.activation=jax.nn.tanh"
    )
    assert spec.env == "fast"
    assert spec.env_kwargs == {"target": 0.5, "damping": 2.0, "backend": "none"}
    assert spec.settings["network_factory"]["activation"] == "jax.nn.tanh"
    assert isinstance(config.network_factory, dict) and config.network_factory["activation"] is jax.nn.tanh


def test_config_file_flattening(tmp_path: pathlib.Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('import = ["m"]\n[env]\nname = "ant"\nreset_noise_scale = 0.2\n')
    assert load_config_file(str(cfg)) == [
        ("import", ["m"]),
        ("env.name", "ant"),
        ("env.reset_noise_scale", 0.2),
    ]


def test_set_cannot_choose_env_or_import() -> None:
    with pytest.raises(UsageError, match="--set env: choose the environment with --env NAME"):
        _resolve("--set", "env=ant")
    with pytest.raises(UsageError, match="--set import: use --import MODULE"):
        _resolve("--set", "import=m")


def test_bad_network_factory_name() -> None:
    with pytest.raises(UsageError, match="network_factory: cannot resolve"):
        _resolve("--env", "fast", "--set", "network_factory=no_such_module.factory")


def test_run_spec_round_trip() -> None:
    spec, config = _resolve("--env", "fast", "--set", "env.target=2.0")
    data = json.loads(json.dumps(spec.to_json()))
    assert RunSpec.from_json(data, "x") == spec
    assert agent_config(spec) == config
    with pytest.raises(UsageError, match="x: missing key 'ppo'"):
        RunSpec.from_json({k: v for k, v in data.items() if k != "ppo"}, "x")
    # config.json of the first release names no agent: it is PPO's.
    assert RunSpec.from_json({k: v for k, v in data.items() if k != "agent"}, "x") == spec
    with pytest.raises(UsageError, match="x: unknown agent 'dqn'; accepted: ppo"):
        RunSpec.from_json({**data, "agent": "dqn"}, "x")
    # An older config.json records fewer keys: the rest are PPOConfig's defaults.
    recorded: dict[str, Any] = {"num_timesteps": 640, "num_envs": 8, "batch_size": 8, "episode_length": 20}
    assert agent_config(RunSpec("fast", {}, (), recorded)) == PPOConfig(**recorded)
    with pytest.raises(UsageError, match=r"x: unknown ppo.train setting\(s\): 'num_env'"):
        agent_config(RunSpec("fast", {}, (), {"num_env": 8}), "x")


def test_one_line() -> None:
    assert one_line("invalid PPO settings:\n  - a must be b\n  - c must be d") == (
        "invalid PPO settings: a must be b; c must be d"
    )
