"""Policy export: the StableHLO and ONNX files equal the policy, run without brax-* (ONNX without jax
too), their contract matches the environment, and bad input names its cause."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import subprocess
import sys
from typing import Any

import brax_envs
import jax
import jax.numpy as jnp
import numpy as np
import onnxruntime  # type: ignore[import-untyped]  # ships no py.typed
import pytest

from brax_train import checkpoint, export
from brax_train.cli import main

COMMON = "--env fast --set num_evals=1 --set run_evals=false --set episode_length=16 --no-replay"
NETS = "--set network_factory.hidden_layer_sizes=[8]"
PPO_NETS = (
    "--set network_factory.policy_hidden_layer_sizes=[8] --set network_factory.value_hidden_layer_sizes=[8]"
)
NORM = "--set normalize_observations=true"  # the normalizer is part of what is compared
RUNS = {
    "ppo": f"--num-timesteps 160 --num-envs 4 --set batch_size=4 --set num_minibatches=2 "
    f"--set unroll_length=5 {PPO_NETS} {NORM}",
    "es": f"--agent es --num-timesteps 320 --set population_size=4 {NETS} {NORM}",
}
SUFFIX = {"stablehlo": ".stablehlo", "onnx": ".onnx"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pathlib.Path]:
    """A `brax-train train` run directory per agent."""
    root = tmp_path_factory.mktemp("export_runs")
    for agent, flags in RUNS.items():
        argv = ["train", *COMMON.split(), *flags.split(), "--run-dir", str(root / agent)]
        assert main(argv) == 0
    return {agent: root / agent for agent in RUNS}


@pytest.fixture(scope="module")
def exported(
    runs: dict[str, pathlib.Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[tuple[str, str], export.Exported]:
    """Each run exported in each format."""
    out = tmp_path_factory.mktemp("exported")
    return {
        (agent, fmt): export.export_policy(run, out / f"{agent}{SUFFIX[fmt]}", fmt)  # type: ignore[arg-type]
        for agent, run in runs.items()
        for fmt in export.FORMATS
    }


def _observations(n: int = 1000) -> np.ndarray:
    return np.random.default_rng(0).normal(size=(n, 2)).astype(np.float32)


def _reference(run: pathlib.Path, obs: np.ndarray) -> np.ndarray:
    """Actions of the checkpoint's deterministic policy."""
    loaded = checkpoint.load(run)
    policy = loaded.make_policy(loaded.params, deterministic=True)
    return np.asarray(jax.jit(policy)(jnp.asarray(obs), jax.random.PRNGKey(7))[0])


def _run_onnx(path: pathlib.Path, obs: np.ndarray) -> np.ndarray:
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, {export.INPUT_NAME: obs})[0])


def _run_stablehlo(path: pathlib.Path, obs: np.ndarray) -> np.ndarray:
    exported = jax.export.deserialize(bytearray(path.read_bytes()))
    return np.asarray(exported.call(obs))  # type: ignore[no-untyped-call]


@pytest.mark.parametrize("agent", sorted(RUNS))
def test_outputs_equal_the_policy(
    agent: str, runs: dict[str, pathlib.Path], exported: dict[tuple[str, str], export.Exported]
) -> None:
    obs = _observations()
    want = _reference(runs[agent], obs)
    assert want.shape == (1000, 1) and np.ptp(want) > 0  # a policy that varies with the observation
    for fmt, run_file in (("onnx", _run_onnx), ("stablehlo", _run_stablehlo)):
        path = exported[agent, fmt].path
        np.testing.assert_allclose(run_file(path, obs), want, rtol=0, atol=1e-5, err_msg=fmt)
        # the batch dimension is symbolic: one observation works too
        np.testing.assert_allclose(run_file(path, obs[:1]), want[:1], rtol=0, atol=1e-5, err_msg=fmt)


def _isolated_path(tmp_path: pathlib.Path, packages: tuple[str, ...]) -> pathlib.Path:
    """A directory holding only `packages` (links to the installed ones, with their vendored `.libs`)."""
    farm = tmp_path / "site"
    farm.mkdir()
    for name in packages:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.submodule_search_locations is not None, name
        package = pathlib.Path(next(iter(spec.submodule_search_locations)))
        for p in (package, package.with_name(f"{name}.libs")):
            if p.exists():
                (farm / p.name).symlink_to(p)
    return farm


_ISOLATED = """
import importlib.util, sys
site, absent, model, obs_path, out_path = sys.argv[1:]
sys.path.insert(0, site)
import numpy as np
obs = np.load(obs_path)
{run}
np.save(out_path, action)
for name in absent.split(","):
    assert importlib.util.find_spec(name) is None, name + " is importable"
    assert name not in sys.modules, name + " was imported"
"""
_BRAX = ("brax_train", "brax_envs", "brax_physics", "brax_io", "brax_math")


