"""`python -m brax_train.cli ...` runs the `brax-train` command line."""

from brax_train.cli import main

raise SystemExit(main())
