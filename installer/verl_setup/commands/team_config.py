"""A team's committed defaults, as pip-tools and uv read theirs: `verl-setup.toml`, else
`[tool.verl-setup]` in `pyproject.toml`, in the working folder or the nearest one above it.
They sit below the VERL_SETUP_* variables (flag > environment > config > host file > detection);
`--no-config` ignores them."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verl_setup.errors import BadInputError
from verl_setup.util.bounded import BoundError, one_line, read_capped
from verl_setup.util.vocab import suggest

KEYS = ("row", "python", "verl", "engine", "backend", "policy", "matrix", "prefix")
# The user's packages (plan/user_packages.py): lists of strings, their paths relative to the file.
LIST_KEYS = ("with", "with_requirements", "with_editable")
PATHS = ("matrix", "prefix")  # relative to the file's folder
MAX_CONFIG = 1 << 20


@dataclass(frozen=True, kw_only=True)
class TeamConfig:
    """The values one config file gives, and the file (its facts' source)."""

    path: Path
    values: dict[str, str]
    lists: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def source(self) -> str:
        """How a fact taken from it names its origin."""
        return f"config {self.path}"


def find_team_config(start: Path) -> TeamConfig | None:
    """The nearest config at or above `start`; None when there is none."""
    for folder in (start, *start.parents):
        own = folder / "verl-setup.toml"
        if own.is_file():
            return _read(own, table=None)
        project = folder / "pyproject.toml"
        if project.is_file():
            found = _read(project, table=("tool", "verl-setup"))
            if found is not None:
                return found
    return None


def _read(path: Path, *, table: tuple[str, ...] | None) -> TeamConfig | None:
    shown = repr(one_line(str(path)))
    try:
        raw = read_capped(path, MAX_CONFIG, "config file")
    except BoundError as exc:
        raise BadInputError(str(exc)) from exc
    if table is not None and b"tool.verl-setup" not in raw and b'tool."verl-setup"' not in raw:
        return None  # most pyproject.toml files: no TOML parser started (start-up time)
    data: Any = _toml(raw, shown)
    for key in table or ():
        data = data.get(key) if isinstance(data, dict) else None
    if data is None:
        return None  # a pyproject.toml without [tool.verl-setup]
    where = f"{shown} [{'.'.join(table)}]" if table else shown
    if not isinstance(data, dict):
        raise BadInputError(f"config file {where}: expected a table")
    lists = {k: _string_list(where, k, v) for k, v in data.items() if k in LIST_KEYS}
    values = {}
    for key, value in data.items():
        if key in LIST_KEYS:
            continue
        if key not in KEYS:
            known = (*KEYS, *LIST_KEYS)
            hint = suggest(key, known)
            raise BadInputError(
                f"config file {where}: unknown key {one_line(key)!r}{hint}; known: {', '.join(known)}"
            )
        if not isinstance(value, str) or not value.strip():
            raise BadInputError(f"config file {where}: {key} must be a non-empty string")
        values[key] = str(path.parent / value) if key in PATHS else value
    return TeamConfig(path=path, values=values, lists=lists)


def _toml(raw: bytes, shown: str) -> Any:
    """The file's TOML; BadInputError in one line for what cannot be read."""
    if sys.version_info >= (3, 11):
        import tomllib  # noqa: PLC0415
    else:  # Python 3.10 reads TOML with tomli (a dependency there)
        import tomli as tomllib  # noqa: PLC0415
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise BadInputError(f"config file {shown} is not TOML we can read: {one_line(str(exc))}") from exc
    except RecursionError:  # T1: tomllib recurses per level of nested arrays and inline tables
        raise BadInputError(f"config file {shown} nests its arrays or tables too deep to read") from None


def _string_list(where: str, key: str, value: object) -> tuple[str, ...]:
    """A `with*` key's value: a list of non-empty strings."""
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise BadInputError(f"config file {where}: {key} must be a list of non-empty strings")
    return tuple(value)
