"""What each row resolved to when last proven (matrices/resolved.yaml): the row's closure, which
install, lock, render and bundle hold every transitive package to, and the baseline of `matrix check`.

Written by `matrix prove` (its `resolves` step) and `matrix check --record`, never by hand. Per
row: the row hash it was resolved for, the date it was recorded, the Python and platform, the newest
upload date among its pins (the index "as of" which it resolved), the glibc
floor computed from the manylinux tags of its wheels (maintenance/floors.py) with the distributions
that set it, and every distribution as "VERSION FILES" where FILES is a short digest of the sha256
of every file uv saw for that version (so a re-upload under the same version shows). Other targets
the row supports (another Python minor, another arch) are stored as what differs from that base
(`targets`: name -> version, or null where the distribution is not part of that target's set); an
empty entry says the base set holds there unchanged. The date moves only when the pins do, so the
file changes only when a resolution does.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from verl_setup.errors import BadInputError
from verl_setup.matrix.schema import Row
from verl_setup.util.versions import minor_of, parse_minor

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
    recorded: str | None = None  # the date of the resolution (YYYY-MM-DD); None: not recorded
    # The newest upload date among its pins: the index "as of" which it resolved (--exclude-newer).
    as_of: str | None = None
    # "PYTHON_MINOR ARCH" -> what differs from the base pins there (None: not in that set).
    targets: dict[str, dict[str, str | None]] = field(default_factory=dict)

    @property
    def base_target(self) -> str:
        """The target the base pins are for, as `targets` names the others ("3.12 x86_64")."""
        return target_key(self.python, self.platform.split("-", 1)[0])

    def pins_for(self, target: str) -> dict[str, str] | None:
        """name -> version of the closure on one target; None where that target was never resolved."""
        base = {name: version for name, (version, _) in self.pins.items()}
        if target == self.base_target:
            return base
        delta = self.targets.get(target)
        if delta is None:
            return None
        for name, version in delta.items():
            if version is None:
                base.pop(name, None)
            else:
                base[name] = version
        return base


def target_key(python: str, arch: str) -> str:
    """How resolved.yaml names a target: the Python minor and the architecture."""
    return f"{minor_of(python)} {arch}"


def delta(base: dict[str, str], other: dict[str, str]) -> dict[str, str | None]:
    """What another target's pins change against the base pins (None: absent there)."""
    changed: dict[str, str | None] = {n: v for n, v in other.items() if base.get(n) != v}
    changed.update({n: None for n in base if n not in other})
    return dict(sorted(changed.items()))


def resolved_path(rows_path: Path) -> Path:
    """resolved.yaml beside a rows file."""
    return rows_path.parent / RESOLVED_FILE


def load_resolved(rows_path: Path) -> dict[str, Resolution]:
    """Every row's recorded resolution (none recorded: empty); a broken file is exit 2."""
    from verl_setup.util.yamlread import YamlError, read_yaml  # noqa: PLC0415  # the matrix cache hits mostly

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
                recorded=None if entry.get("recorded") is None else str(entry["recorded"]),
                as_of=None if entry.get("as_of") is None else str(entry["as_of"]),
                targets={
                    str(key): {str(n): None if v is None else str(v) for n, v in (changes or {}).items()}
                    for key, changes in (entry.get("targets") or {}).items()
                },
            )
    except (YamlError, AttributeError, KeyError, TypeError, ValueError) as exc:
        raise BadInputError(
            f"{path}: not a resolution record ({exc}); rewrite it with `matrix check --record`"
        ) from exc
    return out


def record_resolved(rows_path: Path, updates: dict[str, Resolution]) -> Path:
    """Merge rows' new resolutions into resolved.yaml (atomically, sorted, so it diffs cleanly)."""
    from verl_setup.util.yamlread import dump_yaml  # noqa: PLC0415

    path = resolved_path(rows_path)
    old = load_resolved(rows_path)
    rows = {**old, **{row_id: _dated(r, old.get(row_id)) for row_id, r in updates.items()}}
    data = {
        "schema": 1,
        "rows": {
            row_id: {
                "row_sha256": r.row_sha256,
                **({"recorded": r.recorded} if r.recorded else {}),
                **({"as_of": r.as_of} if r.as_of else {}),
                "python": r.python,
                "platform": r.platform,
                **({"glibc_floor": r.glibc_floor} if r.glibc_floor else {}),
                **({"glibc_floor_set_by": list(r.glibc_floor_set_by)} if r.glibc_floor_set_by else {}),
                "pins": {name: f"{v} {d}" for name, (v, d) in sorted(r.pins.items())},
                **({"targets": dict(sorted(r.targets.items()))} if r.targets else {}),
            }
            for row_id, r in sorted(rows.items())
        },
    }
    header = "# Written by `verl-setup matrix prove` and `matrix check --record`; do not edit by hand.\n"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(header + dump_yaml(data, width=200), encoding="utf-8")
    tmp.replace(path)
    return path


def _dated(new: Resolution, old: Resolution | None) -> Resolution:
    """A new resolution keeps its predecessor's date when nothing it pins moved (and so nothing
    about the closure changed): the date says when this set was first seen, not when it was
    last looked at."""
    if old is None or new.recorded is None:
        return new
    if old.row_sha256 == new.row_sha256 and old.pins == new.pins and old.targets == new.targets:
        return replace(new, recorded=old.recorded or new.recorded, as_of=old.as_of or new.as_of)
    return new


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
