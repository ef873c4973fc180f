"""The `train`, `resume`, `eval`, `render` and `envs` commands."""

from __future__ import annotations

import dataclasses
import datetime
import fnmatch
import functools
import json
import os
import pathlib
import shutil
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

import brax_envs
import jax
import numpy as np
from brax_envs import wrappers
from brax_io import html, image

from brax_train import _versions, acting, agents, checkpoint, config, export, presets, reporting, runner
from brax_train import distributed as dist
from brax_train.cli import _settings
from brax_train.cli._doctor import cmd_doctor
from brax_train.cli._errors import CommandError, UsageError, one_line
from brax_train.cli._parser import (
    AUTO,
    RENDER_SUFFIXES,
    Doctor,
    Envs,
    Eval,
    Export,
    Render,
    Reproduce,
    Resume,
    Train,
    parse,
)
from brax_train.cli._rundir import RunDir
from brax_train.cli._settings import RunSpec


def _err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def make_env(spec: RunSpec, where: str = "--set") -> brax_envs.Env:
    """Import the run's modules and build its environment; bad options are `UsageError`s."""
    for module in spec.imports:
        _settings.import_module(module, flag="import")
    _settings.check_env(spec.env, flag="--env" if where == "--set" else f"{where}: env")
    try:
        return brax_envs.get_environment(spec.env, **spec.env_kwargs)
    except (TypeError, ValueError) as e:  # the factory's rejection of an option
        if not spec.env_kwargs:
            raise
        options = ", ".join(f"env.{k}" for k in spec.env_kwargs)
        keys = "--backend" if "backend" in spec.env_kwargs and "backend" in str(e) else f"{where} {options}"
        rejects = f"environment {spec.env!r} rejects these options: " if isinstance(e, TypeError) else ""
        raise UsageError(f"{keys}: {rejects}{one_line(str(e))}") from None


def _cpu_devices(n: int) -> None:
    """Have JAX make `n` CPU devices (0: its default); only possible before its first computation."""
    if not n:
        return
    try:
        jax.config.update("jax_num_cpu_devices", n)
    except RuntimeError as e:  # JAX already computed something in this process
        raise UsageError(f"--cpu-devices: {one_line(str(e))}") from None


def cpu_cores() -> int:
    """Cores this process may run on (its CPU affinity where the platform tells, else all)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def auto_cpu_devices(agent: str, c: Any, processes: int, cores: int) -> int:
    """`--cpu-devices auto`: the most devices, at most one per core (and `max_devices_per_host`),
    for which agent `agent`'s settings `c` validate over `processes` processes (1 when none do:
    training then reports what is wrong)."""
    validate = agents.spec(agent).validate
    cap = getattr(c, "max_devices_per_host", None) or cores
    for n in range(min(cores, cap), 1, -1):
        try:
            validate(c, n * processes)
        except config.ConfigError:
            continue
        return n
    return 1


def _auto_cpu_devices(agent: str, c: Any, processes: int | None) -> int:
    """`auto_cpu_devices` for this process's cores, said on stderr."""
    cores = cpu_cores()
    n = auto_cpu_devices(agent, c, processes or 1, cores)
    devices, of = f"{n} CPU device{'s' if n != 1 else ''}", f"{cores} core{'s' if cores != 1 else ''}"
    _err(f"brax-train: --cpu-devices auto: {devices} ({of})")
    return n


def _join(args: Train | Resume, cpu_devices: int) -> bool:
    """Join the multi-process run the flags (or the cluster) describe; whether this is the primary."""
    _cpu_devices(cpu_devices)
    if args.distributed or (args.coordinator_address, args.num_processes, args.process_id) != (None,) * 3:
        try:
            dist.initialize(args.coordinator_address, args.num_processes, args.process_id)
        except (ValueError, RuntimeError) as e:
            flags = "--coordinator-address/--num-processes/--process-id"
            raise UsageError(f"{flags}: {one_line(str(e))}") from None
    return dist.is_primary()


