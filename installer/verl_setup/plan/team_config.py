"""Config files, as uv reads its own, at three levels; a key at a higher level wins:

1. the project's: `verl-setup.toml`, else `[tool.verl-setup]` in `pyproject.toml`, in the working
   folder or the nearest one above it (every key);
2. the user's: `$XDG_CONFIG_HOME/verl-setup/config.toml` (else `~/.config/verl-setup/config.toml`);
3. the site's: `/etc/verl-setup/config.toml`.

The user's and the site's hold what an admin or a user sets once for every project: prefix,
ca_bundle, index_url and wheel_sources.
All of them sit below the flags and the VERL_SETUP_* variables (flag > environment > project >
user > site > host file > detection), and each value names its file as its source. `--no-config`
ignores every level."""

from __future__ import annotations

import sys
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verl_setup.errors import BadInputError
from verl_setup.util.bounded import BoundError, one_line, read_capped
from verl_setup.util.vocab import suggest

KEYS = ("row", "python", "verl", "engine", "backend", "policy", "matrix", "prefix", "ca_bundle", "index_url")
# The user's packages (plan/user_packages.py): lists of strings, their paths relative to the file;
# wheel_sources: as --wheel-source, tried after the flags' and before VERL_SETUP_WHEEL_SOURCES's.
LIST_KEYS = ("with", "with_requirements", "with_editable", "wheel_sources")
PATHS = ("matrix", "prefix", "ca_bundle")  # relative to the file's folder
# What the user's and the site's files may set: where things are, not which stack a project uses.
USER_KEYS = ("prefix", "ca_bundle", "index_url", "wheel_sources")
SITE_CONFIG = Path("/etc/verl-setup/config.toml")
# The keys no plan flag stands for (the docs' table takes the others' help from the parser).
KEY_HELP = {
    "ca_bundle": "a CA bundle (PEM) for uv and the tool's own downloads: SSL_CERT_FILE and "
    "REQUESTS_CA_BUNDLE, where the environment sets neither",
    "index_url": "the default package index (a mirror): UV_DEFAULT_INDEX, where the environment "
    "does not set it; user:password@ in it is masked where plan prints it",
}
MAX_CONFIG = 1 << 20


@dataclass(frozen=True, kw_only=True)
class TeamConfig:
    """The values one config file gives, and the file (its facts' source)."""

    path: Path
    values: dict[str, str]
    lists: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # key -> the file that set it, where the levels were merged (else every key is `path`'s)
    sources: dict[str, Path] = field(default_factory=dict)

    @property
    def source(self) -> str:
        """How a fact taken from it names its origin."""
        return f"config {self.path}"

    def source_of(self, key: str) -> str:
        return f"config {self.sources.get(key, self.path)}"

    def explain_lines(self) -> list[str]:
        """`plan --explain`'s lines for the settings that are no fact of the target, each with its file."""
        shown = [(k, self.values[k]) for k in USER_KEYS if k in self.values]
        shown += [(k, ", ".join(self.lists[k])) for k in USER_KEYS if k in self.lists]
        from verl_setup.util.secrets import mask  # noqa: PLC0415  # an index URL's user:password@

        return [
            f"config     {key} = {mask(one_line(value))}  <- {self.source_of(key)}" for key, value in shown
        ]

    def export(self, env: MutableMapping[str, str]) -> None:
        """ca_bundle and index_url as the variables uv and the tool's own downloads read, where the
        environment does not set them already (environment > config)."""
        if self.values.get("ca_bundle"):
            env.setdefault("SSL_CERT_FILE", self.values["ca_bundle"])
            env.setdefault("REQUESTS_CA_BUNDLE", self.values["ca_bundle"])
        if self.values.get("index_url"):
            env.setdefault("UV_DEFAULT_INDEX", self.values["index_url"])


def user_config_path(env: Mapping[str, str]) -> Path:
    """$XDG_CONFIG_HOME/verl-setup/config.toml, else ~/.config/verl-setup/config.toml."""
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(base) / "verl-setup" / "config.toml"


def find_config(start: Path, env: Mapping[str, str]) -> TeamConfig | None:
    """The three levels merged, key by key (project > user > site); None when there is no file."""
    levels = [
        _read(path, table=None, allowed=USER_KEYS)
        for path in (SITE_CONFIG, user_config_path(env))
        if path.is_file()
    ]
    levels.append(find_team_config(start))
    found = [level for level in levels if level is not None]
    if not found:
        return None
    values: dict[str, str] = {}
    lists: dict[str, tuple[str, ...]] = {}
    sources: dict[str, Path] = {}
    for level in found:  # lowest first: a higher level overwrites
        values.update(level.values)
        lists.update(level.lists)
        sources.update(dict.fromkeys([*level.values, *level.lists], level.path))
    return TeamConfig(path=found[-1].path, values=values, lists=lists, sources=sources)


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


def _read(
    path: Path, *, table: tuple[str, ...] | None, allowed: tuple[str, ...] = (*KEYS, *LIST_KEYS)
) -> TeamConfig | None:
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
    lists = {k: _string_list(where, k, v) for k, v in data.items() if k in LIST_KEYS and k in allowed}
    lists.update({k: tuple(_beside(path, s) for s in v) for k, v in lists.items() if k == "wheel_sources"})
    values = {}
    for key, value in data.items():
        if key in lists:
            continue
        if key not in allowed:
            known = allowed
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


def _beside(path: Path, value: str) -> str:
    """A wheel source as written, a relative folder made relative to the config file's folder."""
    if "://" in value or Path(value).expanduser().is_absolute():
        return value
    return str(path.parent / value)


def _string_list(where: str, key: str, value: object) -> tuple[str, ...]:
    """A `with*` key's value: a list of non-empty strings."""
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise BadInputError(f"config file {where}: {key} must be a list of non-empty strings")
    return tuple(value)
