"""The suite's registration: every dm_control task by name, and the error without the extra."""

from __future__ import annotations

import sys

import jax
import numpy as np
import pytest

import brax_envs
from brax_envs import dm_control
from brax_envs.dm_control._suite import suite_model, suite_module

suite = suite_module("")


def test_every_dm_control_task_is_registered() -> None:
    assert set(dm_control.ALL_TASKS) == set(suite.ALL_TASKS)
    names = set(brax_envs.registered_environments())
    missing = [f"dm_control/{d}-{t}" for d, t in suite.ALL_TASKS if f"dm_control/{d}-{t}" not in names]
    assert not missing


def test_registered_task_is_flat_by_default() -> None:
    env = brax_envs.get_environment("dm_control/cartpole-balance")
    assert env.observation_size == 5
    raw = brax_envs.get_environment("dm_control/cartpole-balance", flatten_observation=False)
    assert raw.observation_size == {"position": (3,), "velocity": (2,)}


def test_unknown_task_names_the_domains_tasks() -> None:
    with pytest.raises(KeyError, match="cartpole's tasks"):
        dm_control.load("cartpole", "run")


def test_without_dm_control_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "dm_control" or m.startswith("dm_control.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "dm_control", None)  # what `import dm_control` sees uninstalled
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'brax-envs\[dm-control\]'"):
        dm_control.load("cartpole", "balance")


@pytest.mark.parametrize(("domain", "task"),
                         [("finger", "spin"), ("walker", "walk"), ("cartpole", "swingup")])
def test_solver_option_sets_the_domains_budget(domain: str, task: str) -> None:
    # "default" simulates with the options of dm_control's model, "fast" with the domain's budget instead
    default, fast = dm_control.load(domain, task), dm_control.load(domain, task, solver="fast")
    own = suite_model(domain).opt
    assert fast.fast_solver, f"{domain} names no fast budget"
    for field, value in fast.fast_solver.items():
        assert getattr(fast.sys.opt, field) == value, (domain, field)
        assert getattr(default.sys.opt, field) == getattr(own, field), (domain, field)
    assert fast.sys.opt.tolerance == default.sys.opt.tolerance  # only the budget's fields change
    with pytest.raises(ValueError, match=r"solver 'turbo' not in \('default', 'fast'\)"):
        dm_control.load(domain, task, solver="turbo")


@pytest.mark.parametrize(("domain", "task"), [("cartpole", "swingup"), ("point_mass", "hard")])
def test_reset_starts_the_physics_at_the_draws(domain: str, task: str) -> None:
    # the initial-state tests compare `initial_state`'s draws with dm_control's; reset must start there
    # (cartpole: SuiteEnv's own physics init; point_mass-hard: a domain's, on the episode's System)
    env = dm_control.load(domain, task)
    keys = jax.random.split(jax.random.key(3), 2)
    q, qd, info = jax.vmap(env.initial_state)(keys)
    state = jax.jit(jax.vmap(env.reset))(keys)
    # (eager draws against jitted ones: XLA may fuse a draw's scaling, moving it by an ulp)
    np.testing.assert_allclose(state.pipeline_state.q, q, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(state.pipeline_state.qd, qd, rtol=1e-6, atol=1e-7)
    for k, v in info.items():
        np.testing.assert_allclose(state.info["task"][k], v, rtol=1e-6, atol=1e-7, err_msg=k)