def cmd_train(args: Train) -> int:
    """`brax-train train`: resolve settings, create the run directory and train."""
    cpu_devices = args.cpu_devices
    if cpu_devices == AUTO:  # from the settings alone, validated for one device: JAX has not started
        spec, c = _settings.resolve(args, device_count=1)
        cpu_devices = _auto_cpu_devices(spec.agent, c, args.num_processes)
    primary = _join(args, int(cpu_devices))
    if jax.process_count() > 1 and args.run_dir is None:
        raise UsageError("--run-dir is required in a multi-process run (every process names the same one)")
    spec, c = _settings.resolve(args)
    env = make_env(spec)
    now = datetime.datetime.now().astimezone()
    # suite names hold a slash (dm_control/walker-walk): one directory level per run
    run = RunDir(args.run_dir or pathlib.Path("runs") / f"{spec.env.replace('/', '_')}-{now:%Y%m%d-%H%M%S}")
    if run.path.exists() and (not run.path.is_dir() or any(run.path.iterdir())):
        raise UsageError(
            f"--run-dir: {str(run.path)!r} already exists and is not empty; continue it with "
            f"`brax-train resume {run.path}` or choose a new directory"
        )
    dist.barrier("brax_train.cli.checked")  # every process saw it empty before process 0 writes
    info: dict[str, Any] = {"created": now.isoformat(timespec="seconds"), "argv": ["train", *args.argv]}
    if cpu_devices:
        info["cpu_devices"] = cpu_devices
    if primary:
        run.write_config(spec, {**info, "versions": _versions.package_versions()})
    _err(f"brax-train: training {spec.env} with {spec.agent} for {c.num_timesteps:,} steps into {run.path}")
    return _train(run, spec, c, env, None, 0, replay=not args.no_replay)


def cmd_resume(args: Resume) -> int:
    """`brax-train resume DIR`: continue from the latest complete checkpoint to num_timesteps."""
    run = RunDir(args.run_dir)
    spec, data = run.read_config()
    recorded = data.get("cpu_devices", 0)
    if type(recorded) is not int or recorded < 0:
        raise UsageError(f"{run.config}: cpu_devices must be an integer >= 0, got {recorded!r}")
    cpu_devices = args.cpu_devices or recorded
    if cpu_devices == AUTO:
        c = _settings.agent_config(spec, where=str(run.config), device_count=1)
        cpu_devices = _auto_cpu_devices(spec.agent, c, args.num_processes)
    primary = _join(args, int(cpu_devices))
    if args.num_timesteps is not None:
        spec = dataclasses.replace(spec, settings={**spec.settings, "num_timesteps": args.num_timesteps})
    env = make_env(spec, where=str(run.config))
    c = _settings.agent_config(spec, where=str(run.config))
    if args.num_timesteps is not None and primary:
        run.write_config(spec, {k: v for k, v in data.items() if k not in spec.to_json()})
    for d in sorted(run.checkpoints.iterdir()) if run.checkpoints.is_dir() and primary else []:
        # Steps without a manifest, and orbax's temporary directories, are saves a kill interrupted:
        # never restorable, and they would collide with the steps the resumed run writes.
        if d.is_dir() and ("tmp" in d.name or (d.name.isdigit() and not (d / checkpoint.MANIFEST).is_file())):
            _err(f"brax-train: removing incomplete checkpoint {d}")
            shutil.rmtree(d)
    dist.barrier("brax_train.cli.cleaned")
    try:
        latest = checkpoint.resolve(run.checkpoints)
        step = int(checkpoint.read_meta(latest)["step"])
    except checkpoint.CheckpointError as e:
        msg = "nothing to resume (start a new run with `brax-train train`)"
        raise CommandError(f"{one_line(str(e))}; {msg}") from None
    total = c.num_timesteps
    if step >= total:
        done = f"{run.path} is complete (step {step:,} >= num_timesteps {total:,})"
        _err(f"brax-train: {done}; pass --num-timesteps to extend it")
        _finish(run, spec, env, replay=not args.no_replay and not run.replay.exists())
        return 0
    _err(f"brax-train: resuming {spec.env} from step {step:,} ({latest.name}) to {total:,}")
    return _train(run, spec, c, env, latest, step, replay=not args.no_replay)