def _run_isolated(
    tmp_path: pathlib.Path, packages: tuple[str, ...], absent: tuple[str, ...], run: str, model: pathlib.Path
) -> np.ndarray:
    """`action` computed by `run` from `model` and `obs` in `python -I -S` (no site-packages, no
    PYTHONPATH, no user site) that can import only `packages`; checks that `absent` cannot be imported."""
    obs, out = tmp_path / "obs.npy", tmp_path / "out.npy"
    np.save(obs, _observations())
    site = _isolated_path(tmp_path, packages)
    argv = [str(site), ",".join(absent), str(model), str(obs), str(out)]
    cmd = [sys.executable, "-I", "-S", "-c", _ISOLATED.format(run=run), *argv]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return np.asarray(np.load(out))


def test_onnx_runs_with_onnxruntime_and_numpy_only(
    runs: dict[str, pathlib.Path], exported: dict[tuple[str, str], export.Exported], tmp_path: pathlib.Path
) -> None:
    run = (
        "import onnxruntime\naction = onnxruntime.InferenceSession(model).run(None, {'observation': obs})[0]"
    )
    absent = ("jax", "jaxlib", "onnx", *_BRAX)
    got = _run_isolated(tmp_path, ("onnxruntime", "numpy"), absent, run, exported["ppo", "onnx"].path)
    np.testing.assert_allclose(got, _reference(runs["ppo"], _observations()), rtol=0, atol=1e-5)


def test_stablehlo_runs_with_jax_alone(
    runs: dict[str, pathlib.Path], exported: dict[tuple[str, str], export.Exported], tmp_path: pathlib.Path
) -> None:
    run = "import jax\nexported = jax.export.deserialize(bytearray(open(model, 'rb').read()))\n"
    run += "action = np.asarray(exported.call(obs))"
    # jax and its dependencies, and flatbuffers, which jax's serializer imports without declaring it
    jax_only = ("jax", "jaxlib", "ml_dtypes", "numpy", "opt_einsum", "scipy", "flatbuffers")
    got = _run_isolated(tmp_path, jax_only, ("flax", "orbax", *_BRAX), run, exported["es", "stablehlo"].path)
    np.testing.assert_allclose(got, _reference(runs["es"], _observations()), rtol=0, atol=1e-5)


def test_contract_matches_the_env(
    runs: dict[str, pathlib.Path], exported: dict[tuple[str, str], export.Exported]
) -> None:
    env = brax_envs.get_environment("fast")
    for (agent, fmt), r in exported.items():
        c = json.loads(r.contract_path.read_text())
        assert c == r.contract and r.contract_path == r.path.with_name(r.path.name + ".json")
        step_dir = checkpoint.resolve(runs[agent])
        assert (c["format"], c["agent"], c["env"], c["file"]) == (fmt, agent, "fast", r.path.name)
        assert (c["step"], c["source"]) == (int(step_dir.name), str(step_dir))
        assert c["observation"]["size"] == env.observation_size and c["observation"]["shape"] == [2]
        assert c["input"]["shape"] == ["batch", env.observation_size]
        assert c["output"]["shape"] == ["batch", env.action_size]
        unscaled = {"size": env.action_size, "low": [-1.0], "high": [1.0], "scaled_in_graph": False}
        assert c["action"] == unscaled
        assert c["dt"] == pytest.approx(float(env.dt)) and c["action_repeat"] == 1
        assert c["normalize_observations"] is True and c["versions"]["jax"] == jax.__version__
        assert ("onnx" in c["versions"]) == (fmt == "onnx")


def test_action_range_is_scaled_in_the_graph(runs: dict[str, pathlib.Path], tmp_path: pathlib.Path) -> None:
    loaded = checkpoint.load(runs["es"])
    obs = _observations()
    want = (_reference(runs["es"], obs) + 1.0) * 2.0  # [-1, 1] onto [0, 4]
    for fmt, run_file in (("onnx", _run_onnx), ("stablehlo", _run_stablehlo)):
        r = export.export_policy(
            (loaded.make_policy, loaded.params),
            tmp_path / f"p{SUFFIX[fmt]}",
            fmt,  # type: ignore[arg-type]
            observation_size=2,
            action_range=(0.0, 4.0),
            env="fast",
            dt=0.02,
        )
        np.testing.assert_allclose(run_file(r.path, obs), want, rtol=0, atol=1e-5, err_msg=fmt)
        assert r.contract["action"] == {"size": 1, "low": [0.0], "high": [4.0], "scaled_in_graph": True}
        assert (r.contract["env"], r.contract["dt"], r.contract["agent"]) == ("fast", 0.02, None)


