"""The package index's Simple API (PEP 691 JSON), only for what uv has no query for.

uv answers "what does this resolve to"; it cannot list a project's releases with their upload
dates, say whether an old release was yanked or deleted, or hand over a release's core metadata
without resolving it. For those we read the JSON Simple API of the very index uv is configured
with (uv tells us which, so mirrors and credentials in the user's uv or pip setup apply).
"""

from __future__ import annotations

import email.parser
import functools
import io
import os
import re
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from email.message import Message
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from verl_setup.errors import InstallError

ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.latest+json;q=0.9"
TIMEOUT_S = 60.0
_INDEX_LINE = re.compile(r"^--index-url\s+(\S+)", re.MULTILINE)


def configured_index(uv: str, env: Mapping[str, str]) -> str:
    """The default index uv resolves against here (its config, UV_DEFAULT_INDEX, UV_INDEX_URL, ...).

    Asked of uv itself (`--emit-index-url` on an empty resolution): no guess of ours can match
    uv's own precedence of config files and variables, and no registry is named in our code."""
    from verl_setup.util.runner import ProgramError, run  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="verl-setup-index-") as tmp:
        empty = Path(tmp) / "empty.in"
        empty.write_text("", encoding="utf-8")
        argv = [uv, "pip", "compile", str(empty), "--emit-index-url", "--no-header", "--quiet"]
        try:
            out = run([*argv, "--python-version", "3.12", "--no-python-downloads"], timeout=60, env=env)
        except ProgramError as exc:
            raise InstallError(f"cannot ask uv for its index: {exc}") from exc
    found = _INDEX_LINE.search(out.stdout)
    if out.returncode != 0 or found is None:
        raise InstallError(f"uv did not name its index: {(out.stderr or out.stdout).strip()[:200]}")
    return found[1]


