"""A wheelhouse folder: torch-extension wheels built once, served as a PEP 503 index, each with a
manifest that says what it was built against (the wheel file name does not: verl's own wheelhouse
names carry no torch version).

    DIR/simple/index.html                 one link per project
    DIR/simple/<normalized-name>/index.html   <a href="../../wheels/<file>#sha256=<hex>">file</a>
    DIR/wheels/<file>.whl
    DIR/wheels/<file>.whl.json            the manifest (schema 1, below)

The same folder works as a local path, `file://` URL, or behind any static HTTP server. Each wheel
also carries its build facts inside (`<dist-info>/verl_setup_build.json`), so the ABI check can
name the torch it was built against once it is installed.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import html
import json
import os
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from verl_setup.util.bounded import BoundError, read_capped

SCHEMA = 1
BUILD_RECORD = "verl_setup_build.json"  # inside a built wheel's .dist-info
MAX_MANIFEST = 64 * 1024
_FIELDS = ("schema", "name", "version", "torch", "cuda", "python", "abi", "arch_list", "platform", "source",
           "sha256", "built_at", "built_with")  # fmt: skip


class WheelhouseError(Exception):
    """A manifest or wheel that cannot be used; the message is one line naming the file."""


@dataclass(frozen=True, kw_only=True)
class SourceRef:
    """The source distribution a wheel was built from."""

    name: str
    version: str
    sha256: str | None
    url: str | None


@dataclass(frozen=True, kw_only=True)
class Manifest:
    """What one wheel was built from and against (`<file>.whl.json`, schema 1)."""

    name: str  # the distribution, as published (flash-attn)
    version: str
    torch: str  # the exact torch version it was compiled against (2.11.0)
    cuda: str | None  # torch's CUDA (13.0); None for a CPU build
    python: str  # the CPython tag (cp312)
    abi: bool  # torch's C++11 ABI (_GLIBCXX_USE_CXX11_ABI=1)
    arch_list: tuple[str, ...]  # TORCH_CUDA_ARCH_LIST entries (8.0, 9.0a, 10.0+PTX)
    platform: str  # the wheel's platform tag (linux_x86_64)
    source: SourceRef
    sha256: str  # of the wheel file
    built_at: str  # ISO 8601, UTC
    built_with: Mapping[str, str | None]  # nvcc version, compiler

    def to_json(self) -> dict[str, Any]:
        """The manifest as written to disk."""
        return {
            "schema": SCHEMA,
            "name": self.name,
            "version": self.version,
            "torch": self.torch,
            "cuda": self.cuda,
            "python": self.python,
            "abi": self.abi,
            "arch_list": list(self.arch_list),
            "platform": self.platform,
            "source": {
                "name": self.source.name,
                "version": self.source.version,
                "sha256": self.source.sha256,
                "url": self.source.url,
            },
            "sha256": self.sha256,
            "built_at": self.built_at,
            "built_with": dict(self.built_with),
        }

    @classmethod
    def from_json(cls, data: Any, where: str) -> Manifest:
        """Parse a manifest; WheelhouseError names `where` and the bad key."""
        if not isinstance(data, dict):
            raise WheelhouseError(f"{where}: a manifest must be a JSON object")
        if data.get("schema") != SCHEMA:
            raise WheelhouseError(f"{where}: schema {data.get('schema')!r} is not {SCHEMA}")
        unknown = sorted(set(data) - set(_FIELDS))
        missing = sorted(set(_FIELDS) - set(data))
        if unknown or missing:
            raise WheelhouseError(f"{where}: " + "; ".join(
                ([f"unknown keys {', '.join(unknown)}"] if unknown else [])
                + ([f"missing keys {', '.join(missing)}"] if missing else [])
            ))  # fmt: skip
        source, built_with = data["source"], data["built_with"]
        strings = ("name", "version", "torch", "python", "platform", "sha256", "built_at")
        problem = (
            "source and built_with must be objects"
            if not isinstance(source, dict) or not isinstance(built_with, dict)
            else "abi must be true or false and arch_list a list"
            if not isinstance(data["abi"], bool) or not isinstance(data["arch_list"], list)
            else f"{', '.join(strings)} must be non-empty strings"
            if not all(isinstance(data[k], str) and data[k] for k in strings)
            else "source needs a name and a version"
            if not source.get("name") or not source.get("version")
            else None
        )
        if problem:
            raise WheelhouseError(f"{where}: {problem}")
        return cls(
            name=data["name"],
            version=data["version"],
            torch=data["torch"],
            cuda=None if data["cuda"] is None else str(data["cuda"]),
            python=data["python"],
            abi=data["abi"],
            arch_list=tuple(str(a) for a in data["arch_list"]),
            platform=data["platform"],
            source=SourceRef(
                name=str(source["name"]),
                version=str(source["version"]),
                sha256=None if source.get("sha256") is None else str(source["sha256"]),
                url=None if source.get("url") is None else str(source["url"]),
            ),
            sha256=data["sha256"],
            built_at=data["built_at"],
            built_with={str(k): None if v is None else str(v) for k, v in built_with.items()},
        )

    def matches(
        self, *, name: str, torch: str | None = None, python: str | None = None, platform: str | None = None
    ) -> bool:
        """Whether this wheel is `name` built for exactly that torch, Python tag and platform."""
        return (
            canonicalize_name(self.name) == canonicalize_name(name)
            and (torch is None or _same_torch(self.torch, torch))
            and (python is None or self.python == python)
            and (platform is None or self.platform == platform)
        )


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One wheel of a wheelhouse and its manifest."""

    wheel: Path
    manifest: Manifest


