"""Settings resolution: defaults < config file < --set < flags; env and network options; config.json."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from brax_train.cli import _defaults
from brax_train.cli._errors import UsageError, one_line
from brax_train.cli._settings import RunSpec, load_config_file, ppo_kwargs, resolve, settable_keys


def _resolve(**kw: Any) -> RunSpec:
    args: dict[str, Any] = {
        "env": "fast",
        "backend": None,
        "config_file": None,
        "settings": [],
        "imports": [],
        "flags": {},
    }
    args.update(kw)
    return resolve(**args)


def test_env_defaults() -> None:
    spec = _resolve()
    assert spec.env == "fast"
    assert spec.ppo == _defaults.defaults_for("fast")
    assert spec.env_kwargs == {} and spec.imports == ()
    assert _resolve(env=None).env == "inverted_pendulum"


def test_every_default_is_valid_and_settable() -> None:
    keys = set(settable_keys())
    for name in ("fast", "inverted_pendulum", "ant", "humanoid", "reacher", "custom"):
        d = _defaults.defaults_for(name)
        assert set(d) <= keys
        assert d["batch_size"] * d["num_minibatches"] % d["num_envs"] == 0, name


def test_precedence(tmp_path: pathlib.Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        'env = "fast"\nnum_evals = 7\nlearning_rate = 1e-3\nnum_timesteps = 2e4\nseed = 4\n'
        "[network_factory]\npolicy_hidden_layer_sizes = [8]\n"
    )
    spec = _resolve(
        env=None,
        config_file=str(cfg),
        settings=[("learning_rate", 5e-4), ("seed", 5)],
        flags={"seed": 6, "num_envs": None},
    )
    assert spec.env == "fast"
    assert spec.ppo["num_evals"] == 7  # file over defaults
    assert spec.ppo["learning_rate"] == 5e-4  # --set over file
    assert spec.ppo["seed"] == 6  # flag over --set
    assert spec.ppo["num_envs"] == _defaults.defaults_for("fast")["num_envs"]  # None flags change nothing
    assert spec.ppo["num_timesteps"] == 20_000 and isinstance(spec.ppo["num_timesteps"], int)
    assert spec.ppo["network_factory"] == {"policy_hidden_layer_sizes": [8]}


def test_env_and_network_options(tmp_path: pathlib.Path) -> None:
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"env": {"name": "fast", "target": 0.5}, "env.damping": 2.0}))
    spec = _resolve(
        env=None,
        config_file=str(cfg),
        backend="none",
        settings=[
            ("network_factory.activation", "jax.nn.tanh"),
            ("network_factory.value_hidden_layer_sizes", [4, 4]),
        ],
    )
    assert spec.env == "fast"
    assert spec.env_kwargs == {"target": 0.5, "damping": 2.0, "backend": "none"}
    assert spec.ppo["network_factory"]["activation"] == "jax.nn.tanh"
    import jax

    assert ppo_kwargs(spec.ppo)["network_factory"]["activation"] is jax.nn.tanh


def test_config_file_flattening(tmp_path: pathlib.Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('import = ["m"]\n[env]\nname = "ant"\nreset_noise_scale = 0.2\n')
    assert load_config_file(str(cfg)) == [
        ("import", ["m"]),
        ("env.name", "ant"),
        ("env.reset_noise_scale", 0.2),
    ]


def test_set_cannot_choose_env() -> None:
    with pytest.raises(UsageError, match="choose the environment with --env"):
        _resolve(settings=[("env", "ant")])


def test_bad_network_factory_name() -> None:
    with pytest.raises(UsageError, match="network_factory: cannot resolve"):
        _resolve(settings=[("network_factory", "no_such_module.factory")])


def test_run_spec_round_trip() -> None:
    spec = _resolve(settings=[("env.target", 2.0)])
    data = json.loads(json.dumps(spec.to_json()))
    assert RunSpec.from_json(data, "x") == spec
    with pytest.raises(UsageError, match="x: missing key 'ppo'"):
        RunSpec.from_json({k: v for k, v in data.items() if k != "ppo"}, "x")


def test_one_line() -> None:
    assert one_line("invalid PPO settings:\n  - a must be b\n  - c must be d") == (
        "invalid PPO settings: a must be b; c must be d"
    )
