"""Where an extension's source comes from: `--source NAME=PATH|URL` (an sdist or a source tree),
else its sdist on the index uv is configured with (PEP 691, never a registry named here)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

from verl_setup.errors import BadInputError, InstallError
from verl_setup.matrix.schema import ExtensionFacts
from verl_setup.util.wheelhouse import SourceRef, sha256_of

DOWNLOAD_TIMEOUT_S = 600


@dataclass(frozen=True, kw_only=True)
class Source:
    """A local sdist or source folder to build, and what the manifest records of it."""

    path: Path
    ref: SourceRef


def parse_sources(values: list[str]) -> dict[str, str]:
    """`--source NAME=PATH|URL` flags as a mapping; a malformed one is exit 2."""
    out = {}
    for value in values:
        name, sep, where = value.partition("=")
        if not sep or not name.strip() or not where.strip():
            raise BadInputError(f"--source {value!r}: expected NAME=PATH or NAME=URL")
        out[name.strip()] = where.strip()
    return out


def fetch_source(
    name: str, version: str, facts: ExtensionFacts, *, given: str | None, work: Path, env: Mapping[str, str]
) -> Source:
    """The source to build `name` `version` from, downloaded into `work` when it is remote."""
    if given is not None:
        return _given(name, version, given, work)
    if facts.build:  # a git URL (apex): the index has nothing under that name
        raise BadInputError(
            f"{name} builds from {facts.build.split('@', 1)[-1].strip()}, which is not on the package "
            f"index: fetch it and pass --source {name}=PATH (a source folder or an sdist)"
        )
    from verl_setup.environment.index import Index, configured_index  # noqa: PLC0415
    from verl_setup.util.uvbin import find_uv  # noqa: PLC0415

    index = Index(configured_index(find_uv(), env))
    release = index.releases(name).get(version)
    sdists = [f for f in release.files if not f.is_wheel] if release else []
    if not sdists:
        raise InstallError(f"{name} {version}: the index has no source distribution to build from")
    dist = sdists[0]
    target = work / dist.filename
    _download(dist.url, target)
    digest = sha256_of(target)
    if dist.sha256 and digest != dist.sha256:
        raise InstallError(f"{dist.filename}: sha256 {digest} is not the index's {dist.sha256}")
    return Source(path=target, ref=SourceRef(name=name, version=version, sha256=digest, url=dist.url))


def _given(name: str, version: str, given: str, work: Path) -> Source:
    parts = urlsplit(given)
    if parts.scheme in ("http", "https"):
        target = work / (Path(parts.path).name or f"{name}-{version}.tar.gz")
        _download(given, target)
        return Source(
            path=target, ref=SourceRef(name=name, version=version, sha256=sha256_of(target), url=given)
        )
    path = Path(url2pathname(parts.path)) if parts.scheme == "file" else Path(given).expanduser()
    if not path.exists():
        raise BadInputError(f"--source {name}={given}: no such file or folder")
    digest = sha256_of(path) if path.is_file() else tree_digest(path)
    return Source(
        path=path.resolve(),
        ref=SourceRef(name=name, version=version, sha256=digest, url=path.resolve().as_uri()),
    )


def _download(url: str, target: Path) -> None:
    from verl_setup.util import web  # noqa: PLC0415  # the one HTTP client: CAs, netrc, URL credentials

    partial = target.with_name(target.name + ".partial")
    try:
        with web.get(url, deadline_s=DOWNLOAD_TIMEOUT_S * 10) as answer, partial.open("wb") as handle:
            for block in answer.blocks:
                handle.write(block)
    except web.WebError as exc:
        raise InstallError(f"cannot download {exc}") from exc
    partial.replace(target)


def tree_digest(folder: Path) -> str:
    """A stable sha256 of a source folder's files (names and contents), for the manifest."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and ".git" not in p.parts):
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + sha256_of(path).encode())
    return digest.hexdigest()