def _train(
    run: RunDir, spec: RunSpec, c: Any, env: Any, restore: pathlib.Path | None, start: int,
    replay: bool,
) -> int:
    c = c.replace(save_checkpoint_path=str(run.checkpoints), restore_checkpoint_path=restore and str(restore))
    if not dist.is_primary():  # process 0 alone reports and writes the run directory
        _run_agent(spec, env, c)
        return 0
    agent = agents.spec(spec.agent)
    final = runner.final_step(c, start, agent.env_steps_per_update(c), agent.counts_env_steps)
    log = reporting.MetricsLog(run.metrics, run.tensorboard)
    log.event("resume" if restore is not None else "start", start, devices=len(runner.mesh_devices(c)))
    progress = reporting.Progress(final, sys.stderr, start_step=start)
    last: dict[str, Any] = {"step": start, "metrics": {}}

    def progress_fn(step: int, metrics: Mapping[str, Any]) -> None:
        log.report(step, metrics)
        progress.update(step, metrics)
        last.update(step=int(step), metrics=dict(metrics))
        if reporting.EVAL_REWARD in metrics:
            reporting.write_plot(run.metrics, run.plot, f"{spec.env} reward")

    t0 = time.monotonic()
    try:
        result = _run_agent(spec, env, c.replace(progress_fn=progress_fn), f"; see {run.metrics}")
        try:
            final = max(last["step"], int(checkpoint.read_meta(checkpoint.resolve(run.checkpoints))["step"]))
        except checkpoint.CheckpointError:
            final = last["step"]
        log.event("end", final, seconds=time.monotonic() - t0)
    except KeyboardInterrupt:
        progress.close()
        _err(f"brax-train: interrupted; continue with `brax-train resume {run.path}`")
        raise
    finally:
        progress.close()
        log.close()
    _finish(run, spec, env, replay=replay, policy=(result.make_policy, result.params))
    metrics = last["metrics"] or result.metrics
    reward = metrics.get(reporting.EVAL_REWARD, metrics.get(reporting.TRAIN_REWARD))
    reward_text = f", reward {reward:.4g}" if isinstance(reward, float) else ""
    next_text = f"brax-train eval {run.path}  |  brax-train render {run.path} --out replay.gif"
    print(f"run dir: {run.path}\nfinal step: {final:,}{reward_text}\nnext: {next_text}", flush=True)
    return 0


def _run_agent(spec: RunSpec, env: Any, c: Any, see: str = "") -> runner.TrainResult:
    """Train; the agent's errors become the CLI's."""
    try:
        result: runner.TrainResult = agents.spec(spec.agent).train(env, c)
        return result
    except config.ConfigError as e:
        raise UsageError(one_line(str(e))) from None
    except runner.NonFiniteError as e:
        raise CommandError(f"{one_line(str(e))}{see}") from None


def _finish(run: RunDir, spec: RunSpec, env: Any, replay: bool, policy: Any = None) -> None:
    """The plot and (unless disabled) the replay of the final deterministic policy."""
    reporting.write_plot(run.metrics, run.plot, f"{spec.env} reward")
    if replay and not hasattr(env, "sys"):
        _err(f"brax-train: no replay.html: {spec.env!r} simulates no brax_physics.System")
    elif replay:
        make_policy, params = policy or _load_policy(run, None)[:2]
        seed = int(spec.settings.get("seed", 0))
        acting_env = agents.spec(spec.agent).policy_env(env, spec.settings)
        r = rollout(acting_env, spec, make_policy(params, deterministic=True), seed, 1000)
        html.save(run.replay, env.sys, r.pipeline_states, dt=r.dt)


