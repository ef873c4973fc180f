"""PPO training loop: jitted, sharded epochs; the host only evaluates, logs and checkpoints.

Determinism: training step `t` (a 64-bit index) draws its randomness from
`fold_in(train_key, t)`, so results do not depend on how steps are grouped into jitted chunks
(evaluation intervals, metric intervals, or a save/restore in between). The batch is sharded over
devices along the environment axis with `jax.sharding` and every computation is written for the
global batch, so gradients and normalizer statistics are reduced across devices and 1, 2 or 4
devices compute the same thing (up to floating-point summation order).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import os
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import brax_envs
import jax
import jax.numpy as jnp
import numpy as np
import optax  # type: ignore[import-untyped]  # this optax ships no py.typed
from brax_envs import wrappers
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from brax_train import acting, checkpoint, networks, running_statistics
from brax_train.ppo import losses
from brax_train.ppo import networks as ppo_networks
from brax_train.ppo.config import PPOConfig, merge, schedule_name, validate
from brax_train.types import PRNGKey, Transition, UInt64

logger = logging.getLogger("brax_train.ppo")

_AXIS = "dev"


def P(*axes: str | None) -> PartitionSpec:
    """A `PartitionSpec` (typed wrapper)."""
    return PartitionSpec(*axes)  # type: ignore[no-untyped-call]


def _constrain(x: Any, sharding: Any) -> Any:
    """`jax.lax.with_sharding_constraint` (typed wrapper)."""
    return jax.lax.with_sharding_constraint(x, sharding)  # type: ignore[no-untyped-call]


class TrainResult(NamedTuple):
    """What `train` returns: `make_policy, params, metrics = ppo.train(...)`."""

    make_policy: ppo_networks.MakePolicy
    """`make_policy(params, deterministic=False) -> policy(obs, key) -> (action, extras)`."""
    params: ppo_networks.PPOParams
    """Final parameters (normalizer, policy, value)."""
    metrics: dict[str, float]
    """Metrics of the last evaluation (or training-metrics report)."""


class NonFiniteError(FloatingPointError):
    """Training produced a non-finite loss, gradient or parameter; the message names step and checkpoint."""

    def __init__(self, message: str, *, step: int, quantity: str, last_checkpoint: str | None) -> None:
        """Record the offending env step, the quantity and the last good checkpoint."""
        super().__init__(message)
        self.step = step
        self.quantity = quantity
        self.last_checkpoint = last_checkpoint


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class TrainingState:
    """Device-side learner state."""

    params: losses.NetworkParams
    """Policy and value parameters."""
    normalizer: running_statistics.RunningStatisticsState
    """Observation statistics."""
    optimizer_state: Any
    """optax state."""


def _key_at(key: PRNGKey, index: UInt64) -> PRNGKey:
    return jax.random.fold_in(jax.random.fold_in(key, index.hi), index.lo)


def _all_finite(tree: Any) -> jax.Array:
    ok = jnp.asarray(True)
    for leaf in jax.tree.leaves(tree):
        if jnp.issubdtype(leaf.dtype, jnp.inexact):
            ok = ok & jnp.all(jnp.isfinite(leaf))
    return ok


def _get_lr(opt_state: Any) -> jax.Array:
    lr: jax.Array = opt_state[-1].hyperparams["learning_rate"]
    return lr


def _set_lr(opt_state: Any, lr: jax.Array) -> Any:
    inner = opt_state[-1]
    inner = inner._replace(hyperparams={**inner.hyperparams, "learning_rate": lr})
    return (*opt_state[:-1], inner)


def _env_shardings(tree: Any, num_envs: int, mesh: Mesh) -> Any:
    shard, repl = NamedSharding(mesh, P(_AXIS)), NamedSharding(mesh, P())
    return jax.tree.map(lambda x: shard if x.ndim >= 1 and x.shape[0] == num_envs else repl, tree)


def _wrap_env(
    environment: brax_envs.Env, c: PPOConfig, num_envs: int, key: PRNGKey, per_episode: bool = False
) -> brax_envs.Env:
    """Training/eval wrapping as in Brax: `randomization_fn` gets one key per environment as `rng=`.

    Once per run the keys are split from `key` here; with `per_episode` the wrappers pass each
    reset's keys instead (`key` is unused, so the once-per-run key stream is unchanged).
    """
    if not c.wrap_env:
        return environment
    randomization_fn = None
    if c.randomization_fn is not None:
        randomization_fn = (
            c.randomization_fn
            if per_episode
            else functools.partial(c.randomization_fn, rng=jax.random.split(key, num_envs))
        )
    assert c.episode_length is not None
    if c.wrap_env_fn is not None:
        env: brax_envs.Env = c.wrap_env_fn(
            environment,
            episode_length=c.episode_length,
            action_repeat=c.action_repeat,
            randomization_fn=randomization_fn,
        )
        return env
    return wrappers.wrap_for_training(
        environment,
        episode_length=c.episode_length,
        action_repeat=c.action_repeat,
        randomization_fn=randomization_fn,
        randomize_per_episode=per_episode,
    )


def _network_factory(c: PPOConfig) -> Callable[..., ppo_networks.PPONetworks]:
    nf = c.network_factory
    if isinstance(nf, Mapping):
        kw: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in nf.items()}
        return functools.partial(ppo_networks.make_ppo_networks, **kw)
    return nf


def train(environment: brax_envs.Env, config: PPOConfig | None = None, **kwargs: Any) -> TrainResult:
    """Train a PPO agent on `environment`.

    Settings come from `config` and/or keywords named as in Google Brax's `ppo.train` (see
    `PPOConfig`); a setting must not be given in both places. Everything is validated before any
    compilation. Returns `TrainResult(make_policy, params, metrics)`.
    """
    c = merge(config, kwargs)
    if not isinstance(environment, brax_envs.Env):
        raise TypeError(f"environment must be a brax_envs.Env, got {type(environment).__name__}")
    local = jax.local_devices()
    n_dev = min(len(local), c.max_devices_per_host or len(local))
    validate(c, n_dev)
    devices = local[:n_dev]
    logger.info(
        "brax_train.ppo: matmul precision %r; %d of %d local devices (%s), %d process(es)",
        c.matmul_precision,
        n_dev,
        len(local),
        ", ".join(str(d) for d in devices),
        jax.process_count(),
    )
    with jax.default_matmul_precision(c.matmul_precision):
        return _train(environment, c, devices)


def _train(environment: brax_envs.Env, c: PPOConfig, devices: list[jax.Device]) -> TrainResult:
    t_start = time.perf_counter()
    mesh = Mesh(np.array(devices), (_AXIS,))
    repl = NamedSharding(mesh, P())
    num_envs = c.num_envs
    env_steps_per_training_step = c.batch_size * c.unroll_length * c.num_minibatches * c.action_repeat
    adaptive_kl = schedule_name(c.learning_rate_schedule) == "ADAPTIVE_KL"

    key = jax.random.PRNGKey(c.seed)
    global_key, local_key = jax.random.split(key)
    local_key = jax.random.fold_in(local_key, jax.process_index())
    train_key, key_env, eval_key, reset_key = jax.random.split(local_key, 4)
    key_policy, key_value = jax.random.split(global_key)
    key_rand, key_reset0 = jax.random.split(key_env)

    env = _wrap_env(environment, c, num_envs, key_rand, per_episode=c.randomize_per_episode)
    reset_keys = jax.random.split(key_reset0, num_envs)
    state_shape = jax.eval_shape(env.reset, reset_keys)
    env_shardings = _env_shardings(state_shape, num_envs, mesh)
    reset_fn = jax.jit(env.reset, out_shardings=env_shardings)
    env_state = reset_fn(jax.device_put(reset_keys, NamedSharding(mesh, P(_AXIS))))

    obs_size = jax.tree.map(lambda x: tuple(x.shape[1:]), state_shape.obs)
    obs_size_arg = obs_size[0] if isinstance(obs_size, tuple) and len(obs_size) == 1 else obs_size
    preprocess = (
        running_statistics.normalize
        if c.normalize_observations
        else networks.identity_observation_preprocessor
    )
    ppo_net = _network_factory(c)(obs_size_arg, env.action_size, preprocess_observations_fn=preprocess)
    make_policy = ppo_networks.make_inference_fn(ppo_net)

    base = (
        optax.inject_hyperparams(optax.adam)(learning_rate=c.learning_rate)
        if adaptive_kl
        else optax.adam(learning_rate=c.learning_rate)
    )
    optimizer = optax.chain(*([optax.clip_by_global_norm(c.max_grad_norm)] if c.max_grad_norm else []), base)

    init_params = losses.NetworkParams(
        policy=ppo_net.policy_network.init(key_policy), value=ppo_net.value_network.init(key_value)
    )
    normalizer = running_statistics.init_state(
        obs_size, std_eps=c.normalize_observations_std_eps, mode=c.normalize_observations_mode
    )
    ts = TrainingState(params=init_params, normalizer=normalizer, optimizer_state=optimizer.init(init_params))
    step = 0
    last_ckpt: str | None = None

    if c.restore_checkpoint_path is not None:
        last_ckpt = os.fspath(checkpoint.resolve(c.restore_checkpoint_path))
        ts, step, train_key, env_state = _restore(
            c, ts, train_key, env_state, env_shardings, ppo_net, init_params, optimizer
        )
    if c.restore_params is not None:
        rp = c.restore_params
        value = rp.value if c.restore_value_fn else ts.params.value
        new = losses.NetworkParams(policy=rp.policy, value=value)
        ts = TrainingState(params=new, normalizer=rp.normalizer, optimizer_state=ts.optimizer_state)
    ts = jax.device_put(ts, repl)
    train_key = jax.device_put(train_key, repl)

    def public_params(s: TrainingState) -> ppo_networks.PPOParams:
        return ppo_networks.PPOParams(normalizer=s.normalizer, policy=s.params.policy, value=s.params.value)

    if c.num_timesteps == 0:
        return TrainResult(make_policy, public_params(ts), {})

    # ---- the jitted chunk of training steps -------------------------------------------------------
    info_keys = set(state_shape.info)
    extra_fields = [
        k for k in ("truncation", "episode_metrics", "episode_done", "time_out") if k in info_keys
    ]
    unrolls_per_step = c.batch_size * c.num_minibatches // num_envs
    data_sharding = NamedSharding(mesh, P(_AXIS))
    minibatch_sharding = NamedSharding(mesh, P(None, _AXIS))
    loss_fn = functools.partial(
        losses.compute_ppo_loss,
        ppo_networks=ppo_net,
        entropy_cost=c.entropy_cost,
        discounting=c.discounting,
        reward_scaling=c.reward_scaling,
        gae_lambda=c.gae_lambda,
        clipping_epsilon=c.clipping_epsilon,
        normalize_advantage=c.normalize_advantage,
        vf_loss_coefficient=c.vf_loss_coefficient,
        clipping_epsilon_value=c.clipping_epsilon_value,
    )
    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

    def minibatch_step(
        carry: tuple[losses.NetworkParams, Any, PRNGKey], data: Transition, normalizer: Any
    ) -> tuple[tuple[losses.NetworkParams, Any, PRNGKey], dict[str, jax.Array]]:
        params, opt_state, key = carry
        key, key_loss = jax.random.split(key)
        (loss, metrics), grads = grad_fn(params, normalizer, data, key_loss)
        if adaptive_kl:
            lr = _get_lr(opt_state)
            kl = metrics["kl_mean"]
            lr = jnp.where(
                kl > 2.0 * c.desired_kl, jnp.maximum(c.learning_rate_schedule_min_lr, lr / 1.5), lr
            )
            lr = jnp.where(
                (kl < 0.5 * c.desired_kl) & (kl > 0.0),
                jnp.minimum(c.learning_rate_schedule_max_lr, lr * 1.5),
                lr,
            )
            opt_state = _set_lr(opt_state, lr)
            metrics["learning_rate"] = lr
        else:
            metrics["learning_rate"] = jnp.asarray(c.learning_rate, jnp.float32)
        with jax.numpy_dtype_promotion("standard"):  # optax mixes int step counts with float constants
            updates, opt_state = optimizer.update(grads, opt_state, params)
            params = optax.apply_updates(params, updates)
        params = _constrain(params, repl)
        metrics["bad_loss"] = ~jnp.isfinite(loss)
        metrics["bad_grads"] = ~jnp.isfinite(optax.tree.norm(grads))
        metrics["bad_params"] = ~_all_finite(params)
        return (params, opt_state, key), metrics

    def sgd_pass(
        carry: tuple[losses.NetworkParams, Any, PRNGKey], _: None, data: Transition, normalizer: Any
    ) -> tuple[tuple[losses.NetworkParams, Any, PRNGKey], dict[str, jax.Array]]:
        params, opt_state, key = carry
        key, key_perm, key_grad = jax.random.split(key, 3)
        perm = jax.random.permutation(key_perm, c.batch_size * c.num_minibatches)

        def shuffle(x: jax.Array) -> jax.Array:
            x = jnp.take(x, perm, axis=0)
            x = jnp.reshape(x, (c.num_minibatches, c.batch_size, *x.shape[1:]))
            out: jax.Array = _constrain(x, minibatch_sharding)
            return out

        minibatches = jax.tree.map(shuffle, data)

        def body(
            carry: tuple[losses.NetworkParams, Any, PRNGKey], mb: Transition
        ) -> tuple[tuple[losses.NetworkParams, Any, PRNGKey], dict[str, jax.Array]]:
            return minibatch_step(carry, mb, normalizer)

        (params, opt_state, _key), metrics = jax.lax.scan(body, (params, opt_state, key_grad), minibatches)
        return (params, opt_state, key), metrics

    def training_step(
        carry: tuple[TrainingState, brax_envs.State], index: UInt64, key_base: PRNGKey
    ) -> tuple[tuple[TrainingState, brax_envs.State], dict[str, jax.Array]]:
        s, env_state = carry
        key_sgd, key_unroll = jax.random.split(_key_at(key_base, index))
        policy = make_policy(public_params(s))

        def unroll(
            st_key: tuple[brax_envs.State, PRNGKey], _: None
        ) -> tuple[tuple[brax_envs.State, PRNGKey], Transition]:
            st, k = st_key
            k, k_now = jax.random.split(k)
            st, data = acting.generate_unroll(env, st, policy, k_now, c.unroll_length, extra_fields)
            st = _constrain(st, env_shardings)
            return (st, k), data

        (env_state, _), data = jax.lax.scan(unroll, (env_state, key_unroll), None, length=unrolls_per_step)
        # (unrolls, T, envs, ...) -> (unrolls * envs, T, ...)
        data = jax.tree.map(
            lambda x: jnp.reshape(jnp.swapaxes(x, 1, 2), (-1, *x.shape[1:2], *x.shape[3:])), data
        )
        data = _constrain(data, jax.tree.map(lambda _: data_sharding, data))
        se: dict[str, Any] = dict(data.extras["state_extras"])
        if "truncation" not in se:
            se["truncation"] = jnp.zeros_like(data.reward)
        if c.bootstrap_on_timeout:
            time_out = se.get("time_out", se["truncation"])
            v_final = ppo_net.value_network.apply(s.normalizer, s.params.value, data.next_observation)
            data = dataclasses.replace(
                data,
                reward=data.reward
                + (c.discounting / c.reward_scaling if c.reward_scaling else 0.0) * time_out * v_final,
            )
            se["truncation"] = se["truncation"] * (1.0 - time_out)
        data = dataclasses.replace(data, extras={**data.extras, "state_extras": se})

        def update_stats(
            norm: running_statistics.RunningStatisticsState,
        ) -> running_statistics.RunningStatisticsState:
            if not c.normalize_observations:
                return norm
            return running_statistics.update(norm, data.observation, until_count=c.normalize_until_count)

        _late = adaptive_kl  # Brax: statistics after SGD under adaptive KL (valid old distributions)
        normalizer = s.normalizer if _late else update_stats(s.normalizer)
        (params, opt_state, _), metrics = jax.lax.scan(
            functools.partial(sgd_pass, data=data, normalizer=normalizer),
            (s.params, s.optimizer_state, key_sgd),
            None,
            length=c.num_updates_per_batch,
        )
        if _late:
            normalizer = update_stats(normalizer)
        # The first minibatch update with a non-finite quantity, coded 1 loss, 2 gradients, 3 parameters.
        codes = jnp.where(
            metrics.pop("bad_loss"),
            1,
            jnp.where(metrics.pop("bad_grads"), 2, jnp.where(metrics.pop("bad_params"), 3, 0)),
        )
        codes = jnp.ravel(codes)
        code = codes[jnp.argmax(codes > 0)]
        code = jnp.where((code == 0) & ~_all_finite(normalizer), 4, code)
        out = {k: jnp.mean(v) for k, v in metrics.items()}
        out["nonfinite"] = code
        if "episode_done" in se and "episode_metrics" in se:
            done = se["episode_done"]
            out["episode_count"] = jnp.sum(done)
            for name, v in se["episode_metrics"].items():
                out[f"episode_sum/{name}"] = jnp.sum(v * done)
        new = TrainingState(params=params, normalizer=normalizer, optimizer_state=opt_state)
        return (new, env_state), out

    def chunk(
        s: TrainingState, env_state: brax_envs.State, key_base: PRNGKey, first: UInt64, length: int
    ) -> tuple[TrainingState, brax_envs.State, dict[str, jax.Array]]:
        def body(
            carry: tuple[TrainingState, brax_envs.State], i: jax.Array
        ) -> tuple[tuple[TrainingState, brax_envs.State], dict[str, jax.Array]]:
            return training_step(carry, first.add(i), key_base)

        (s, env_state), metrics = jax.lax.scan(body, (s, env_state), jnp.arange(length, dtype=jnp.uint32))
        s = _constrain(s, jax.tree.map(lambda _: repl, s))
        env_state = _constrain(env_state, env_shardings)
        return s, env_state, metrics

    donate = (0, 1) if devices[0].platform != "cpu" else ()
    chunk_fn = jax.jit(chunk, static_argnames=("length",), donate_argnums=donate)

    # ---- schedule (in training steps) ------------------------------------------------------------------
    R = max(c.num_resets_per_eval, 1)
    n_intervals = max(c.num_evals - 1, 1)
    remaining = max(c.num_timesteps - step, 0)
    k_epoch = math.ceil(remaining / (n_intervals * env_steps_per_training_step * R))
    k_eval = k_epoch * R
    total = n_intervals * k_eval
    k_metrics = 0
    if c.log_training_metrics:
        k_metrics = max(
            1,
            math.ceil(
                (c.training_metrics_steps or env_steps_per_training_step) / env_steps_per_training_step
            ),
        )
    chunk_len = math.gcd(k_epoch, k_metrics) if k_metrics else k_epoch
    first_index = step // env_steps_per_training_step

    evaluator = None
    if c.num_evals > 0 and c.run_evals:
        # Evaluation measures each eval env's first episode only (`EvalWrapper`), so re-drawing at
        # auto-resets would never be seen there: it keeps the once-per-run draw of `num_eval_envs` systems.
        eval_env = _wrap_env(c.eval_env or environment, c, c.num_eval_envs, jax.random.fold_in(eval_key, 1))
        assert c.episode_length is not None
        evaluator = acting.Evaluator(
            eval_env,
            functools.partial(make_policy, deterministic=c.deterministic_eval),
            num_eval_envs=c.num_eval_envs,
            episode_length=c.episode_length,
            action_repeat=c.action_repeat,
            key=eval_key,
        )

    saver = None
    if c.save_checkpoint_path is not None:
        saver = checkpoint.Saver(c.save_checkpoint_path, max_to_keep=c.checkpoint_max_to_keep)
    obs_json = {k: list(v) for k, v in obs_size.items()} if isinstance(obs_size, Mapping) else list(obs_size)
    meta_base = {
        "config": c.to_json(),
        "network": ppo_net.description,
        "env_steps_per_training_step": env_steps_per_training_step,
        "observation_shapes": obs_json,
        "action_size": env.action_size,
        "normalize_observations": c.normalize_observations,
        "normalize_observations_std_eps": c.normalize_observations_std_eps,
        "normalize_observations_mode": c.normalize_observations_mode,
    }

    def save(at_step: int) -> None:
        nonlocal last_ckpt
        if saver is None:
            return
        meta = {**meta_base, "step": at_step, "training_step": at_step // env_steps_per_training_step}
        train_state = {"optimizer_state": ts.optimizer_state, "train_key": train_key, "env_state": env_state}
        last_ckpt = os.fspath(saver.save(at_step, public_params(ts), train_state, meta))

    def evaluate(at_step: int, training_metrics: dict[str, float]) -> dict[str, float]:
        if evaluator is None:
            return dict(training_metrics)
        key = _key_at(jax.random.fold_in(eval_key, 2), UInt64.from_int(at_step))
        params = jax.device_put(public_params(ts), devices[0])
        return evaluator.run_evaluation(params, training_metrics, key)

    def report(at_step: int, metrics: dict[str, float]) -> None:
        logger.info("step %d: %s", at_step, metrics)
        if c.progress_fn is not None:
            c.progress_fn(at_step, metrics)

    metrics: dict[str, float] = {}
    if c.num_evals > 1 and evaluator is not None:
        metrics = evaluate(step, {})
        report(step, metrics)
    if c.policy_params_fn is not None:
        c.policy_params_fn(step, make_policy, public_params(ts))

    window: dict[str, float] = {}
    window_steps = 0
    window_time = 0.0
    training_metrics: dict[str, float] = {}
    walltime = 0.0
    done = 0
    compiled_logged = False
    while done < total:
        t0 = time.perf_counter()
        ts, env_state, m = chunk_fn(
            ts,
            env_state,
            train_key,
            jax.device_put(UInt64.from_int(first_index + done), repl),
            length=chunk_len,
        )
        m = jax.device_get(m)
        dt = time.perf_counter() - t0
        if not compiled_logged:
            logger.info("first chunk (compile + run) took %.1f s", dt)
            compiled_logged = True
        walltime += dt
        _check_finite(m, step, env_steps_per_training_step, last_ckpt)
        done += chunk_len
        step += chunk_len * env_steps_per_training_step
        # loss metrics and training-episode sums of this chunk
        for k, v in m.items():
            window[k] = window.get(k, 0.0) + float(np.sum(np.asarray(v, np.float64)))
        window_steps += chunk_len
        window_time += dt
        training_metrics = _training_metrics(
            window, window_steps, window_time, walltime, env_steps_per_training_step
        )
        if c.num_resets_per_eval > 0 and done % k_epoch == 0:
            env_state = reset_fn(
                jax.device_put(
                    jax.random.split(_key_at(reset_key, UInt64.from_int(first_index + done)), num_envs),
                    NamedSharding(mesh, P(_AXIS)),
                )
            )
        at_metrics = bool(k_metrics) and done % k_metrics == 0
        at_eval = done % k_eval == 0
        if at_metrics:
            report(step, training_metrics)
        if at_metrics or at_eval:
            window, window_steps, window_time = {}, 0, 0.0
        if at_eval:
            if c.policy_params_fn is not None:
                c.policy_params_fn(step, make_policy, public_params(ts))
            save(step)
            if c.num_evals > 0:
                metrics = evaluate(step, training_metrics)
                report(step, metrics)
            else:
                metrics = training_metrics
        elif at_metrics and c.num_evals == 0:
            save(step)
            metrics = training_metrics
    if saver is not None:
        saver.close()
    logger.info("brax_train.ppo: trained to step %d in %.1f s", step, time.perf_counter() - t_start)
    return TrainResult(make_policy, public_params(ts), metrics)


def _training_metrics(
    window: dict[str, float], steps: int, seconds: float, walltime: float, env_steps_per_training_step: int
) -> dict[str, float]:
    out: dict[str, float] = {}
    count = window.get("episode_count", 0.0)
    for k, v in window.items():
        if k.startswith("episode_sum/"):
            if count > 0:
                out["episode/" + k.removeprefix("episode_sum/")] = v / count
        elif k != "episode_count":
            out["training/" + k] = v / max(steps, 1)
    out["episode/count"] = count
    out["training/sps"] = steps * env_steps_per_training_step / seconds if seconds > 0 else float("inf")
    out["training/walltime"] = walltime
    return out


_QUANTITIES = {1: "loss", 2: "gradients", 3: "parameters", 4: "normalizer statistics"}


def _check_finite(
    m: dict[str, Any], step: int, env_steps_per_training_step: int, last_ckpt: str | None
) -> None:
    codes = np.asarray(m.pop("nonfinite"))
    if np.any(codes):
        i = int(np.argmax(codes > 0))
        quantity = _QUANTITIES[int(codes[i])]
        at = step + (i + 1) * env_steps_per_training_step
        where = last_ckpt if last_ckpt is not None else "none (no checkpoint saved yet)"
        raise NonFiniteError(
            f"non-finite {quantity} in the training step ending at env step {at} (training stopped); "
            f"last good checkpoint: {where}",
            step=at,
            quantity=quantity,
            last_checkpoint=last_ckpt,
        )


def _restore(
    c: PPOConfig,
    ts: TrainingState,
    train_key: PRNGKey,
    env_state: brax_envs.State,
    env_shardings: Any,
    ppo_net: ppo_networks.PPONetworks,
    init_params: losses.NetworkParams,
    optimizer: Any,
) -> tuple[TrainingState, int, PRNGKey, brax_envs.State]:
    assert c.restore_checkpoint_path is not None
    step_dir = checkpoint.resolve(c.restore_checkpoint_path)
    meta = checkpoint.read_meta(step_dir)
    desc = meta.get("network", {})
    if desc and ppo_net.description and desc.get("kwargs") != ppo_net.description.get("kwargs"):
        raise checkpoint.CheckpointMismatchError(
            f"{step_dir}: the checkpoint's networks differ from this run's: {desc.get('kwargs')} vs "
            f"{ppo_net.description.get('kwargs')}"
        )
    params_target = ppo_networks.PPOParams(
        normalizer=ts.normalizer, policy=ts.params.policy, value=ts.params.value
    )
    params = checkpoint.restore_item(step_dir, "params", params_target)
    if not c.restore_value_fn:
        logger.info(
            "restored policy and normalizer from %s (value function, optimizer and step start fresh)",
            step_dir,
        )
        new = losses.NetworkParams(policy=params.policy, value=init_params.value)
        return (
            TrainingState(params=new, normalizer=params.normalizer, optimizer_state=optimizer.init(new)),
            0,
            train_key,
            env_state,
        )
    target = {"optimizer_state": ts.optimizer_state, "train_key": train_key, "env_state": env_state}
    try:
        restored = checkpoint.restore_item(step_dir, "train_state", target)
    except checkpoint.CheckpointMismatchError as e:
        logger.warning("%s; resuming with fresh optimizer state and environments", e)
        restored = {"optimizer_state": ts.optimizer_state, "train_key": train_key, "env_state": env_state}
    env_state = jax.device_put(restored["env_state"], env_shardings)
    step = int(meta["step"])
    logger.info("resuming from %s at env step %d", step_dir, step)
    new_ts = TrainingState(
        params=losses.NetworkParams(policy=params.policy, value=params.value),
        normalizer=params.normalizer,
        optimizer_state=restored["optimizer_state"],
    )
    return new_ts, step, restored["train_key"], env_state


__all__ = ["NonFiniteError", "TrainResult", "TrainingState", "train"]
