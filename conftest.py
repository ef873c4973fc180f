"""Strict JAX settings shared by every test in the repository."""

import os

# Two host devices let tests exercise sharding on a CPU-only machine; must be set before jax loads.
if "--xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
    ).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402

# Catch silent float64/int promotion and accidental broadcasting of mismatched ranks in our code.
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")
# Full float32 matmuls: tests compare against MuJoCo C and must not depend on a backend's default.
jax.config.update("jax_default_matmul_precision", "highest")
