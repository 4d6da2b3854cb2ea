"""`matrix check` of the wheel sources: is every wheel the matrix says a source serves still there?

For each enabled index source with `serves`, each world it lists (one index per CUDA and torch)
is read, and each package, version, Python and arch promised there is reported `present`,
`missing` or `changed` (a file under the same name whose sha256 differs from the one recorded),
with the date it was last seen (matrices/wheel-sources-seen.yaml). Wheels the world holds for a
Python or arch the matrix does not list are reported `unlisted` (news, not a failure). Missing or
changed is drift of what the matrix promises: `matrix check` exits 5 on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from verl_setup.matrix.schema import Row, RowsFile, WheelSource
from verl_setup.matrix.wheel_seen import SeenSource, SeenWheel, wheel_key, world_of
from verl_setup.util.versions import minor_of

Links = Callable[[str, str], list[str]]  # (index URL, package) -> file URLs (#sha256=...)


@dataclass(frozen=True, kw_only=True)
class WheelFinding:
    """One promised (or unlisted) wheel of a world, as found today."""

    source: str
    world: str
    url: str
    package: str
    version: str
    python: str
    arch: str
    status: str  # present | missing | changed | unlisted
    file: str | None = None
    sha256: str | None = None
    was_sha256: str | None = None
    last_seen: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Plain data for --json."""
        return dict(vars(self))

    def words(self) -> str:
        """One line for the text report."""
        what = f"{self.package} {self.version} cp{self.python.replace('.', '')} {self.arch}"
        if self.status == "missing":
            seen = f"last seen {self.last_seen}" if self.last_seen else "never seen"
            return f"{self.world}: {what}: missing ({seen}; {self.url})"
        if self.status == "changed":
            return f"{self.world}: {what}: {self.file} changed (sha256 {self.was_sha256} -> {self.sha256})"
        if self.status == "unlisted":
            return f"{self.world}: {what}: served but not listed in the matrix ({self.file})"
        return f"{self.world}: {what}: present"


@dataclass(kw_only=True)
class SourceCheck:
    """One source's outcome: each finding, and the worlds that could not be read."""

    source: str
    checked: str
    findings: list[WheelFinding] = field(default_factory=list)
    unreachable: list[str] = field(default_factory=list)

    @property
    def drifted(self) -> bool:
        """A promised wheel is missing or its bytes changed."""
        return any(f.status in ("missing", "changed") for f in self.findings)

    def empty_worlds(self) -> list[str]:
        """Worlds where every promised wheel is missing."""
        worlds: dict[str, set[str]] = {}
        for f in self.findings:
            if f.status != "unlisted":
                worlds.setdefault(f.world, set()).add(f.status)
        return [w for w, states in worlds.items() if states == {"missing"}]

    def to_json(self) -> dict[str, Any]:
        """Plain data for --json."""
        return {
            "source": self.source,
            "checked": self.checked,
            "drifted": self.drifted,
            "empty_worlds": self.empty_worlds(),
            "unreachable": self.unreachable,
            "wheels": [f.to_json() for f in self.findings],
        }

    def record(self, before: SeenSource | None) -> SeenSource | None:
        """What to record of this look (None: nothing could be read)."""
        if self.unreachable and not self.findings:
            return None
        wheels = dict(before.wheels) if before else {}
        for f in self.findings:
            if f.status == "unlisted":
                continue
            key = wheel_key(f.world, f.package, f.version, f.python, f.arch)
            if f.status == "missing":
                old = wheels.get(key)
                wheels[key] = SeenWheel(status="missing", last_seen=old.last_seen if old else None)
            else:
                wheels[key] = SeenWheel(
                    status="present", file=f.file, sha256=f.sha256, last_seen=self.checked
                )
        return SeenSource(checked=self.checked, wheels=wheels)


def checkable(rows_file: RowsFile) -> list[WheelSource]:
    """The enabled index sources that say what they serve."""
    return [s for s in rows_file.wheel_sources if s.enabled and s.kind == "index" and s.url and s.serves]


