"""How a teammate without verl-setup uses a lock, at the top of it: which Python to create the
environment with, and the install line; and the pylock's `requires-python`, which says the same.

A lock is resolved for one Python minor (its markers evaluated there), and `install` takes any patch
of that minor when the exact one is missing (a warning). uv writes the pylock's bound as
`>=3.12.3`, which refuses the 3.12.1 install takes and admits 3.13, which the row does not support:
the bound becomes that minor, `>=3.12,<3.13`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from verl_setup.util.versions import minor_of

_REQUIRES_PYTHON = re.compile(r'^requires-python = "[^"]*"$', re.MULTILINE)


def create_env(python: str) -> str:
    """The header's `create-env` line: the Python to make the environment with."""
    minor = minor_of(python)
    return f"uv venv --python {python} ENV (any {minor}.x works; or: python{minor} -m venv ENV)"


def requires_python(python: str) -> str:
    """The pylock's bound: the lock's Python minor, every patch of it."""
    major, minor = (int(p) for p in minor_of(python).split("."))
    return f">={major}.{minor},<{major}.{minor + 1}"


def with_python_bound(body: str, python: str) -> str:
    """uv's pylock text with `requires-python` set to the lock's minor (added when uv wrote none)."""
    line = f'requires-python = "{requires_python(python)}"'
    if _REQUIRES_PYTHON.search(body):
        return _REQUIRES_PYTHON.sub(line, body, count=1)
    return f"{line}\n{body}"


def pylock_head(fields: Mapping[str, str], file_name: str = "THIS_FILE") -> str:
    """TOML comments at the top of a pylock: what it is, the Python, and the install lines."""
    python = fields["python"]
    then = fields.get("then")
    lines = [
        f"# verl-setup lock (PEP 751) of row {fields['row']} for Python {minor_of(python)} on "
        f"{fields['platform']}; its facts and seal are in [tool.verl-setup] at the end.",
        f"# create-env: {create_env(python)}",
        f"# install-uv: uv pip sync --python ENV/bin/python {file_name}",
        *([f"# then: {then}"] if then else []),
    ]
    return "\n".join(lines) + "\n"