def _load_policy(run: RunDir, step: int | None) -> tuple[Any, Any, pathlib.Path]:
    """(make_policy, params, step directory) of a run's latest complete checkpoint, or of `step`."""
    path = run.checkpoints if step is None else run.checkpoints / str(step)
    if step is not None and not path.is_dir():
        steps = sorted(int(p.name) for p in run.checkpoints.glob("*") if p.name.isdigit())
        accepted, where = ", ".join(map(str, steps)) or "none", str(run.checkpoints)
        raise UsageError(f"--step: no checkpoint step {step} in {where!r}; accepted: {accepted}")
    try:
        loaded = checkpoint.load(d := checkpoint.resolve(path))
    except checkpoint.CheckpointError as e:
        raise CommandError(one_line(str(e))) from None
    return loaded.make_policy, loaded.params, d


def rollout(env: brax_envs.Env, spec: RunSpec, policy: Any, seed: int, max_steps: int) -> acting.Episode:
    """One episode of the run's environment (`acting.episode`) at the run's matmul precision."""
    with _precision(spec):
        return acting.episode(env, policy, jax.random.PRNGKey(seed), *_episode(spec), max_steps=max_steps)


def _precision(spec: RunSpec) -> Any:
    # Evaluation and rendering use the run's explicit precision, as training did (no silent TF32).
    return jax.default_matmul_precision(str(spec.settings.get("matmul_precision", "highest")))


def _episode(spec: RunSpec) -> tuple[int, int]:
    return int(spec.settings["episode_length"]), int(spec.settings.get("action_repeat", 1))


def _open(run_dir: str, step: int | None) -> tuple[RunDir, RunSpec, brax_envs.Env, Any, Any, pathlib.Path]:
    """A run's directory, settings, environment, policy maker, parameters and checkpoint step directory."""
    run = RunDir(run_dir)
    spec, _ = run.read_config()
    env = agents.spec(spec.agent).policy_env(make_env(spec, where=str(run.config)), spec.settings)
    return run, spec, env, *_load_policy(run, step)


def cmd_eval(args: Eval) -> int:
    """`brax-train eval DIR`: mean and std of the episode reward of the deterministic policy."""
    run, spec, env, make_policy, params, step_dir = _open(args.run_dir, args.step)
    episode_length, action_repeat = _episode(spec)
    evaluator = acting.Evaluator(
        wrappers.wrap_for_training(env, episode_length=episode_length, action_repeat=action_repeat),
        functools.partial(make_policy, deterministic=True),
        num_eval_envs=args.episodes,
        episode_length=episode_length,
        action_repeat=action_repeat,
        key=jax.random.PRNGKey(args.seed),
    )
    with _precision(spec):
        m = evaluator.run_evaluation(params, {})
    step = int(step_dir.name) if step_dir.name.isdigit() else None
    mean, std, length = m["eval/episode_reward"], m["eval/episode_reward_std"], m["eval/avg_episode_length"]
    what = f"{args.episodes} episode(s) of {spec.env} at step {step}"
    _err(f"eval: {what}: reward {mean:.4g} +- {std:.3g}, length {length:.4g}")
    out: dict[str, Any] = {"run_dir": str(run.path), "env": spec.env, "checkpoint_step": step}
    out |= {"episodes": args.episodes, "reward_mean": mean, "reward_std": std, "episode_length_mean": length}
    print(json.dumps(out), flush=True)
    return 0


def cmd_render(args: Render) -> int:
    """`brax-train render DIR --out FILE`: one episode of the deterministic policy as HTML, GIF or MP4."""
    out = pathlib.Path(args.out)
    if out.suffix.lower() not in RENDER_SUFFIXES:
        raise UsageError(f"--out: expected a file ending in {', '.join(RENDER_SUFFIXES)}, got {args.out!r}")
    if not out.parent.is_dir():
        raise UsageError(f"--out: directory {str(out.parent)!r} does not exist")
    _, spec, env, make_policy, params, step_dir = _open(args.run_dir, args.step)
    if not hasattr(env, "sys"):
        raise CommandError(f"environment {spec.env!r} simulates no brax_physics.System: nothing to render")
    r = rollout(env, spec, make_policy(params, deterministic=True), args.seed, args.max_steps)
    if out.suffix.lower() == ".html":
        html.save(out, env.sys, r.pipeline_states, dt=r.dt)
    else:
        _save_video(out, env.sys, r, args)
    what = f"{r.length} step(s) of {spec.env} (checkpoint {step_dir.name}, reward {r.reward:.4g})"
    _err(f"render: {what} -> {out}")
    return 0


