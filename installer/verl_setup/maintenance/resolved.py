"""What each row resolved to when last proven (matrices/resolved.yaml): the baseline of `matrix check`.

Written by `matrix prove` (its `resolves` step) and `matrix check --record`, never by hand. Per
row: the row hash it was resolved for, the Python and platform, and every distribution as
"VERSION FILES" where FILES is a short digest of the sha256 of every file uv saw for that version
(so a re-upload under the same version shows). No dates or tool versions: the same resolution
gives the same bytes, so the file changes only when a resolution does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from verl_setup.errors import BadInputError

RESOLVED_FILE = "resolved.yaml"


@dataclass(frozen=True, kw_only=True)
class Resolution:
    """One row's resolution: distribution name -> (version, digest of its files)."""

    row_sha256: str
    python: str
    platform: str
    pins: dict[str, tuple[str, str]]


def resolved_path(rows_path: Path) -> Path:
    """resolved.yaml beside a rows file."""
    return rows_path.parent / RESOLVED_FILE


def load_resolved(rows_path: Path) -> dict[str, Resolution]:
    """Every row's recorded resolution (none recorded: empty); a broken file is exit 2."""
    path = resolved_path(rows_path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInputError(f"cannot read {path}: {exc}") from exc
    try:
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}  # noqa: S506  # a safe loader
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
            )
    except (yaml.YAMLError, AttributeError, KeyError, TypeError, ValueError) as exc:
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
                "pins": {name: f"{v} {d}" for name, (v, d) in sorted(r.pins.items())},
            }
            for row_id, r in sorted(rows.items())
        },
    }
    header = "# Written by `verl-setup matrix prove` and `matrix check --record`; do not edit by hand.\n"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(header + yaml.safe_dump(data, sort_keys=False, width=200), encoding="utf-8")
    tmp.replace(path)
    return path
