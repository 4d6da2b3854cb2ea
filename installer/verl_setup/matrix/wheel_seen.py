"""What `matrix check` last saw in each wheel source (matrices/wheel-sources-seen.yaml).

A wheel source's `serves` says what it held when the matrix was written; this record says what it
held when it was last looked at: per source the date of that look, and per wheel the matrix
promises (world, package, version, Python, arch) whether it was there, its file and sha256, and
the last date it was seen. `plan` reads it (no network) to say when a source was last checked and
to count a wheel found missing as not served; `install` looks again anyway. Written only by
`matrix check --record`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from verl_setup.errors import BadInputError
from verl_setup.util.versions import minor_of

SEEN_FILE = "wheel-sources-seen.yaml"


@dataclass(frozen=True, kw_only=True)
class SeenWheel:
    """One promised wheel at the last look: there (with its file) or missing."""

    status: str  # present | missing
    file: str | None = None
    sha256: str | None = None
    last_seen: str | None = None  # the last date it was present (None: never)


@dataclass(frozen=True, kw_only=True)
class SeenSource:
    """One source: the date of the last look and each promised wheel's state then."""

    checked: str
    wheels: dict[str, SeenWheel] = field(default_factory=dict)


def wheel_key(world: str, package: str, version: str, python: str, arch: str) -> str:
    """ "cu130/torch2.11 flash-attn 2.8.3 cp312 x86_64"."""
    return f"{world} {package} {version} cp{minor_of(python).replace('.', '')} {arch}"


def world_of(cuda: str | None, torch_minor: str) -> str:
    """ "cu130/torch2.11": a world of an index source that keeps one index per CUDA and torch."""
    return f"cu{minor_of(cuda or '').replace('.', '')}/torch{torch_minor}"


def seen_path(rows_path: Path) -> Path:
    """The record beside a rows file."""
    return rows_path.parent / SEEN_FILE


def load_seen(rows_path: Path) -> dict[str, SeenSource]:
    """source id -> what was seen (nothing recorded: empty); a broken file is exit 2."""
    path = seen_path(rows_path)
    if not path.is_file():
        return {}
    from verl_setup.util.yamlread import YamlError, read_yaml  # noqa: PLC0415  # only when there is a record

    try:
        data = read_yaml(path)[0] or {}
        out = {}
        for source, entry in (data.get("sources") or {}).items():
            wheels = {
                str(key): SeenWheel(
                    status=str(w["status"]),
                    file=None if w.get("file") is None else str(w["file"]),
                    sha256=None if w.get("sha256") is None else str(w["sha256"]),
                    last_seen=None if w.get("last_seen") is None else str(w["last_seen"]),
                )
                for key, w in (entry.get("wheels") or {}).items()
            }
            out[str(source)] = SeenSource(checked=str(entry["checked"]), wheels=wheels)
    except (YamlError, AttributeError, KeyError, TypeError) as exc:
        raise BadInputError(
            f"{path}: not a wheel-source record ({exc}); rewrite it with `matrix check --record`"
        ) from exc
    return out


def record_seen(rows_path: Path, updates: dict[str, SeenSource]) -> Path:
    """Merge what was seen of some sources into the record (atomically, sorted)."""
    from verl_setup.util.yamlread import dump_yaml  # noqa: PLC0415

    path = seen_path(rows_path)
    sources = {**load_seen(rows_path), **updates}
    data = {
        "schema": 1,
        "sources": {
            sid: {
                "checked": s.checked,
                "wheels": {
                    key: {k: v for k, v in vars(w).items() if v is not None}
                    for key, w in sorted(s.wheels.items())
                },
            }
            for sid, s in sorted(sources.items())
        },
    }
    header = "# Written by `verl-setup matrix check --record`; do not edit by hand.\n"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(header + dump_yaml(data, width=200), encoding="utf-8")
    tmp.replace(path)
    return path