def _same_torch(built: str, wanted: str) -> bool:
    # A local label (+cu130) is how PyTorch's own indexes name the same build; PyPI's carries none.
    return built.partition("+")[0] == wanted.partition("+")[0]


def sha256_of(path: Path, progress: Callable[[int], None] | None = None) -> str:
    """The hex sha256 of a file (`progress` gets the size of each 1 MiB block read)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
            if progress is not None:
                progress(len(block))
    return digest.hexdigest()


def read_manifest(path: Path) -> Manifest:
    """Read and check one `<file>.whl.json`."""
    try:
        data = json.loads(read_capped(path, MAX_MANIFEST, "wheelhouse manifest"))
    except BoundError as exc:
        raise WheelhouseError(str(exc)) from exc
    except ValueError as exc:
        raise WheelhouseError(f"{path}: not JSON ({exc})") from exc
    return Manifest.from_json(data, str(path))


def listed_entries(root: Path, *, verify: bool) -> list[Entry]:
    """`wheelhouse list`'s use case: the entries of the wheelhouse at `root` (bad input when it is
    none, or a wheel or its manifest is broken)."""
    from verl_setup.errors import BadInputError  # noqa: PLC0415

    if not (root / "wheels").is_dir():
        raise BadInputError(f"{root}: not a wheelhouse (no wheels/ folder in it)")
    try:
        return Wheelhouse(root).entries(verify=verify)
    except WheelhouseError as exc:
        raise BadInputError(str(exc)) from exc


class Wheelhouse:
    """A wheelhouse folder on disk: read its entries, add a wheel, rewrite its index."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.wheels = root / "wheels"
        self.simple = root / "simple"

    def entries(self, *, verify: bool = False) -> list[Entry]:
        """Every wheel that has a manifest (with `verify`, only those whose sha256 still matches)."""
        found = []
        for meta in sorted(self.wheels.glob("*.whl.json")) if self.wheels.is_dir() else []:
            wheel = meta.with_suffix("")
            manifest = read_manifest(meta)
            if not wheel.is_file():
                raise WheelhouseError(f"{meta}: its wheel {wheel.name} is missing")
            if verify and sha256_of(wheel) != manifest.sha256:
                raise WheelhouseError(f"{wheel}: sha256 differs from its manifest (rebuilt or damaged)")
            found.append(Entry(wheel=wheel, manifest=manifest))
        return found

    def find(
        self, name: str, *, torch: str | None = None, python: str | None = None, platform: str | None = None
    ) -> list[Entry]:
        """The entries of `name` built for that torch, Python tag and platform, newest version first."""
        from packaging.version import Version  # noqa: PLC0415

        hits = [
            e
            for e in self.entries()
            if e.manifest.matches(name=name, torch=torch, python=python, platform=platform)
        ]
        return sorted(hits, key=lambda e: Version(e.manifest.version), reverse=True)

    def add(self, wheel: Path, manifest: Manifest) -> Entry:
        """Copy `wheel` in with its manifest (its sha256 checked), then rewrite the index."""
        try:
            parse_wheel_filename(wheel.name)
        except InvalidWheelFilename as exc:
            raise WheelhouseError(f"{wheel.name} is not a wheel file name: {exc}") from exc
        if sha256_of(wheel) != manifest.sha256:
            raise WheelhouseError(f"{wheel}: its sha256 is not the manifest's")
        self.wheels.mkdir(parents=True, exist_ok=True)
        target = self.wheels / wheel.name
        if wheel.resolve() != target.resolve():
            _atomic_copy(wheel, target)
        _atomic_write(
            target.with_name(target.name + ".json"), json.dumps(manifest.to_json(), indent=2) + "\n"
        )
        self.write_index()
        return Entry(wheel=target, manifest=manifest)

    def write_index(self) -> None:
        """Rewrite simple/ from wheels/ (PEP 503: a page per normalized project name)."""
        projects: dict[str, list[Entry]] = {}  # by normalized project name
        for entry in self.entries():
            project = str(canonicalize_name(parse_wheel_filename(entry.wheel.name)[0]))
            projects.setdefault(project, []).append(entry)
        self.simple.mkdir(parents=True, exist_ok=True)
        for name, entries in sorted(projects.items()):
            links = "".join(
                f'    <a href="../../wheels/{html.escape(e.wheel.name)}#sha256={e.manifest.sha256}">'
                f"{html.escape(e.wheel.name)}</a><br>\n"
                for e in sorted(entries, key=lambda e: e.wheel.name)
            )
            (self.simple / name).mkdir(exist_ok=True)
            _atomic_write(self.simple / name / "index.html", _page(f"Links for {name}", links))
        links = "".join(f'    <a href="{n}/">{n}</a><br>\n' for n in sorted(projects))
        _atomic_write(self.simple / "index.html", _page("Simple index", links))


