"""PyTorch bridge throughput: `brax_envs.wrappers.torch` next to JAX alone; rsl_rl on it next to Gymnasium.

Prints JSON lines of two kinds.

- `"bench": "step"`, one per (env, batch): env steps per second of the same compiled, auto-resetting
  training step (`wrap_for_training`) driven two ways from a Python loop with uniform random actions
  in [-1, 1]: by JAX alone (`jax_steps_per_s`: the jitted step, blocking on each step's
  observation, as a policy loop must) and through the bridge (`bridge_steps_per_s`:
  `TorchVecEnv.step` with a torch action tensor, giving back torch tensors through DLPack).
  `overhead_us_per_step` is the bridge's extra wall time per batched step; `bridge_over_jax` the
  throughput ratio. Medians of `--repeats` runs of `--steps` steps each, the two ways in turns, after
  a warm-up run of each.
- `"bench": "rsl_rl"`, one per environment implementation: env steps per second of rsl_rl's
  (rsl-rl-lib 5) `OnPolicyRunner.learn` (rollouts and PPO updates, the first iteration untimed), on
  our `inverted_pendulum` through `RslRlVecEnv`, and on Gymnasium's MuJoCo `InvertedPendulum-v5` in
  a `SyncVectorEnv` (MuJoCo C, NumPy arrays copied into torch; `_GymnasiumVecEnv` below adapts it
  to rsl_rl's VecEnv). Same PPO config, network and batch for both; `ours_over_gymnasium` on ours.

Run with `hatch run bench:torch [--envs inverted_pendulum,ant] [--batch 256,1024] [--steps 100]
[--rsl-rl-envs 64] [--iterations 10] [--no-rsl-rl]`.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import brax_envs
import gymnasium
import jax
import numpy as np
import torch
from brax_envs.wrappers.torch import RslRlVecEnv, TorchVecEnv
from gymnasium.vector import AutoresetMode
from results import record
from tensordict import TensorDict

Result = dict[str, Any]

ROLLOUT = 32
_RSL_RL_CFG: dict[str, Any] = {
    "num_steps_per_env": ROLLOUT, "save_interval": 1_000_000, "check_for_nan": False,
    "obs_groups": {"actor": ["policy"], "critic": ["policy"]},
    "algorithm": {"class_name": "PPO", "num_learning_epochs": 5, "num_mini_batches": 4, "learning_rate": 1e-3,
                  "entropy_coef": 0.0},
    "actor": {"class_name": "MLPModel", "hidden_dims": [32, 32], "activation": "elu",
              "obs_normalization": True,
              "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0}},
    "critic": {"class_name": "MLPModel", "hidden_dims": [32, 32], "activation": "elu",
               "obs_normalization": True},
}
"""The rsl_rl config of tests-integration/torch_clients_test.py."""


def _seconds(run: Callable[[], None]) -> float:
    """Wall seconds of `run()`."""
    t0 = time.perf_counter()
    run()
    return time.perf_counter() - t0


def bench_step(name: str, batch: int, steps: int, repeats: int) -> Result:
    """JAX alone vs the bridge on one compiled training step of `name` at `batch` envs."""
    t0 = time.perf_counter()
    vec = TorchVecEnv(brax_envs.get_environment(name), batch)
    actions = torch.rand(batch, vec.num_actions) * 2 - 1
    vec.step(actions)  # compiles
    compile_s = time.perf_counter() - t0
    act_jax = jax.device_put(actions.numpy(), vec.jax_device)
    # The executable the bridge runs, driven without it (private names: the bench compares the two).
    step_fn = vec._step_fn

    def run_jax() -> None:
        state = vec.jax_state
        for _ in range(steps):
            state, _ = step_fn(state, act_jax)
            state.obs.block_until_ready()

    def run_bridge() -> None:
        for _ in range(steps):
            vec.step(actions)

    run_jax()
    run_bridge()
    # In turns, so that drift on a shared machine hits both alike.
    times = [(_seconds(run_jax), _seconds(run_bridge)) for _ in range(repeats)]
    jax_s = statistics.median(t[0] for t in times)
    bridge_s = statistics.median(t[1] for t in times)
    return {"bench": "step", "env": name, "batch": batch, "steps": steps, "compile_s": round(compile_s, 2),
            "jax_steps_per_s": round(batch * steps / jax_s),
            "bridge_steps_per_s": round(batch * steps / bridge_s),
            "bridge_over_jax": round(jax_s / bridge_s, 3),
            "overhead_us_per_step": round((bridge_s - jax_s) / steps * 1e6, 1)}


class _GymnasiumVecEnv:
    """rsl_rl's VecEnv over a Gymnasium `SyncVectorEnv` (autoreset in the same step, as rsl_rl expects)."""

    def __init__(self, env_id: str, num_envs: int, seed: int = 0) -> None:
        """`num_envs` copies of Gymnasium environment `env_id`."""
        self.env = gymnasium.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync",
                                      vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP})
        space = self.env.single_action_space
        assert isinstance(space, gymnasium.spaces.Box)
        self.num_envs = num_envs
        self.num_actions = int(space.shape[0])
        spec = self.env.spec
        self.max_episode_length = int(spec.max_episode_steps or 1000) if spec is not None else 1000
        self.episode_length_buf = torch.zeros(num_envs, dtype=torch.long)
        self.device = torch.device("cpu")
        self.cfg: dict[str, Any] = {"env": env_id, "num_envs": num_envs}
        obs, _ = self.env.reset(seed=seed)
        self._obs = torch.as_tensor(np.asarray(obs, np.float32))

    def get_observations(self) -> TensorDict:
        """The current observations as the group `policy`."""
        return TensorDict({"policy": self._obs}, batch_size=[self.num_envs])

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Step every copy with `actions`; (observations, rewards, dones, extras) in torch."""
        obs, reward, terminated, truncated, _ = self.env.step(actions.detach().cpu().numpy())
        self._obs = torch.as_tensor(np.asarray(obs, np.float32))
        dones = torch.as_tensor(np.logical_or(terminated, truncated))
        self.episode_length_buf = torch.where(dones, 0, self.episode_length_buf + 1)
        return (self.get_observations(), torch.as_tensor(np.asarray(reward, np.float32)), dones,
                {"time_outs": torch.as_tensor(np.asarray(truncated))})


def bench_rsl_rl(impl: str, num_envs: int, iterations: int) -> Result:
    """Env steps per second of rsl_rl's OnPolicyRunner on `impl` ('brax_envs' or 'gymnasium')."""
    from rsl_rl.runners import OnPolicyRunner  # type: ignore[import-untyped]

    torch.manual_seed(0)
    env: Any
    if impl == "brax_envs":
        env = RslRlVecEnv(brax_envs.get_environment("inverted_pendulum"), num_envs)
        env_name = "inverted_pendulum"
    else:
        env = _GymnasiumVecEnv("InvertedPendulum-v5", num_envs)
        env_name = "InvertedPendulum-v5"
    runner = OnPolicyRunner(env, copy.deepcopy(_RSL_RL_CFG), log_dir=None, device="cpu")
    runner.learn(1)  # compiles (ours) and warms up both
    t0 = time.perf_counter()
    runner.learn(iterations)
    seconds = time.perf_counter() - t0
    steps = num_envs * ROLLOUT * iterations
    return {"bench": "rsl_rl", "impl": impl, "env": env_name, "num_envs": num_envs, "steps_per_env": ROLLOUT,
            "iterations": iterations, "env_steps": steps, "seconds": round(seconds, 2),
            "env_steps_per_s": round(steps / seconds)}