def _save_video(out: pathlib.Path, sys_: Any, r: acting.Episode, args: Render) -> None:
    camera = int(args.camera) if args.camera is not None and args.camera.isdigit() else args.camera
    try:
        frames = image.render_array(sys_, r.pipeline_states, args.width, args.height, camera=camera)
        image.save_video(out, frames, fps=1.0 / r.dt if r.dt else 30.0)
    except (RuntimeError, ImportError, OSError) as e:  # image.RenderingUnavailableError is a RuntimeError
        raise CommandError(f"cannot write {out}: {one_line(str(e))} (see `brax-train doctor`)") from None


def _size(v: Any) -> str:
    if isinstance(v, Mapping):
        return ",".join(f"{k}:{_size(s)}" for k, s in v.items())
    return "x".join(map(str, v)) if isinstance(v, tuple) else str(v)


SUITE_PREFIX = "dm_control/"
"""Names of the dm_control suite's tasks (`brax_envs.dm_control`), described only on request."""


def env_rows(match: str | None = None) -> list[dict[str, Any]]:
    """One row per registered environment matching the glob `match` (all if None): name, observation
    and action sizes, dt, backend. Without `match`, the dm_control suite's rows carry names only."""
    rows = []
    for name in brax_envs.registered_environments():
        if match is not None and not fnmatch.fnmatchcase(name, match):
            continue
        row: dict[str, Any] = {"name": name}
        if match is None and name.startswith(SUITE_PREFIX):
            rows.append({**row, "default_num_timesteps": presets.preset(name).num_timesteps,
                         "presets": [a for a in agents.AGENTS if name in presets.environments(a)]})
            continue
        try:
            env = brax_envs.get_environment(name)
            row.update(observation_size=env.observation_size, action_size=env.action_size)
            row["dt"] = round(float(np.asarray(env.dt)), 6) if hasattr(env, "dt") else None
            row["backend"] = env.backend
        except Exception as e:  # one broken (e.g. user-registered) env must not hide the others
            row["error"] = f"{type(e).__name__}: {one_line(str(e))}"
        tuned = [a for a in agents.AGENTS if name in presets.environments(a)]
        rows.append({**row, "default_num_timesteps": presets.preset(name).num_timesteps, "presets": tuned})
    return rows


def cmd_envs(args: Envs) -> int:
    """`brax-train envs`: a table (or JSON lines) of the registered environments."""
    for module in args.imports:
        _settings.import_module(_settings.canonical_import(module))
    rows = env_rows(args.match)
    if not rows:
        raise UsageError(f"--match: no registered environment matches {args.match!r}")
    table: list[tuple[str, ...]] = [("name", "obs", "act", "dt", "backend", "default steps", "presets")]
    for r in rows:
        obs, act = _size(r.get("observation_size", "-")), str(r.get("action_size", "-"))
        dt = "-" if r.get("dt") is None else f"{r['dt']:g}"
        backend = f"error: {r['error']}" if "error" in r else r.get("backend", "-")
        steps = f"{r['default_num_timesteps']:,}"
        table.append((r["name"], obs, act, dt, backend, steps, ",".join(r["presets"]) or "-"))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    table.insert(1, tuple("-" * w for w in widths))
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table]
    print("\n".join(map(json.dumps, rows) if args.json else lines), flush=True)
    return 0


def cmd_export(args: Export) -> int:
    """`brax-train export DIR --format F --out FILE`: the deterministic policy as FILE and FILE.json."""
    if not pathlib.Path(args.out).absolute().parent.is_dir():
        raise UsageError(f"--out: directory {str(pathlib.Path(args.out).parent)!r} does not exist")
    try:
        r = export.export_policy(args.run_dir, args.out, args.format)
    except (checkpoint.CheckpointError, export.ExportError, ImportError) as e:
        raise CommandError(one_line(str(e))) from None
    _err(f"export: {r.contract['agent']} policy (step {r.contract['step']}) -> {r.path}, {r.contract_path}")
    return 0