PUBLISHED_MODE = 0o644


def _page(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html>\n<html>\n  <head>\n    <meta name="pypi:repository-version" content="1.0">\n'
        f"    <title>{html.escape(title)}</title>\n  </head>\n  <body>\n    <h1>{html.escape(title)}</h1>\n"
        f"{body}  </body>\n</html>\n"
    )


def _publish(temp: str, path: Path) -> None:
    """Move a finished temporary file into place, readable by all: mkstemp makes it 0600, and the
    other nodes of a cluster (a shared path, an HTTP server as another user) read the wheelhouse."""
    Path(temp).chmod(PUBLISHED_MODE)
    Path(temp).replace(path)


def _atomic_write(path: Path, text: str) -> None:
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        _publish(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _atomic_copy(source: Path, target: Path) -> None:
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    os.close(fd)
    try:
        shutil.copyfile(source, temp)
        _publish(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def add_build_record(wheel: Path, record: Mapping[str, Any]) -> None:
    """Write `record` into the wheel as `<dist-info>/verl_setup_build.json`, its RECORD updated."""
    with zipfile.ZipFile(wheel) as source:
        names = source.namelist()
        infos = sorted({n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")})
        if len(infos) != 1:
            raise WheelhouseError(f"{wheel.name}: expected one .dist-info folder, found {len(infos)}")
        info = infos[0]
        payload = (json.dumps(dict(record), indent=2, sort_keys=True) + "\n").encode()
        digest = base64.urlsafe_b64encode(hashlib.sha256(payload).digest()).rstrip(b"=").decode()
        fd, temp = tempfile.mkstemp(dir=wheel.parent, prefix=f".{wheel.name}.")
        os.close(fd)
        try:
            with zipfile.ZipFile(temp, "w", compression=zipfile.ZIP_DEFLATED) as target:
                for item in source.infolist():
                    if item.filename == f"{info}/{BUILD_RECORD}":
                        continue
                    data = source.read(item)
                    if item.filename == f"{info}/RECORD":
                        lines = [
                            line
                            for line in data.decode().splitlines()
                            if line and not line.startswith(f"{info}/{BUILD_RECORD},")
                        ]
                        lines.insert(len(lines) - 1, f"{info}/{BUILD_RECORD},sha256={digest},{len(payload)}")
                        data = ("\n".join(lines) + "\n").encode()
                        target.writestr(f"{info}/{BUILD_RECORD}", payload)
                    target.writestr(item, data)
            _publish(temp, wheel)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise


def read_build_record(dist_info: Path) -> dict[str, Any]:
    """The build record an installed distribution carries, or {} when it has none."""
    with contextlib.suppress(OSError, ValueError, BoundError):
        loaded = json.loads(read_capped(dist_info / BUILD_RECORD, MAX_MANIFEST, "build record"))
        if isinstance(loaded, dict):
            return loaded
    return {}
