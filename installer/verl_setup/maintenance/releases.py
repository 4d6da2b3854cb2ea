"""Which releases are new: stable, unyanked, uploaded after a date, newer than the matrix's."""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

from verl_setup.environment.index import Index
from verl_setup.matrix.load import Matrix


def stable(version: str) -> Version | None:
    """The version, or None for a pre-release, a dev release or a string that is no version."""
    try:
        v = Version(version)
    except InvalidVersion:
        return None
    return None if v.is_prerelease or v.is_devrelease else v


def new_releases(index: Index, name: str, since: str, newer_than: Version | None) -> list[str]:
    """Stable, unyanked releases first uploaded after `since` and newer than `newer_than`, oldest first."""
    out = []
    for version, release in index.releases(name).items():
        v = stable(version)
        if v is None or release.yanked is not None or (release.uploaded or "") <= since:
            continue
        if newer_than is None or v > newer_than:
            out.append(v)
    return [str(v) for v in sorted(out)]


def default_since(matrix: Matrix, index: Index) -> str:
    """The newest upload date among the verl, engine and torch releases the matrix pins."""
    dates = []
    for row in matrix.rows:
        pins = [("verl", row.verl.version), ("torch", row.torch.version)]
        if row.engine.version:
            pins.append((row.engine.name, row.engine.version))
        for name, version in pins:
            release = index.releases(name).get(version)
            if release is not None and release.uploaded:
                dates.append(release.uploaded)
    return max(dates) if dates else "1970-01-01"
