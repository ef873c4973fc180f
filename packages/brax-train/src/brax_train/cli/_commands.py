"""The `train`, `resume`, `eval`, `render` and `envs` commands."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import pathlib
import shutil
import sys
import time
from collections.abc import Iterator, Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from brax_train.cli import _rundir, _settings
from brax_train.cli._errors import CommandError, UsageError, one_line
from brax_train.cli._parser import RENDER_SUFFIXES
from brax_train.cli._progress import Progress
from brax_train.cli._rundir import RunDir
from brax_train.cli._settings import RunSpec

_VERSIONED = (
    "brax-train",
    "brax-envs",
    "brax-io",
    "brax-physics",
    "brax-math",
    "jax",
    "jaxlib",
    "mujoco",
    "flax",
    "optax",
    "orbax-checkpoint",
)


def package_versions(names: tuple[str, ...] = _VERSIONED) -> dict[str, str | None]:
    """Installed versions (None when missing)."""
    out: dict[str, str | None] = {}
    for n in names:
        try:
            out[n] = version(n)
        except PackageNotFoundError:
            out[n] = None
    return out


def _out(text: str) -> None:
    print(text, flush=True)


def _err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@contextlib.contextmanager
def _precision(spec: RunSpec) -> Iterator[None]:
    import jax

    # Evaluation and rendering use the run's explicit precision, as training did (no silent TF32).
    with jax.default_matmul_precision(str(spec.ppo.get("matmul_precision", "highest"))):
        yield


# ---- train / resume ---------------------------------------------------------------------------------


def cmd_train(args: argparse.Namespace) -> int:
    """`brax-train train`: resolve settings, create the run directory and train."""
    spec = _settings.resolve(
        env=args.env,
        backend=args.backend,
        config_file=args.config,
        settings=args.settings,
        imports=args.imports,
        flags={"num_timesteps": args.num_timesteps, "num_envs": args.num_envs, "seed": args.seed},
    )
    from brax_train.cli._rollout import make_env

    env = make_env(spec)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    run = RunDir(args.run_dir or pathlib.Path("runs") / f"{spec.env}-{stamp}")
    if run.path.exists() and (not run.path.is_dir() or any(run.path.iterdir())):
        raise UsageError(
            f"--run-dir: {str(run.path)!r} already exists and is not empty; continue it with "
            f"`brax-train resume {run.path}` or choose a new directory"
        )
    run.write_config(
        spec,
        {
            "created": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "argv": sys.argv[1:],
            "versions": package_versions(),
        },
    )
    _err(f"brax-train: training {spec.env} for {spec.ppo['num_timesteps']:,} steps into {run.path}")
    return _train(run, spec, env, restore=None, start_step=0, replay=not args.no_replay)


def _clean_incomplete(run: RunDir) -> None:
    from brax_train import checkpoint

    if not run.checkpoints.is_dir():
        return
    for d in sorted(run.checkpoints.iterdir()):
        # Steps without a manifest, and orbax's temporary directories, are saves a kill interrupted:
        # never restorable, and they would collide with the steps the resumed run writes.
        incomplete = d.is_dir() and d.name.isdigit() and not (d / checkpoint.MANIFEST).is_file()
        if incomplete or (d.is_dir() and "tmp" in d.name):
            _err(f"brax-train: removing incomplete checkpoint {d}")
            shutil.rmtree(d)


def cmd_resume(args: argparse.Namespace) -> int:
    """`brax-train resume DIR`: continue from the latest complete checkpoint to num_timesteps."""
    from brax_train import checkpoint
    from brax_train.cli._rollout import make_env

    run = RunDir(args.run_dir)
    spec, data = run.read_config()
    if args.num_timesteps is not None:
        spec = RunSpec(
            spec.env, spec.env_kwargs, spec.imports, {**spec.ppo, "num_timesteps": args.num_timesteps}
        )
    where = str(run.config)
    env = make_env(spec, where=where)
    try:
        _settings.check_ppo(spec)
    except UsageError as e:
        raise UsageError(f"{where}: {e}") from None
    if args.num_timesteps is not None:
        extra = {k: v for k, v in data.items() if k not in spec.to_json()}
        run.write_config(spec, extra)
    _clean_incomplete(run)
    try:
        latest = checkpoint.resolve(run.checkpoints)
        step = int(checkpoint.read_meta(latest)["step"])
    except checkpoint.CheckpointError as e:
        raise CommandError(
            f"{one_line(str(e))}; nothing to resume (start a new run with `brax-train train`)"
        ) from None
    total = int(spec.ppo["num_timesteps"])
    if step >= total:
        _err(
            f"brax-train: {run.path} is complete (step {step:,} >= num_timesteps {total:,}); "
            "pass --num-timesteps to extend it"
        )
        _finish(run, spec, env, step, replay=not args.no_replay and not run.replay.exists())
        return 0
    _err(f"brax-train: resuming {spec.env} from step {step:,} ({latest.name}) to {total:,}")
    return _train(run, spec, env, restore=latest, start_step=step, replay=not args.no_replay)


def _train(
    run: RunDir, spec: RunSpec, env: Any, restore: pathlib.Path | None, start_step: int, replay: bool
) -> int:
    from brax_train import ppo

    log = _rundir.MetricsLog(run)
    log.event("resume" if restore is not None else "start", start_step)
    progress = Progress(planned_final_step(spec.ppo, start_step), sys.stderr, start_step=start_step)
    last: dict[str, Any] = {"step": start_step, "metrics": {}}

    def progress_fn(step: int, metrics: Mapping[str, Any]) -> None:
        log.report(step, metrics)
        progress.update(step, metrics)
        last["step"] = int(step)
        last["metrics"] = dict(metrics)
        if _rundir.EVAL_REWARD in metrics:
            _rundir.write_plot(run, _title(spec))

    kwargs = _settings.ppo_kwargs(spec.ppo)
    kwargs.update(progress_fn=progress_fn, save_checkpoint_path=str(run.checkpoints))
    if restore is not None:
        kwargs["restore_checkpoint_path"] = str(restore)
    t0 = time.monotonic()
    try:
        result = ppo.train(env, **kwargs)
        final = _final_step(run, last["step"])
        log.event("end", final, seconds=time.monotonic() - t0)
    except ppo.PPOConfigError as e:
        raise UsageError(one_line(str(e))) from None
    except ppo.NonFiniteError as e:
        raise CommandError(f"{one_line(str(e))}; see {run.metrics}") from None
    except KeyboardInterrupt:
        progress.close()
        _err(f"brax-train: interrupted; continue with `brax-train resume {run.path}`")
        raise
    finally:
        progress.close()
        log.close()
    _finish(run, spec, env, final, replay=replay, result=result)
    metrics = last["metrics"] or result.metrics
    reward = metrics.get(_rundir.EVAL_REWARD, metrics.get(_rundir.TRAIN_REWARD))
    _out(f"run dir: {run.path}")
    _out(f"final step: {final:,}" + (f", reward {reward:.4g}" if isinstance(reward, float) else ""))
    _out(f"next: brax-train eval {run.path}  |  brax-train render {run.path} --out replay.gif")
    return 0


def planned_final_step(ppo: Mapping[str, Any], start_step: int) -> int:
    """The env step `ppo.train` will stop at: it rounds `num_timesteps` up to whole evaluation intervals.

    Mirrors the schedule in `brax_train.ppo.train` (for the progress total and ETA only).
    """
    per_step = int(ppo["batch_size"]) * int(ppo["unroll_length"]) * int(ppo["num_minibatches"])
    per_step *= int(ppo["action_repeat"])
    remaining = max(int(ppo["num_timesteps"]) - start_step, 0)
    intervals = max(int(ppo["num_evals"]) - 1, 1)
    resets = max(int(ppo.get("num_resets_per_eval", 0)), 1)
    per_epoch = -(-remaining // (intervals * per_step * resets))
    return start_step + intervals * per_epoch * resets * per_step


def _final_step(run: RunDir, reported: int) -> int:
    from brax_train import checkpoint

    try:
        return max(reported, int(checkpoint.read_meta(checkpoint.resolve(run.checkpoints))["step"]))
    except checkpoint.CheckpointError:
        return reported


def _title(spec: RunSpec) -> str:
    return f"{spec.env} reward"


def _finish(run: RunDir, spec: RunSpec, env: Any, step: int, replay: bool, result: Any = None) -> None:
    """Plot and (unless disabled) the replay of the final deterministic policy."""
    _rundir.write_plot(run, _title(spec))
    if not replay:
        return
    import jax
    from brax_io import html

    from brax_train.cli._rollout import load_policy, rollout

    try:
        sys_ = env.sys
    except AttributeError:
        _err(f"brax-train: no replay.html: {spec.env!r} simulates no brax_physics.System")
        return
    if result is not None:
        make_policy, params = result.make_policy, result.params
    else:
        make_policy, params, _ = load_policy(run, None)
    with _precision(spec):
        r = rollout(
            env,
            make_policy(params, deterministic=True),
            jax.random.PRNGKey(int(spec.ppo.get("seed", 0))),
            episode_length=int(spec.ppo["episode_length"]),
            action_repeat=int(spec.ppo["action_repeat"]),
            max_steps=1000,
        )
    html.save(run.replay, sys_, r.pipeline_states, dt=r.dt)


# ---- eval / render ----------------------------------------------------------------------------------


def cmd_eval(args: argparse.Namespace) -> int:
    """`brax-train eval DIR`: mean and std of the episode reward of the deterministic policy."""
    from brax_train.cli._rollout import evaluate, load_policy, make_env

    run = RunDir(args.run_dir)
    spec, _ = run.read_config()
    env = make_env(spec, where=str(run.config))
    make_policy, params, step_dir = load_policy(run, args.step)
    episode_length, action_repeat = int(spec.ppo["episode_length"]), int(spec.ppo["action_repeat"])
    with _precision(spec):
        m = evaluate(env, make_policy, params, args.episodes, episode_length, action_repeat, args.seed)
    out = {
        "run_dir": str(run.path),
        "env": spec.env,
        "checkpoint_step": int(step_dir.name) if step_dir.name.isdigit() else None,
        "episodes": args.episodes,
        "reward_mean": m["eval/episode_reward"],
        "reward_std": m["eval/episode_reward_std"],
        "episode_length_mean": m["eval/avg_episode_length"],
    }
    _err(
        f"eval: {args.episodes} episode(s) of {spec.env} at step {out['checkpoint_step']}: reward "
        f"{out['reward_mean']:.4g} +- {out['reward_std']:.3g}, length {out['episode_length_mean']:.4g}"
    )
    _out(json.dumps(out))
    return 0


def cmd_render(args: argparse.Namespace) -> int:
    """`brax-train render DIR --out FILE`: one episode of the deterministic policy as HTML, GIF or MP4."""
    out = pathlib.Path(args.out)
    suffix = out.suffix.lower()
    if suffix not in RENDER_SUFFIXES:
        raise UsageError(f"--out: expected a file ending in {', '.join(RENDER_SUFFIXES)}, got {args.out!r}")
    if not out.parent.is_dir():
        raise UsageError(f"--out: directory {str(out.parent)!r} does not exist")
    import jax

    from brax_train.cli._rollout import load_policy, make_env, rollout

    run = RunDir(args.run_dir)
    spec, _ = run.read_config()
    env = make_env(spec, where=str(run.config))
    try:
        sys_ = env.sys
    except AttributeError:
        raise CommandError(
            f"environment {spec.env!r} simulates no brax_physics.System: nothing to render"
        ) from None
    make_policy, params, step_dir = load_policy(run, args.step)
    with _precision(spec):
        r = rollout(
            env,
            make_policy(params, deterministic=True),
            jax.random.PRNGKey(args.seed),
            episode_length=int(spec.ppo["episode_length"]),
            action_repeat=int(spec.ppo["action_repeat"]),
            max_steps=args.max_steps,
        )
    if suffix == ".html":
        from brax_io import html

        html.save(out, sys_, r.pipeline_states, dt=r.dt)
    else:
        _render_video(out, sys_, r, args)
    _err(
        f"render: {r.length} step(s) of {spec.env} (checkpoint {step_dir.name}, "
        f"reward {r.reward:.4g}) -> {out}"
    )
    return 0


def _render_video(out: pathlib.Path, sys_: Any, r: Any, args: argparse.Namespace) -> None:
    try:
        from brax_io import image  # type: ignore[attr-defined,unused-ignore]  # newer brax-io
    except ImportError as e:
        raise CommandError(
            f"images need brax_io.image, which this brax-io lacks ({e}); upgrade brax-io"
        ) from None
    camera: str | int | None = args.camera
    if isinstance(camera, str) and camera.isdigit():
        camera = int(camera)
    fps = 1.0 / r.dt if r.dt else 30.0
    unavailable: tuple[type[BaseException], ...] = (RuntimeError, ImportError, OSError)
    rendering_error = getattr(image, "RenderingUnavailableError", None)
    if isinstance(rendering_error, type) and issubclass(rendering_error, BaseException):
        unavailable = (rendering_error, *unavailable)
    try:
        pixels = image.render_array(
            sys_, r.pipeline_states, width=args.width, height=args.height, camera=camera
        )
        image.save_video(out, pixels, fps=fps)
    except unavailable as e:
        raise CommandError(f"cannot write {out}: {one_line(str(e))} (see `brax-train doctor`)") from None


# ---- envs -------------------------------------------------------------------------------------------


def _size(v: Any) -> str:
    if isinstance(v, Mapping):
        return ",".join(f"{k}:{'x'.join(map(str, s))}" for k, s in v.items())
    if isinstance(v, tuple):
        return "x".join(map(str, v))
    return str(v)


def env_rows() -> list[dict[str, Any]]:
    """One row per registered environment: name, observation and action sizes, dt, backend."""
    import brax_envs
    import numpy as np

    from brax_train.cli import _defaults

    rows = []
    for name in brax_envs.registered_environments():
        row: dict[str, Any] = {"name": name}
        try:
            env = brax_envs.get_environment(name)
            row["observation_size"] = env.observation_size
            row["action_size"] = env.action_size
            try:
                row["dt"] = round(float(np.asarray(env.dt)), 6)
            except AttributeError:
                row["dt"] = None
            row["backend"] = env.backend
        except Exception as e:  # one broken (e.g. user-registered) env must not hide the others
            row["error"] = f"{type(e).__name__}: {one_line(str(e))}"
        row["default_num_timesteps"] = _defaults.defaults_for(name)["num_timesteps"]
        rows.append(row)
    return rows


def cmd_envs(args: argparse.Namespace) -> int:
    """`brax-train envs`: a table of the registered environments."""
    for module in args.imports:
        _settings.import_module(_settings.canonical_import(module))
    rows = env_rows()
    if args.json:
        for r in rows:
            _out(json.dumps(r))
        return 0
    header = ("name", "obs", "act", "dt", "backend", "default steps")
    table = [header]
    for r in rows:
        if "error" in r:
            table.append((r["name"], "-", "-", "-", "error: " + r["error"], ""))
            continue
        dt = "-" if r["dt"] is None else f"{r['dt']:g}"
        table.append(
            (
                r["name"],
                _size(r["observation_size"]),
                str(r["action_size"]),
                dt,
                r["backend"],
                f"{r['default_num_timesteps']:,}",
            )
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for i, line in enumerate(table):
        _out("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())
        if i == 0:
            _out("  ".join("-" * w for w in widths))
    return 0


__all__ = [
    "cmd_envs",
    "cmd_eval",
    "cmd_render",
    "cmd_resume",
    "cmd_train",
    "env_rows",
    "package_versions",
    "planned_final_step",
]
