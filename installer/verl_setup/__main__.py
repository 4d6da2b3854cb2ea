"""`python -m verl_setup` runs the CLI."""

from verl_setup.cli import main

raise SystemExit(main())