def test_cli_writes_both_files(runs: dict[str, pathlib.Path], tmp_path: pathlib.Path) -> None:
    for fmt in export.FORMATS:
        out = tmp_path / f"policy{SUFFIX[fmt]}"
        assert main(["export", str(runs["ppo"]), "--format", fmt, "--out", str(out)]) == 0
        contract = json.loads(export.contract_path(out).read_text())
        assert out.stat().st_size > 0 and contract["format"] == fmt and contract["agent"] == "ppo"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "policy.onnx",
        "policy.onnx.json",
        "policy.stablehlo",
        "policy.stablehlo.json",
    ]


def _callback_policy(params: Any, deterministic: bool = True) -> Any:
    """A policy that calls back into Python, which neither format can hold."""

    def policy(obs: jax.Array, key: jax.Array) -> tuple[jax.Array, dict[str, Any]]:
        out = jax.ShapeDtypeStruct(obs.shape, obs.dtype)  # type: ignore[no-untyped-call]
        return jnp.tanh(jax.pure_callback(np.asarray, out, obs)), {}

    return policy


def _sorting_policy(params: Any, deterministic: bool = True) -> Any:
    """A policy with `sort`, which StableHLO holds and our ONNX export does not."""
    return lambda obs, key: (jnp.sort(obs, axis=-1)[..., :1] * params, {})


def test_unexpressible_ops_are_named(tmp_path: pathlib.Path) -> None:
    for fmt in export.FORMATS:
        path = tmp_path / f"p{SUFFIX[fmt]}"
        path.write_bytes(b"old")  # a failed export leaves an existing file as it was
        with pytest.raises(export.ExportError, match=rf"'pure_callback'.*{fmt}"):
            export.export_policy((_callback_policy, None), path, fmt, observation_size=2)  # type: ignore[arg-type]
        assert path.read_bytes() == b"old" and not export.contract_path(path).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.onnx", "p.stablehlo"]  # no temp files left
    with pytest.raises(export.ExportError, match=r"'sort'.*onnx"):
        export.export_policy((_sorting_policy, 2.0), tmp_path / "s.onnx", "onnx", observation_size=2)
    r = export.export_policy((_sorting_policy, 2.0), tmp_path / "s.stablehlo", observation_size=2)
    np.testing.assert_allclose(_run_stablehlo(r.path, np.array([[3.0, -1.0]], np.float32)), [[-2.0]])


def test_bad_sources_and_formats(
    runs: dict[str, pathlib.Path], tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ValueError, match="unknown export format 'tflite'; known formats: stablehlo, onnx"):
        export.export_policy(runs["ppo"], tmp_path / "p", "tflite")  # type: ignore[arg-type]
    # a run whose only checkpoint step never finished (no manifest)
    broken = tmp_path / "run"
    (broken / "checkpoints" / "160" / "meta").mkdir(parents=True)
    (broken / "config.json").write_text((runs["ppo"] / "config.json").read_text())
    with pytest.raises(checkpoint.CheckpointNotFoundError, match="no complete checkpoint step"):
        export.export_policy(broken, tmp_path / "p.onnx", "onnx")
    assert main(["export", str(broken), "--format", "onnx", "--out", str(tmp_path / "p.onnx")]) == 1
    assert "no complete checkpoint step" in capsys.readouterr().err
    assert main(["export", str(runs["ppo"]), "--format", "tflite", "--out", str(tmp_path / "p")]) == 2
    with pytest.raises(ValueError, match="needs observation_size="):
        export.export_policy((_sorting_policy, 2.0), tmp_path / "p.onnx", "onnx")
    assert not list(tmp_path.glob("p*"))


def test_dict_observations_are_refused_by_key(
    runs: dict[str, pathlib.Path], tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loaded = checkpoint.load(runs["ppo"])
    # a dict observation without the key the recorded policy reads cannot be exported
    kwargs = {**loaded.meta["network"]["kwargs"], "policy_obs_key": "obs"}
    network = {**loaded.meta["network"], "kwargs": kwargs}
    meta = {**loaded.meta, "observation_shapes": {"state": [2], "privileged_state": [5]}, "network": network}
    monkeypatch.setattr(checkpoint, "load", lambda *a, **k: loaded._replace(meta=meta))
    refused = "dict observations \\(keys 'state', 'privileged_state'\\) and its networks name no policy_obs"
    with pytest.raises(export.ExportError, match=refused):
        export.export_policy(runs["ppo"], tmp_path / "p.onnx", "onnx")


def test_missing_onnx_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    monkeypatch.setitem(sys.modules, "onnx", None)  # makes `import onnx` fail
    with pytest.raises(ImportError, match=r"pip install 'brax-train\[export\]'"):
        export.export_policy((_sorting_policy, 2.0), tmp_path / "p.onnx", "onnx", observation_size=2)