def cmd_reproduce(args: Reproduce) -> int:
    """`brax-train reproduce ENV`: train ENV's PPO recipe once per seed and hold each final evaluation
    return to the recorded band's bar; exit status 0 when every seed passes, 1 otherwise."""
    kind = "quick" if args.quick else "full"
    bands = presets.PPO_BANDS.get(args.env, {})
    if kind not in bands:
        recorded = ", ".join(f"{e} ({', '.join(b)})" for e, b in sorted(presets.PPO_BANDS.items())) or "none"
        raise UsageError(f"ENV: no {kind} band recorded for {args.env!r}; recorded: {recorded}")
    band = bands[kind]
    seeds = band.seeds if args.seeds is None else args.seeds
    now = datetime.datetime.now().astimezone()
    name = f"reproduce-{args.env.replace('/', '_')}-{now:%Y%m%d-%H%M%S}"
    root = pathlib.Path(args.run_dir or pathlib.Path("runs") / name)
    _err(f"brax-train: reproducing {args.env} ({kind} band: return >= {band.low:g} after "
         f"{band.num_timesteps:,} steps; measured {', '.join(f'{r:.4g}' for r in band.measured)} "
         f"for seeds {', '.join(map(str, band.seeds))} on {band.where})")
    trains = []
    for seed in seeds:
        train = parse(["train", "--env", args.env, "--run-dir", str(root / f"seed-{seed}"), "--no-replay",
                       "--set", f"num_timesteps={band.num_timesteps}", "--set", f"seed={seed}"])
        assert isinstance(train, Train)
        trains.append(train)
    cpu_devices = args.cpu_devices  # once for all seeds: JAX makes its devices before its first computation
    if cpu_devices == AUTO:
        cpu_devices = _auto_cpu_devices("ppo", _settings.resolve(trains[0], device_count=1)[1], None)
    _cpu_devices(int(cpu_devices))
    results = []
    for seed, train in zip(seeds, trains, strict=True):
        t0 = time.monotonic()
        cmd_train(train)
        assert train.run_dir is not None
        results.append((seed, _final_eval_return(RunDir(train.run_dir)), time.monotonic() - t0))
    lines = [f"{'seed':>6}  {'return':>10}  {'minutes':>7}  result"]
    for seed, ret, seconds in results:
        verdict = "pass" if ret >= band.low else "FAIL"
        lines.append(f"{seed:>6}  {ret:>10.4g}  {seconds / 60:>7.1f}  {verdict}")
    passed = all(ret >= band.low for _, ret, _ in results)
    bar = f"bar {band.low:g} after {band.num_timesteps:,} steps"
    lines.append(f"{args.env}: {'PASS' if passed else 'FAIL'} ({bar})")
    print("\n".join(lines), flush=True)
    return 0 if passed else 1


def _final_eval_return(run: RunDir) -> float:
    """The last evaluation return a run's metrics.jsonl records."""
    last = None
    for line in run.metrics.read_text().splitlines():
        row = json.loads(line)
        if reporting.EVAL_REWARD in row:
            last = float(row[reporting.EVAL_REWARD])
    if last is None:
        raise CommandError(f"{run.metrics}: no evaluation recorded")
    return last


COMMANDS: dict[type, Callable[[Any], int]] = {
    Train: cmd_train, Resume: cmd_resume, Eval: cmd_eval, Render: cmd_render, Envs: cmd_envs,
    Doctor: cmd_doctor, Export: cmd_export, Reproduce: cmd_reproduce,
}
"""The function that runs each command."""

__all__ = [
    "COMMANDS", "cmd_envs", "cmd_eval", "cmd_export", "cmd_render", "cmd_reproduce", "cmd_resume",
    "cmd_train", "env_rows", "make_env", "rollout",
]