def main() -> None:
    """Parse arguments, print one JSON line per measurement."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--envs", default="inverted_pendulum,ant")
    p.add_argument("--batch", default="256,1024")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--rsl-rl-envs", type=int, default=64)
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--no-rsl-rl", action="store_true")
    p.add_argument("--torch-threads", type=int, default=1,
                   help="torch intra-op threads (1: small matmuls gain nothing from contending with XLA)")
    p.add_argument("--record", action="store_true",
                   help="also append each row to tools/bench/results.jsonl (see results.py)")
    args = p.parse_args()
    torch.set_num_threads(args.torch_threads)
    meta = {"jax": jax.__version__, "torch": torch.__version__, "device": str(jax.devices()[0]),
            "torch_threads": args.torch_threads}
    for name in args.envs.split(","):
        for batch in (int(b) for b in args.batch.split(",")):
            row = {**bench_step(name, batch, args.steps, args.repeats), **meta}
            print(json.dumps(row), flush=True)
            if args.record:
                record([row], bench="torch")
    if not args.no_rsl_rl:
        ours = bench_rsl_rl("brax_envs", args.rsl_rl_envs, args.iterations)
        theirs = bench_rsl_rl("gymnasium", args.rsl_rl_envs, args.iterations)
        ours["ours_over_gymnasium"] = round(ours["env_steps_per_s"] / theirs["env_steps_per_s"], 3)
        for side in (ours, theirs):
            line = {**side, **meta}
            print(json.dumps(line), flush=True)
            if args.record:
                record([line], bench="torch")


if __name__ == "__main__":
    main()
