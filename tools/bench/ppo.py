"""`hatch run bench:ppo`'s old entry point: train.py's PPO rows (train.py owns the benchmark)."""

import sys

from train import _patch_google_brax, main  # envs.py imports the patch from here

__all__ = ["_patch_google_brax"]

if __name__ == "__main__":
    sys.argv[1:1] = ["--agents", "ppo"]
    main()
