"""rsl_rl's `OnPolicyRunner` and skrl's PPO balance `inverted_pendulum` through `brax_envs.wrappers.torch`.

Each trains on 64 environments with rollouts of 32 steps (seeded, CPU): rsl_rl for 60 iterations
(122,880 env steps; with rsl_rl's adaptive learning rate its seeds reach 1000 after 30 to 50 and
stay there), skrl for 30 (61,440 env steps; seeds 0-2 reach 1000). Then the deterministic policy runs
one full episode (1000 steps, reward 1 per step while the pole stays up) on the same 64
environments, reset with new keys; the mean return must be at least 900. A random policy scores
about 25.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import brax_envs
import pytest
import torch
from brax_envs.wrappers.torch import RslRlVecEnv, SkrlVecEnv
from torch import nn

pytestmark = pytest.mark.slow

NUM_ENVS = 64
ROLLOUT = 32
RSL_RL_ITERATIONS = 60
SKRL_ITERATIONS = 30
EPISODE = 1000
HIDDEN = 32


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """Torch's small matmuls gain nothing from threads that contend with XLA's on 2 cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _first_episode_returns(step: Callable[[], tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    """Return of each environment's first episode; `step()` acts, steps and gives (rewards, dones)."""
    total = torch.zeros(NUM_ENVS)
    alive = torch.ones(NUM_ENVS)
    for _ in range(EPISODE):
        reward, done = step()
        total += alive * reward.reshape(-1)
        alive *= (~done.reshape(-1)).float()
    return total


def test_rsl_rl_on_policy_runner_balances_inverted_pendulum() -> None:
    from rsl_rl.runners import OnPolicyRunner  # type: ignore[import-untyped]

    torch.manual_seed(0)
    env = RslRlVecEnv(brax_envs.get_environment("inverted_pendulum"), NUM_ENVS, episode_length=EPISODE)
    mlp: dict[str, Any] = {"class_name": "MLPModel", "hidden_dims": [HIDDEN, HIDDEN], "activation": "elu",
                           "obs_normalization": True}
    cfg = {
        "num_steps_per_env": ROLLOUT, "save_interval": RSL_RL_ITERATIONS,
        "obs_groups": {"actor": ["policy"], "critic": ["policy"]},
        "algorithm": {"class_name": "PPO", "num_learning_epochs": 5, "num_mini_batches": 4,
                      "learning_rate": 1e-3, "entropy_coef": 0.0},
        "actor": {**mlp, "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0}},
        "critic": mlp,
    }
    runner = OnPolicyRunner(env, cfg, log_dir=None, device="cpu")
    runner.learn(RSL_RL_ITERATIONS)
    assert runner.current_learning_iteration == RSL_RL_ITERATIONS - 1

    policy = runner.get_inference_policy()
    env.reset()
    obs = env.get_observations()

    def step() -> tuple[torch.Tensor, torch.Tensor]:
        nonlocal obs
        obs, reward, done, _ = env.step(policy(obs))
        return reward, done

    with torch.inference_mode():
        returns = _first_episode_returns(step)
    assert returns.mean() >= 900.0, (returns.mean(), returns.min())


def test_skrl_ppo_balances_inverted_pendulum() -> None:
    from skrl.agents.torch.ppo import PPO, PPO_CFG  # type: ignore[import-untyped]
    from skrl.memories.torch import RandomMemory  # type: ignore[import-untyped]
    from skrl.models.torch import DeterministicMixin, GaussianMixin, Model  # type: ignore[import-untyped]
    from skrl.resources.preprocessors.torch import RunningStandardScaler  # type: ignore[import-untyped]
    from skrl.trainers.torch import SequentialTrainer  # type: ignore[import-untyped]
    from skrl.utils import set_seed  # type: ignore[import-untyped]

    set_seed(0)
    env = SkrlVecEnv(brax_envs.get_environment("inverted_pendulum"), NUM_ENVS, episode_length=EPISODE)

    def mlp(outputs: int) -> nn.Sequential:
        return nn.Sequential(nn.Linear(env.observation_space.shape[0], HIDDEN), nn.ELU(),
                             nn.Linear(HIDDEN, HIDDEN), nn.ELU(), nn.Linear(HIDDEN, outputs))

    class Policy(GaussianMixin, Model):  # type: ignore[misc]
        def __init__(self) -> None:
            Model.__init__(self, observation_space=env.observation_space, action_space=env.action_space,
                           device=env.device)
            GaussianMixin.__init__(self, clip_actions=True)
            self.net = mlp(env.num_actions)
            self.log_std = nn.Parameter(torch.zeros(env.num_actions))

        def compute(self, inputs: dict[str, Any], role: str = "") -> tuple[torch.Tensor, dict[str, Any]]:
            return self.net(inputs["observations"]), {"log_std": self.log_std}

    class Value(DeterministicMixin, Model):  # type: ignore[misc]
        def __init__(self) -> None:
            Model.__init__(self, observation_space=env.observation_space, action_space=env.action_space,
                           device=env.device)
            DeterministicMixin.__init__(self)
            self.net = mlp(1)

        def compute(self, inputs: dict[str, Any], role: str = "") -> tuple[torch.Tensor, dict[str, Any]]:
            return self.net(inputs["observations"]), {}

    cfg = PPO_CFG(rollouts=ROLLOUT, learning_epochs=4, mini_batches=4, learning_rate=3e-3,
                  observation_preprocessor=RunningStandardScaler,
                  observation_preprocessor_kwargs={"size": env.observation_space, "device": env.device},
                  value_preprocessor=RunningStandardScaler,
                  value_preprocessor_kwargs={"size": 1, "device": env.device},
                  experiment={"write_interval": 0, "checkpoint_interval": 0})
    agent = PPO(models={"policy": Policy(), "value": Value()},
                memory=RandomMemory(memory_size=ROLLOUT, num_envs=NUM_ENVS, device=env.device),
                observation_space=env.observation_space, action_space=env.action_space, device=env.device,
                cfg=cfg)
    trainer = SequentialTrainer(env=env, agents=agent,
                                cfg={"timesteps": ROLLOUT * SKRL_ITERATIONS, "headless": True,
                                     "disable_progressbar": True, "close_environment_at_exit": False})
    trainer.train()

    agent.enable_training_mode(False)
    obs, _ = env.reset()

    def step() -> tuple[torch.Tensor, torch.Tensor]:
        nonlocal obs
        _, outputs = agent.act(obs, env.state(), timestep=0, timesteps=0)
        obs, reward, terminated, truncated, _ = env.step(outputs["mean_actions"])
        return reward, terminated | truncated

    with torch.inference_mode():
        returns = _first_episode_returns(step)
    assert returns.mean() >= 900.0, (returns.mean(), returns.min())
