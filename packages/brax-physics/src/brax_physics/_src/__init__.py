"""Implementation modules of brax_physics (private; import from `brax_physics`)."""
