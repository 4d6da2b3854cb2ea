"""Which installed distribution a file belongs to, from the dist-infos' RECORD files (the ABI check
names it, with the build record its wheel carried)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl_setup.util.wheelhouse import read_build_record


def metadata_version(info: Path) -> str | None:
    """The Version: field of a dist-info's METADATA, or None."""
    with contextlib.suppress(OSError), (info / "METADATA").open(errors="replace") as handle:
        for line in handle:
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
            if not line.strip():
                break
    return None


@dataclass(frozen=True, kw_only=True)
class Owner:
    """An installed distribution, with the build record its wheel carried (or {})."""

    name: str
    version: str
    record: dict[str, Any]


class Owners:
    """Which installed distribution a file belongs to (from the dist-infos' RECORD), read lazily."""

    def __init__(self, folders: Sequence[Path]) -> None:
        self._folders = folders
        self._map: dict[Path, Owner] | None = None

    def of(self, path: Path) -> Owner | None:
        """The distribution whose RECORD lists `path`, or None."""
        if self._map is None:
            self._map = {}
            for folder in self._folders:
                for info in sorted(folder.glob("*.dist-info")):
                    self._read(folder, info)
        return self._map.get(path.resolve())

    def _read(self, folder: Path, info: Path) -> None:
        if self._map is None:
            return
        name, _, version = info.name[: -len(".dist-info")].partition("-")
        owner = Owner(name=name, version=metadata_version(info) or version, record=read_build_record(info))
        with contextlib.suppress(OSError), (info / "RECORD").open(errors="replace") as handle:
            for line in handle:
                relative = line.split(",", 1)[0]
                if ".so" in relative:
                    self._map[(folder / relative).resolve()] = owner
