"""End-to-end tests of `rppo.train` on `fast`: exact resume, checkpoints, export with the hidden state."""

from __future__ import annotations

import pathlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import onnxruntime  # type: ignore[import-untyped]  # ships no py.typed
import pytest

from brax_train import agents, checkpoint, export
from brax_train._testing import PPO_ON_FAST, fast, leaves_equal
from brax_train.ppo import PPOParams
from brax_train.rppo import MemoryWrapper, RPPOConfig, RPPOConfigError, make_rppo_networks, train

H = 8
BASE: dict[str, Any] = {
    **PPO_ON_FAST,
    "hidden_size": H,
    "network_factory": {"policy_hidden_layer_sizes": [16], "value_hidden_layer_sizes": [16]},
}
STEP = 16 * 10 * 4  # env steps per training step


OBS = 2
"""`fast`'s observation size."""


def test_fast_observation_size() -> None:
    assert fast().observation_size == OBS


def test_registered_and_validated() -> None:
    spec = agents.spec("rppo")
    assert spec.config_class is RPPOConfig and spec.train is train
    with pytest.raises(RPPOConfigError) as e:
        train(fast(), **{**BASE, "hidden_size": 0, "learning_rate": -1.0})
    assert "hidden_size must be an int >= 1" in str(e.value) and "learning_rate" in str(e.value)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("rppo")
    full = train(fast(), **BASE, num_timesteps=8 * STEP, num_evals=3)
    a = train(fast(), **BASE, num_timesteps=4 * STEP, num_evals=3, save_checkpoint_path=root / "a")
    b = train(
        fast(), **BASE, num_timesteps=8 * STEP, num_evals=3, restore_checkpoint_path=root / "a",
        save_checkpoint_path=root / "b",
    )
    return {"root": root, "full": full, "a": a, "b": b}


def test_resume_is_bit_exact(runs: dict[str, Any]) -> None:
    assert isinstance(runs["full"].params, PPOParams)
    assert not leaves_equal(runs["a"].params, runs["full"].params)
    assert leaves_equal(runs["b"].params, runs["full"].params)
    # The hidden states mid-episode are part of the checkpointed environment state.
    meta = checkpoint.read_meta(checkpoint.resolve(runs["root"] / "a"))
    assert meta["agent"] == "rppo" and meta["hidden_size"] == H
    assert meta["observation_shapes"] == [OBS + H]


def test_load_policy_from_checkpoint_alone(runs: dict[str, Any]) -> None:
    policy = checkpoint.load_policy(runs["root"] / "a", deterministic=True)
    make_policy, params, _ = runs["a"]
    obs = jax.random.normal(jax.random.PRNGKey(1), (7, OBS + H))
    expected, _ = make_policy(params, deterministic=True)(obs, jax.random.PRNGKey(0))
    got, _ = policy(obs, jax.random.PRNGKey(0))
    assert got.shape == (7, fast().action_size + H)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))
    # A factory given by the caller gets the environment's own sizes.
    seen: list[tuple[int, int, int]] = []

    def factory(obs_size: int, act_size: int, **kw: Any) -> Any:
        seen.append((obs_size, act_size, kw["hidden_size"]))
        return make_rppo_networks(
            obs_size, act_size, policy_hidden_layer_sizes=(16,), value_hidden_layer_sizes=(16,), **kw
        )

    loaded = checkpoint.load(runs["root"] / "a", network_factory=factory)
    assert seen == [(OBS, fast().action_size, H)]
    assert leaves_equal(loaded.params, params)


def _rollout_inputs(steps: int) -> np.ndarray:
    """`steps` observations of one `fast` episode (without the memory part)."""
    env = fast()
    state = jax.jit(env.reset)(jax.random.PRNGKey(3))
    step = jax.jit(env.step)
    out = []
    for i in range(steps):
        out.append(np.asarray(state.obs))
        state = step(state, jnp.full((env.action_size,), np.sin(0.1 * i), jnp.float32))
    return np.stack(out).astype(np.float32)


@pytest.mark.parametrize("fmt", ["onnx", "stablehlo"])
def test_export_carries_the_hidden_state(
    runs: dict[str, Any], tmp_path: pathlib.Path, fmt: export.Format
) -> None:
    make_policy, params, _ = runs["b"]
    exported = export.export_policy(runs["root"] / "b", tmp_path / f"policy.{fmt}", format=fmt)
    n, a = OBS, fast().action_size
    assert exported.contract["input"]["shape"] == ["batch", n + H]
    assert exported.contract["output"]["shape"] == ["batch", a + H]
    assert exported.contract["recurrent"]["hidden_size"] == H
    if fmt == "onnx":
        session = onnxruntime.InferenceSession(str(exported.path), providers=["CPUExecutionProvider"])

        def run(x: np.ndarray) -> np.ndarray:
            return np.asarray(session.run(None, {export.INPUT_NAME: x})[0])
    else:
        call = jax.export.deserialize(bytearray(exported.path.read_bytes())).call

        def run(x: np.ndarray) -> np.ndarray:
            return np.asarray(call(jnp.asarray(x)))  # type: ignore[no-untyped-call]

    policy = jax.jit(make_policy(params, deterministic=True))
    xs = _rollout_inputs(100)
    h_jax = h_file = np.zeros((1, H), np.float32)
    worst = 0.0
    for x in xs:  # each side carries its own hidden state for 100 steps
        out_jax = np.asarray(
            policy(jnp.asarray(np.concatenate([x[None], h_jax], -1)), jax.random.PRNGKey(0))[0]
        )
        out_file = run(np.concatenate([x[None], h_file], -1))
        worst = max(worst, float(np.max(np.abs(out_jax - out_file))))
        h_jax, h_file = out_jax[:, a:], out_file[:, a:]
    assert np.max(np.abs(h_jax)) > 1e-3  # the state moved
    assert worst <= 1e-5, f"{fmt}: max |jax - exported| over 100 steps = {worst}"
    print(f"{fmt} max abs error over 100 steps: {worst:.3g}")


def test_policy_acts_on_the_memory_wrapped_env(runs: dict[str, Any]) -> None:
    make_policy, params, _ = runs["b"]
    env = MemoryWrapper(fast(), H)
    state = env.reset(jax.random.PRNGKey(0))
    action, extras = make_policy(params)(state.obs, jax.random.PRNGKey(1))
    assert action.shape == (env.action_size,) and set(extras) == {
        "log_prob",
        "raw_action",
        "distribution_params",
    }
    nxt = env.step(state, action)
    np.testing.assert_array_equal(nxt.obs[-H:], action[-H:])
    assert np.isfinite(np.asarray(nxt.obs)).all()
