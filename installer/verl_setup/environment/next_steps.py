"""What to type after `verl-setup install`: activate, add a package, run verl, check the launch.

The env uv makes has no pip: after `source ENV/bin/activate`, `pip` is the next one on PATH (pyenv's,
the system's) and installs into another Python without a word, so the lines say how to add one.
"""

from __future__ import annotations

import shlex
from pathlib import Path

# verl's own first run (GSM8K PPO, one GPU with >= 24 GB); its docs, not a package index.
VERL_QUICKSTART = "https://verl.readthedocs.io/en/latest/start/quickstart.html"


def after_install(prefix: Path) -> list[str]:
    """The next-step lines for an env installed at `prefix`."""
    env = shlex.quote(str(prefix))
    python = shlex.quote(str(prefix / "bin" / "python"))
    return [
        "next:",
        f"  activate      source {env}/bin/activate",
        f"  add a package verl-setup install --prefix {env} --with PKG   (kept by later installs), "
        f"or: uv pip install --python {python} PKG",
        "                (this env has no pip: after activating, `pip` is another Python's)",
        f"  run verl      verl's quick start (GSM8K PPO, one GPU with 24 GB): {VERL_QUICKSTART}",
        "  check         verl-setup doctor   (with the env active; append `-- LAUNCH COMMAND` to lint "
        "a launch)",
    ]