def worlds_of(source: WheelSource, rows: Iterable[Row] | None = None) -> list[tuple[str, str]]:
    """(world, URL) of each world the source lists, or only those serving the given rows."""
    from verl_setup.plan.wheel_sources import torch_minor  # noqa: PLC0415

    wanted = None if rows is None else {(r.torch.cuda, torch_minor(r)) for r in rows}
    out: dict[str, str] = {}
    for served in source.serves:
        for cuda in served.cuda:
            for torch in served.torch:
                if wanted is not None and (cuda, torch) not in wanted:
                    continue
                cuda_tag = "cu" + minor_of(cuda).replace(".", "")
                assert source.url is not None  # noqa: S101  # checkable() keeps sources with a URL
                out[world_of(cuda, torch)] = source.url.format(cuda_tag=cuda_tag, torch_minor=torch)
    return list(out.items())


def _tags(filename: str, package: str, version: str) -> set[tuple[str, str]] | None:
    """{(python "3.12", arch)} a wheel file is for, when it is the package at that version."""
    try:
        dist, found, _build, tags = parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion):
        return None
    if dist != canonicalize_name(package) or Version(found.public) != Version(Version(version).public):
        return None
    out = set()
    for tag in tags:
        if tag.interpreter.startswith("cp") and len(tag.interpreter) > 3:  # "cp3" + minor
            python = f"{tag.interpreter[2]}.{tag.interpreter[3:]}"
            for arch in ("x86_64", "aarch64"):
                if tag.platform.endswith(arch):
                    out.add((python, arch))
    return out


def check_source(  # one pass over worlds, packages, files and promises
    source: WheelSource,
    before: SeenSource | None,
    *,
    today: str,
    links: Links,
    rows: Iterable[Row] | None = None,
) -> SourceCheck:
    """Read each world of the source (of the given rows only, if given) and compare it with the
    matrix's promises and the last record."""
    result = SourceCheck(source=source.id, checked=today)
    old = before.wheels if before else {}
    for world, url in worlds_of(source, None if rows is None else list(rows)):
        torch = world.rsplit("torch", 1)[1]
        promised = [s for s in source.serves if torch in s.torch and world.startswith(_tag_of(s.cuda, world))]
        names = {name for s in promised for name in s.packages}
        for name in sorted(names):
            try:
                files = links(url, name)
            except FileNotFoundError:
                files = []  # no page for the package: the world does not hold it
            except OSError as exc:
                result.unreachable.append(f"{world}: {url}{canonicalize_name(name)}/: {exc}")
                continue
            versions = sorted({v for s in promised for v in s.packages.get(name, ())})
            for version in versions:
                found: dict[tuple[str, str], tuple[str, str | None]] = {}
                for link in files:
                    file_url, _, fragment = link.partition("#")
                    filename = file_url.rsplit("/", 1)[-1]
                    sha = fragment.removeprefix("sha256=") if fragment.startswith("sha256=") else None
                    for py_arch in _tags(filename, name, version) or ():
                        found.setdefault(py_arch, (filename, sha))
                listed = {
                    (py, arch)
                    for s in promised
                    if version in s.packages.get(name, ())
                    for py in s.python
                    for arch in s.arch
                }
                for python, arch in sorted(listed | set(found)):
                    was = old.get(wheel_key(world, name, version, python, arch))
                    common = {
                        "source": source.id,
                        "world": world,
                        "url": url,
                        "package": name,
                        "version": version,
                        "python": python,
                        "arch": arch,
                    }
                    if (python, arch) not in found:
                        last = was.last_seen if was else None
                        result.findings.append(WheelFinding(**common, status="missing", last_seen=last))
                        continue
                    filename, sha = found[(python, arch)]
                    status = "present" if (python, arch) in listed else "unlisted"
                    changed = was is not None and was.file == filename and was.sha256 not in (None, sha)
                    result.findings.append(
                        WheelFinding(
                            **common,
                            status="changed" if changed and status == "present" else status,
                            file=filename,
                            sha256=sha,
                            was_sha256=was.sha256 if changed and was else None,
                            last_seen=today,
                        )
                    )
    return result


def _tag_of(cudas: Iterable[str], world: str) -> str:
    """The world prefix ("cu130/") when one of the build set's CUDA releases names it, else a
    prefix that matches nothing."""
    for cuda in cudas:
        tag = f"cu{minor_of(cuda).replace('.', '')}/"
        if world.startswith(tag):
            return tag
    return "\0"
