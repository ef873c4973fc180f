"""1, 2 and 4 forced CPU devices train the same parameters (data parallel over `jax.sharding`)."""

from __future__ import annotations

import textwrap

import numpy as np

from brax_train import _testing

SCRIPT = textwrap.dedent("""
    import json
    import jax
    jax.config.update("jax_numpy_dtype_promotion", "strict")
    jax.config.update("jax_numpy_rank_promotion", "raise")
    jax.config.update("jax_default_matmul_precision", "highest")
    import numpy as np
    import brax_envs
    from brax_train import ppo
    assert jax.local_device_count() == 4
    out = {}
    _, init, _ = ppo.train(brax_envs.get_environment("fast"), num_timesteps=0, episode_length=20, num_envs=8,
        network_factory={"policy_hidden_layer_sizes": (8,), "value_hidden_layer_sizes": (8,)})
    out[0] = [np.asarray(x, np.float64).ravel().tolist() for x in jax.tree.leaves(init)
              if np.issubdtype(np.asarray(x).dtype, np.floating)]
    for n in (1, 2, 4):
        _, params, _ = ppo.train(
            brax_envs.get_environment("fast"), num_timesteps=3 * 8 * 5 * 2, episode_length=20, num_envs=8,
            batch_size=8, num_minibatches=2, unroll_length=5, num_updates_per_batch=2, learning_rate=1e-3,
            normalize_observations=True, num_evals=0, max_devices_per_host=n,
            network_factory={"policy_hidden_layer_sizes": (8,), "value_hidden_layer_sizes": (8,)})
        out[n] = [np.asarray(x, np.float64).ravel().tolist() for x in jax.tree.leaves(params)
                  if np.issubdtype(np.asarray(x).dtype, np.floating)]
    print("RESULT" + json.dumps(out))
""")


def test_one_two_four_devices_match() -> None:
    out = {int(k): v for k, v in _testing.run_script(SCRIPT, devices=4).items()}
    for n in (2, 4):
        for a, b in zip(out[1], out[n], strict=True):
            np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-4, atol=1e-6)
    # training moved the parameters away from their initialization
    assert any(not np.allclose(a, b) for a, b in zip(out[0], out[1], strict=True))
