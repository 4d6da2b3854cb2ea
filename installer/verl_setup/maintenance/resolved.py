"""What each row resolved to when last proven (matrices/resolved.yaml): the baseline of `matrix check`.

Written by `matrix prove` (its `resolves` step) and `matrix check --record`, never by hand. Per
row: the row hash it was resolved for, the Python and platform, the glibc floor computed from the
manylinux tags of its wheels (maintenance/floors.py) with the distributions that set it, and
every distribution as "VERSION FILES" where FILES is a short digest of the sha256 of every file uv
saw for that version (so a re-upload under the same version shows). No dates or tool versions:
the same resolution gives the same bytes, so the file changes only when a resolution does.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from verl_setup.errors import BadInputError
from verl_setup.matrix.schema import Row
from verl_setup.util.versions import parse_minor
from verl_setup.util.yamlread import YamlError, dump_yaml, read_yaml

RESOLVED_FILE = "resolved.yaml"


@dataclass(frozen=True, kw_only=True)
class Resolution:
    """One row's resolution: distribution name -> (version, digest of its files)."""

    row_sha256: str
    python: str
    platform: str
    pins: dict[str, tuple[str, str]]
    glibc_floor: str | None = None  # computed from its wheels' manylinux tags; None: not computed
    glibc_floor_set_by: tuple[str, ...] = ()


def resolved_path(rows_path: Path) -> Path:
    """resolved.yaml beside a rows file."""
    return rows_path.parent / RESOLVED_FILE


def load_resolved(rows_path: Path) -> dict[str, Resolution]:
    """Every row's recorded resolution (none recorded: empty); a broken file is exit 2."""
    path = resolved_path(rows_path)
    if not path.exists() and not path.is_symlink():
        return {}
    try:
        data = read_yaml(path)[0] or {}
        out = {}
        for row_id, entry in (data.get("rows") or {}).items():
            pins = {}
            for name, value in (entry.get("pins") or {}).items():
                version, digest = str(value).split(" ", 1)
                pins[str(name)] = (version, digest)
            out[str(row_id)] = Resolution(
                row_sha256=str(entry["row_sha256"]),
                python=str(entry["python"]),
                platform=str(entry["platform"]),
                pins=pins,
                glibc_floor=None if entry.get("glibc_floor") is None else str(entry["glibc_floor"]),
                glibc_floor_set_by=tuple(str(s) for s in entry.get("glibc_floor_set_by") or ()),
            )
    except (YamlError, AttributeError, KeyError, TypeError, ValueError) as exc:
        raise BadInputError(
            f"{path}: not a resolution record ({exc}); rewrite it with `matrix check --record`"
        ) from exc
    return out


def record_resolved(rows_path: Path, updates: dict[str, Resolution]) -> Path:
    """Merge rows' new resolutions into resolved.yaml (atomically, sorted, so it diffs cleanly)."""
    path = resolved_path(rows_path)
    rows = {**load_resolved(rows_path), **updates}
    data = {
        "schema": 1,
        "rows": {
            row_id: {
                "row_sha256": r.row_sha256,
                "python": r.python,
                "platform": r.platform,
                **({"glibc_floor": r.glibc_floor} if r.glibc_floor else {}),
                **({"glibc_floor_set_by": list(r.glibc_floor_set_by)} if r.glibc_floor_set_by else {}),
                "pins": {name: f"{v} {d}" for name, (v, d) in sorted(r.pins.items())},
            }
            for row_id, r in sorted(rows.items())
        },
    }
    header = "# Written by `verl-setup matrix prove` and `matrix check --record`; do not edit by hand.\n"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(header + dump_yaml(data, width=200), encoding="utf-8")
    tmp.replace(path)
    return path


def floor_problems(rows: Iterable[Row], rows_path: Path) -> list[str]:
    """`matrix validate`'s check of each row's requires.glibc against the floor computed from the
    wheels it last resolved to (recorded by `matrix prove` / `matrix check --record`), as
    "file:line: row: requires.glibc: message". A row edited since keeps its id, so lowering the
    glibc of a proven row is caught even before it is proven again."""
    recorded = load_resolved(rows_path)
    problems = []
    for row in rows:
        found = recorded.get(row.id)
        if found is None or found.glibc_floor is None:
            continue
        if parse_minor(row.requires.glibc, "glibc") < parse_minor(found.glibc_floor, "glibc"):
            problems.append(
                f"{rows_path}:{row.line}: {row.id}: requires.glibc: {row.requires.glibc} is below "
                f"{found.glibc_floor}, the floor of the wheels it resolves to "
                f"({', '.join(found.glibc_floor_set_by)}; {resolved_path(rows_path).name}, {found.platform})"
            )
    return problems
