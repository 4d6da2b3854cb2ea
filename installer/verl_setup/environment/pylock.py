"""PEP 751 `pylock.toml`: the lock a team commits for tools other than verl-setup.

The packages are uv's own `uv pip compile --format pylock.toml` output (every file a URL with its
hash, so a row on an extra index needs no index at install time, and `requires-python` is
enforced); the lock's facts go into `[tool.verl-setup]`, the table PEP 751 leaves to tools, sealed
as the requirements lock is: its last line is the sha256 of every line above it. What the recipe
installs after the locked wheels (a package built against torch, the `--no-deps` packages) is
named there as `then`, since a pylock has no order.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from verl_setup.errors import BadInputError, InstallError

FORMAT = 1  # of the [tool.verl-setup] table
TABLE = "[tool.verl-setup]"
_NAME = re.compile(r"^pylock(\.[^.]+)?\.toml$")  # PEP 751: pylock.toml or pylock.<name>.toml
_SEAL = re.compile(r'^sha256 = "([0-9a-f]{64})"$')


def is_pylock_name(name: str) -> bool:
    """Whether a file name is one PEP 751 allows (uv and pip tell the format by the name)."""
    return _NAME.match(name) is not None


def pylock_name(row_id: str) -> str:
    """A PEP 751 file name for a row: no dots in <name> (row ids have them: `verl0.9-...`)."""
    return f"pylock.{re.sub(r'[^A-Za-z0-9_-]', '-', row_id)}.toml"


def check_name(path: Path, row_id: str) -> None:
    """BadInputError unless the file name is one uv, pip and PEP 751 read as a pylock."""
    if not is_pylock_name(path.name):
        raise BadInputError(
            f"--format pylock: {path.name} is not a PEP 751 name (pylock.toml or pylock.<name>.toml, "
            f"no dots in <name>; uv and pip tell the format by it): try --out {pylock_name(row_id)}"
        )


def _toml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string


def render_pylock(fields: Mapping[str, str], body: str) -> str:
    """uv's pylock text, then [tool.verl-setup] with the lock's fields, sealed by its last line."""
    table = [
        TABLE,
        f"format = {FORMAT}",
        *(f"{key} = {_toml_string(value)}" for key, value in fields.items()),
    ]
    from verl_setup.environment.lock_howto import pylock_head, with_python_bound  # noqa: PLC0415

    body = pylock_head(fields) + with_python_bound(body, fields["python"])
    text = body.rstrip("\n") + "\n\n" + "\n".join(table) + "\n"
    return f'{text}sha256 = "{hashlib.sha256(text.encode()).hexdigest()}"\n'


def read_pylock(
    text: str, path: Path, required: Sequence[str]
) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """The [tool.verl-setup] fields (`required` among them) and the packages of a pylock `lock
    --format pylock` wrote; BadInputError if it is not one (another tool's pylock names no row),
    InstallError if altered."""
    lines = text.splitlines(keepends=True)
    seal = _SEAL.match(lines[-1].rstrip("\n")) if lines else None
    if seal is None or TABLE + "\n" not in lines:
        raise BadInputError(
            f"{path}: not a pylock that verl-setup wrote (no sealed {TABLE} table; make one with "
            "`verl-setup lock --format pylock --out pylock.<name>.toml`)"
        )
    if hashlib.sha256("".join(lines[:-1]).encode()).hexdigest() != seal[1]:
        raise InstallError(
            f"{path} was changed after `verl-setup lock` wrote it (it no longer matches the sha256 of "
            f"its {TABLE} table); regenerate it rather than editing it"
        )
    data = _load(text, path)
    table = data.get("tool", {}).get("verl-setup", {})
    if table.get("format") != FORMAT:
        raise BadInputError(f"{path}: {TABLE} format {table.get('format')!r}; this verl-setup reads {FORMAT}")
    fields = {key: str(value) for key, value in table.items() if key != "format"}
    missing = [k for k in required if k not in fields]
    if missing:
        raise BadInputError(f"{path}: {TABLE} lacks {', '.join(missing)}")
    packages = [p for p in data.get("packages", []) if isinstance(p, dict)]
    if not packages:
        raise BadInputError(f"{path}: the lock pins no distributions")
    return fields, packages


def _load(text: str, path: Path) -> dict[str, Any]:
    import sys  # noqa: PLC0415

    if sys.version_info >= (3, 11):
        import tomllib  # noqa: PLC0415
    else:  # Python 3.10 reads TOML with tomli (a dependency there)
        import tomli as tomllib  # noqa: PLC0415
    try:
        return dict(tomllib.loads(text))
    except tomllib.TOMLDecodeError as exc:
        raise BadInputError(f"{path}: not TOML: {exc}") from exc
