"""What verify says of the user's packages a manifest records (install --with ...): a checkout of
verl whose version left the row's verl line warns; a removed or moved package is already a
finding of the manifest's complete list (exit 5), named here as theirs."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from verl_setup.plan.verl_source import checkout_version


def user_names(record: Mapping[str, Any]) -> dict[str, str]:
    """name -> where the user asked for it, from a manifest's `with`."""
    out = {}
    for item in record.get("with") or ():
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            out[str(canonicalize_name(item["name"]))] = str(item.get("origin") or "your package")
    return out


def user_editables(record: Mapping[str, Any]) -> tuple[str, ...]:
    """The folders of the user's editable checkouts a manifest records."""
    items = [i for i in record.get("with") or () if isinstance(i, dict)]
    return tuple(str(Path(str(i["path"]))) for i in items if i.get("editable") and i.get("path"))


def user_warnings(record: Mapping[str, Any]) -> list[str]:
    """Warnings about the user's editable checkouts as they are now on disk."""
    notes = []
    for item in record.get("with") or ():
        if not isinstance(item, dict) or item.get("name") != "verl" or not item.get("path"):
            continue
        now, row = checkout_version(Path(str(item["path"]))), str(item.get("row_verl") or "")
        if now is None:
            notes.append(
                f"warning: the verl checkout {item['path']} is gone (or has no verl/version/version)"
            )
        elif row and not _same_line(now, row):
            notes.append(
                f"warning: the verl checkout {item['path']} is now {now}, outside the row's verl line "
                f"{row} (installed as {item.get('installed')}): plan again for its line"
            )
    return notes


def _same_line(a: str, b: str) -> bool:
    try:
        return Version(a).release[:2] == Version(b).release[:2]
    except InvalidVersion:
        return False


def user_lines(record: Mapping[str, Any]) -> list[str]:
    """`report`'s lines for the user's packages a manifest records, and the packages kept."""
    lines = []
    for item in record.get("with") or ():
        if isinstance(item, dict):
            where = item.get("url") or item.get("path") or ""
            how = f" from {where}" + (" (editable)" if item.get("editable") else "") if where else ""
            lines.append(
                f"your package {item.get('name')} {item.get('installed')}{how}, asked by {item.get('origin')}"
            )
    lines += [f"kept as installed: {name} (--keep)" for name in record.get("keep") or ()]
    return lines
