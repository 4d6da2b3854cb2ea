"""Every program that runs in another interpreter, as a real file, named by path in one table.

Each is run by path (`python FILE ARGS`), or its text is shipped where no path can reach (a
container, a rendered file). They run in interpreters that may lack this package (a user's venv,
possibly Python 3.10): standard library at the top level, optional imports guarded where used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

HERE = Path(__file__).resolve().parent

Script = Literal["import_probe", "hydra_compose", "interpreter"]
# name -> file in this folder (as cibuildwheel's util/resources.py names its resources)
SCRIPTS: dict[Script, str] = {
    "import_probe": "import_probe.py",
    "hydra_compose": "hydra_compose.py",
    "interpreter": "interpreter.py",
}


def script_path(name: Script) -> Path:
    """The file to run, by path."""
    return HERE / SCRIPTS[name]


def script_text(name: Script) -> str:
    """The program's text, for a rendered file or a `-c` where no path reaches (a container)."""
    return script_path(name).read_text(encoding="utf-8")