def masked(url: str) -> str:
    """A URL fit for messages: credentials in it are replaced by ***."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]))


@dataclass(frozen=True, kw_only=True)
class DistFile:
    """One file of a release as the index lists it."""

    filename: str
    url: str
    sha256: str | None
    upload_time: str | None  # ISO 8601 (PEP 700), None when the index does not say
    yanked: str | None  # the reason ("" when none was given), None when not yanked
    requires_python: str | None
    has_metadata: bool  # PEP 658/714: the core metadata is served beside the file

    @property
    def is_wheel(self) -> bool:
        """A wheel (its tags say which Pythons and platforms it serves)."""
        return self.filename.endswith(".whl")


@dataclass(frozen=True, kw_only=True)
class Release:
    """One version of a project: its files, first upload date and yank state."""

    version: str
    files: tuple[DistFile, ...]

    @property
    def uploaded(self) -> str | None:
        """The date (YYYY-MM-DD) of its first file upload."""
        times = sorted(f.upload_time for f in self.files if f.upload_time)
        return times[0][:10] if times else None

    @property
    def yanked(self) -> str | None:
        """The yank reason when every file is yanked (PEP 592), else None."""
        if self.files and all(f.yanked is not None for f in self.files):
            return self.files[0].yanked or "no reason given"
        return None


def _raw_version(filename: str) -> str | None:
    """The version part of a wheel's or sdist's name, unnormalised (a cheap split: a busy project
    lists 100k files, and parsing each one's tags cost seconds of CPU per install)."""
    if filename.endswith(".whl"):
        parts = filename[:-4].split("-")
        return parts[1] if len(parts) in (5, 6) else None
    for suffix in (".tar.gz", ".zip", ".tar.bz2", ".tgz"):
        if filename.endswith(suffix):
            name, _, version = filename[: -len(suffix)].rpartition("-")
            return version if name else None
    return None


def _normal(raw: str, seen: dict[str, str | None]) -> str | None:
    """`raw` as a normalised version string (None when it is none), once per distinct string."""
    if raw not in seen:
        try:
            seen[raw] = str(Version(raw))
        except InvalidVersion:
            seen[raw] = None
    return seen[raw]


class _Releases(Mapping[str, Release]):
    """A project page's files grouped by version; each Release (its DistFiles) built when asked
    for, so checking one pin reads one version's files, not the whole history."""

    def __init__(self, page: str, groups: dict[str, list[dict[str, Any]]]) -> None:
        self._page, self._groups, self._built = page, groups, dict[str, Release]()

    def __getitem__(self, version: str) -> Release:
        if version not in self._built:
            entries = self._groups[version]  # KeyError for a version the index lacks
            try:
                files = tuple(self._file(e) for e in entries)
            except (KeyError, TypeError, AttributeError) as exc:
                raise InstallError(f"{masked(self._page)}: not a PEP 691 project page ({exc!r})") from exc
            self._built[version] = Release(version=version, files=files)
        return self._built[version]

    def __iter__(self) -> Iterator[str]:
        return iter(self._groups)

    def __len__(self) -> int:
        return len(self._groups)

    def _file(self, entry: dict[str, Any]) -> DistFile:
        href, yanked = entry["url"], entry.get("yanked", False)
        return DistFile(
            filename=entry["filename"],
            url=href if href.startswith(("https://", "http://")) else urljoin(self._page, href),
            sha256=(entry.get("hashes") or {}).get("sha256"),
            upload_time=entry.get("upload-time"),
            yanked=None if yanked is False else ("" if yanked is True else str(yanked)),
            requires_python=entry.get("requires-python"),
            has_metadata=bool(entry.get("core-metadata") or entry.get("dist-info-metadata")),
        )


class Index:
    """A PEP 691 client for one index, with each project page read once per run."""

    def __init__(self, url: str) -> None:
        import requests  # noqa: PLC0415  # only check and propose talk to the index directly

        self.url = url.rstrip("/") + "/"
        self.session = requests.Session()
        self.session.headers["Accept"] = ACCEPT
        # requests reads REQUESTS_CA_BUNDLE and ~/.netrc but not SSL_CERT_FILE, which uv and
        # util/web.py honour: the same CA file for this maintainer's client too
        ca = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("SSL_CERT_FILE")
        if ca:
            self.session.verify = ca
        self._pages: dict[str, Mapping[str, Release]] = {}

    def _get(self, url: str, *, accept: str | None = None) -> Any:
        import requests  # noqa: PLC0415

        try:
            response = self.session.get(
                url, timeout=TIMEOUT_S, headers={"Accept": accept} if accept else None
            )
        except requests.RequestException as exc:
            raise InstallError(f"the index {masked(self.url)} could not be reached: {exc}") from exc
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise InstallError(f"{masked(url)}: HTTP {response.status_code} from the index")
        return response

    def releases(self, project: str) -> Mapping[str, Release]:
        """Every version of a project on the index (an unknown project: empty), each page read
        once per Index (kept on the instance, so it goes with it)."""
        key = str(canonicalize_name(project))
        if key not in self._pages:
            self._pages[key] = self._read_page(key)
        return self._pages[key]

    def _read_page(self, project: str) -> Mapping[str, Release]:
        url = urljoin(self.url, canonicalize_name(project) + "/")
        response = self._get(url)
        if response is None:
            return {}
        if "json" not in response.headers.get("Content-Type", ""):
            raise InstallError(f"{masked(url)}: the index does not serve the JSON Simple API (PEP 691)")
        try:
            groups: dict[str, list[dict[str, Any]]] = {}
            seen: dict[str, str | None] = {}
            for entry in response.json()["files"]:
                raw = _raw_version(entry["filename"])
                version = None if raw is None else _normal(raw, seen)
                if version is not None:
                    groups.setdefault(version, []).append(entry)
        except (ValueError, KeyError, TypeError) as exc:
            raise InstallError(f"{masked(url)}: not a PEP 691 project page ({exc})") from exc
        return _Releases(url, groups)

    @functools.cache  # noqa: B019  # one Index per run
    def metadata(self, dist: DistFile) -> Message:
        """A wheel's core metadata without downloading the wheel: PEP 658, else HTTP ranges of the zip."""
        url = dist.url.split("#", 1)[0]
        response = self._get(url + ".metadata", accept="*/*") if dist.has_metadata else None
        if response is not None:
            return email.parser.Parser().parsestr(response.text)
        # No PEP 658 file (some mirrors): read METADATA out of the wheel's zip by byte ranges,
        # as uv does, since torch and engine wheels are hundreds of megabytes.
        try:
            with zipfile.ZipFile(_RangeFile(self, url)) as wheel:
                name = next(
                    n for n in wheel.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1
                )
                text = wheel.read(name).decode("utf-8")
        except (zipfile.BadZipFile, StopIteration, OSError, UnicodeDecodeError) as exc:
            raise InstallError(f"{dist.filename}: cannot read its METADATA from the index ({exc})") from exc
        return email.parser.Parser().parsestr(text)

    def sdist_member(self, dist: DistFile, member: str) -> str | None:
        """One top-level file of an sdist (its pyproject.toml), downloading the sdist (a few MB)."""
        response = self._get(dist.url.split("#", 1)[0], accept="*/*")
        if response is None:
            return None
        try:
            with tarfile.open(fileobj=io.BytesIO(response.content), mode="r:gz") as sdist:
                for info in sdist.getmembers():
                    if info.isfile() and info.name.count("/") == 1 and info.name.endswith("/" + member):
                        extracted = sdist.extractfile(info)
                        return None if extracted is None else extracted.read().decode("utf-8")
        except (tarfile.TarError, OSError, UnicodeDecodeError):
            return None
        return None


class _RangeFile(io.RawIOBase):
    """A read-only, seekable view of a remote file through HTTP Range requests (what zipfile needs)."""

    BLOCK = 256 * 1024

    def __init__(self, index: Index, url: str) -> None:
        super().__init__()
        self.index, self.url, self.pos = index, url, 0
        head = index.session.head(url, timeout=TIMEOUT_S, allow_redirects=True)
        if head.status_code != 200 or head.headers.get("Accept-Ranges") != "bytes":
            raise OSError(f"the index does not serve byte ranges of {masked(url)}")
        self.size = int(head.headers["Content-Length"])
        self.blocks: dict[int, bytes] = {}

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def _block(self, number: int) -> bytes:
        if number not in self.blocks:
            start = number * self.BLOCK
            end = min(self.size, start + self.BLOCK) - 1
            response = self.index.session.get(
                self.url, headers={"Range": f"bytes={start}-{end}"}, timeout=TIMEOUT_S, allow_redirects=True
            )
            if response.status_code != 206:
                raise OSError(f"HTTP {response.status_code} for a byte range of {masked(self.url)}")
            self.blocks[number] = response.content
        return self.blocks[number]

    def read(self, size: int = -1) -> bytes:
        end = self.size if size is None or size < 0 else min(self.size, self.pos + size)
        out = bytearray()
        while self.pos < end:
            block = self._block(self.pos // self.BLOCK)
            start = self.pos % self.BLOCK
            piece = block[start : start + end - self.pos]
            if not piece:
                break
            out += piece
            self.pos += len(piece)
        return bytes(out)

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)
