"""ES and ARS on 1 and 2 forced CPU devices train the same parameters; a population must split evenly."""

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
    from brax_train import ars, es
    assert jax.local_device_count() == 4
    env = brax_envs.get_environment("fast")
    out = {"errors": []}
    for fn, kw in ((es.train, {"population_size": 3}), (ars.train, {"number_of_directions": 3})):
        try:
            fn(env, episode_length=10, num_timesteps=100, **kw)
        except ValueError as e:
            out["errors"].append(str(e))
    def flat(params):
        return [np.asarray(x, np.float64).ravel().tolist() for x in jax.tree.leaves(params)
                if np.issubdtype(np.asarray(x).dtype, np.floating)]
    common = dict(episode_length=20, num_evals=0, normalize_observations=True)
    for n in (1, 2):
        _, p, _ = es.train(env, **common, num_timesteps=3 * 8 * 20, population_size=4, learning_rate=0.05,
                           network_factory={"hidden_layer_sizes": (8,)}, max_devices_per_host=n)
        out[f"es{n}"] = flat(p)
        # every direction in the update: selection ties cannot flip between device counts
        _, p, _ = ars.train(env, **common, num_timesteps=3 * 8 * 20, number_of_directions=4,
                            top_directions=4, step_size=0.1, max_devices_per_host=n)
        out[f"ars{n}"] = flat(p)
    print("RESULT" + json.dumps(out))
""")


def test_one_and_two_devices_match_and_populations_must_divide() -> None:
    out = _testing.run_script(SCRIPT, devices=4)
    es_error, ars_error = out["errors"]
    assert "population_size (3) does not divide across the 4 devices used" in es_error
    assert "number_of_directions (3) does not divide across the 4 devices used" in ars_error
    for agent in ("es", "ars"):
        for a, b in zip(out[f"{agent}1"], out[f"{agent}2"], strict=True):
            np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-4, atol=1e-6)
    assert np.any(np.asarray(out["ars2"][-1]) != 0)  # the linear policy moved from its zero start
