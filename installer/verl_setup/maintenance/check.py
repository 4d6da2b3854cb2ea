"""`verl-setup matrix check`: re-resolve rows against the index as it is today, against the baseline.

Each row is resolved exactly as `matrix prove` resolves it (`uv pip compile --generate-hashes`
of its pins, flash-attn left out, for its recommended Python and platform) and compared with
what it resolved to last time (matrices/resolved.yaml). A row still resolves, resolves
differently (each moved distribution with why: a newer release, a re-upload under the same
version, a yank or a deletion, asked of the index's Simple API), or no longer resolves (uv's
reason). A row regressed when it no longer resolves, resolves only with a yanked pin, or when a
distribution it resolved to before was yanked or deleted. The packages a row installs last on their
own (`no_deps`, `sources`) are left out of the resolution, as `lock` leaves them to its `then:`
step: a `no_deps` pin is looked up on the index (gone or yanked: a regression), a direct reference
is named and not fetched. Each resolution's glibc floor is
computed from its wheels' manylinux tags (maintenance/floors.py) and recorded with it; a floor
above the row's `requires.glibc` is a regression too.
"""

from __future__ import annotations

import functools
import hashlib
import re
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from verl_setup.environment.index import Index, Release, configured_index
from verl_setup.environment.uv import compile_command, explain_failure, python_platform, write_inputs
from verl_setup.errors import InstallError
from verl_setup.maintenance.floors import Floor, floor_from_index
from verl_setup.matrix.load import Matrix
from verl_setup.matrix.resolved import Resolution
from verl_setup.matrix.schema import Row

COMPILE_TIMEOUT_S = 900.0
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)")
_HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")
_YANKED = re.compile(
    r"`([A-Za-z0-9][A-Za-z0-9._-]*)==([^`\s]+)` is yanked(?: \(reason: \"?(.*?)\"?\))?\.?$", re.M
)


def resolution_of(text: str) -> dict[str, tuple[str, str]]:
    """`uv pip compile --generate-hashes` output -> name -> (version, 16-hex digest of its file hashes)."""
    pins: dict[str, tuple[str, list[str]]] = {}
    current: str | None = None
    for line in text.splitlines():
        pin = _PIN.match(line)
        if pin:
            current = canonicalize_name(pin[1])
            pins[current] = (pin[2], [])
        elif current is not None:
            pins[current][1].extend(_HASH.findall(line))
    return {
        name: (version, hashlib.sha256("\n".join(sorted(hashes)).encode()).hexdigest()[:16])
        for name, (version, hashes) in pins.items()
    }


@dataclass(frozen=True, kw_only=True)
class Move:
    """One distribution that resolves differently from the baseline, and why."""

    name: str
    was: str | None
    now: str | None
    why: str
    regression: bool

    def to_json(self) -> dict[str, Any]:
        """Plain data for --json."""
        return {
            "name": self.name,
            "from": self.was,
            "to": self.now,
            "why": self.why,
            "regression": self.regression,
        }


@dataclass(kw_only=True)
class RowCheck:
    """One row's outcome: status, whether it regressed, and the evidence."""

    row: str
    status: str = "resolves"  # resolves | resolves-differently | no-longer-resolves | skipped
    reason: str | None = None
    moved: list[Move] = field(default_factory=list)
    yanked: list[str] = field(default_factory=list)
    baseline: bool = False
    seconds: float = 0.0
    resolution: Resolution | None = None
    floor: Floor | None = None
    floor_above: str | None = None  # the floor exceeds the row's requires.glibc: why
    # The packages installed last on their own (no_deps, sources): what was found of each, and
    # which of them the index no longer has (a regression).
    loose: list[str] = field(default_factory=list)
    loose_gone: list[str] = field(default_factory=list)

    @property
    def regressed(self) -> bool:
        """No longer resolves, a yanked pin, a baseline distribution yanked or deleted, or a
        computed glibc floor above the row's."""
        return (
            self.status == "no-longer-resolves"
            or bool(self.yanked)
            or any(m.regression for m in self.moved)
            or self.floor_above is not None
            or bool(self.loose_gone)
        )

    @property
    def drifted(self) -> bool:
        """Resolves differently with nothing regressed: newer releases inside the pins' ranges,
        a dependency added or dropped, a re-upload (reported, not a failure)."""
        return bool(self.moved) and not self.regressed

    def to_json(self) -> dict[str, Any]:
        """Plain data for --json."""
        return {
            "row": self.row,
            "status": self.status,
            "regressed": self.regressed,
            "reason": self.reason,
            "baseline": self.baseline,
            "yanked": self.yanked,
            "moved": [m.to_json() for m in self.moved],
            "glibc_floor": None if self.floor is None else self.floor.to_json(),
            "glibc_floor_above_row": self.floor_above,
            "drifted": self.drifted,
            "installed_last": self.loose,
            "installed_last_gone": self.loose_gone,
            "seconds": self.seconds,
        }


def resolve(
    row: Row,
    matrix: Matrix,
    uv: str,
    env: Mapping[str, str],
    *,
    python: str | None = None,
    arch: str | None = None,
    exclude_newer: str | None = None,
    prefer: Mapping[str, str] | None = None,
) -> tuple[int, str, str]:
    """(returncode, stdout, stderr) of the row's hashed resolution, as `matrix prove` makes it.

    For the row's recommended Python and its first architecture unless another Python is given.
    `prefer`: versions uv keeps wherever they still resolve (its preferences: the pins already in
    the output file), so another target moves only what it must."""
    from verl_setup.util.runner import ProgramError, run  # noqa: PLC0415

    requirements = resolved_requirements(row, matrix)
    with tempfile.TemporaryDirectory(prefix="verl-setup-check-") as tmp:
        _, overrides = write_inputs(row, Path(tmp), requirements)
        argv = compile_command(
            uv,
            row=row,
            matrix=matrix,
            python=python or row.python.recommended,
            requirements=Path("requirements.in"),
            overrides=None if overrides is None else Path(overrides.name),
            hashes=True,
            arch=arch,
            exclude_newer=exclude_newer,
        )
        argv.remove("--quiet")  # uv's yank warnings are evidence here
        if prefer:
            lines = "".join(f"{name}=={version}\n" for name, version in sorted(prefer.items()))
            (Path(tmp) / "preferred.txt").write_text(lines, encoding="utf-8")
            argv += ["--output-file", "preferred.txt"]
        try:
            out = run(argv, timeout=COMPILE_TIMEOUT_S, env=env, cwd=tmp)
        except ProgramError as exc:
            raise InstallError(f"uv pip compile: {exc}") from exc
        if prefer and out.returncode == 0:
            return 0, (Path(tmp) / "preferred.txt").read_text(encoding="utf-8"), out.stderr
    return out.returncode, out.stdout, out.stderr


def resolved_requirements(row: Row, matrix: Matrix) -> list[str]:
    """What `lock` resolves of a row: its pins without the packages built against torch and
    without those installed last on their own (their own pins would move the stack)."""
    loose = {canonicalize_name(n) for n in (*row.no_deps, *row.sources)}
    return [
        r
        for r in matrix.rows_file.without_extensions(row)
        if canonicalize_name(r.split("==")[0].split("[")[0]) not in loose
    ]


def check_installed_last(row: Row, indexes: list[Index]) -> tuple[list[str], list[str]]:
    """(what was found, what is gone) of the packages a row installs last without dependencies:
    each `no_deps` pin looked up on the index, each direct reference named."""
    found: list[str] = []
    gone: list[str] = []
    for name in dict.fromkeys((*row.no_deps, *row.sources)):
        if name in row.sources:
            found.append(f"{name}: {row.sources[name]}, a direct reference installed last (not fetched here)")
            continue
        version = row.packages[name]
        release = None
        for index in indexes:
            try:
                release = index.releases(name).get(version) or release
            except InstallError:  # an extra index without the JSON API: the next one may answer
                continue
            if release is not None:
                break
        if release is None or not release.files:
            gone.append(f"{name}=={version} is not on the index (installed last without dependencies)")
        elif release.yanked is not None:
            gone.append(f"{name}=={version} is yanked ({release.yanked})")
        else:
            found.append(f"{name}=={version}: on the index, installed last without its dependencies")
    return found, gone


def _why(name: str, was: tuple[str, str], now: tuple[str, str] | None, indexes: list[Index]) -> Move:
    old_version, old_files = was
    releases: Mapping[str, Release] = {}
    for index in indexes:
        try:
            releases = index.releases(name) or releases
        except InstallError:  # an extra index without the JSON API: the next one may answer
            continue
        if old_version in releases:
            break
    old = releases.get(old_version)
    new = None if now is None else now[0]
    if old is None or not old.files:
        return Move(
            name=name,
            was=old_version,
            now=new,
            why=f"{name} {old_version} was deleted from the index",
            regression=True,
        )
    if old.yanked is not None:
        return Move(
            name=name,
            was=old_version,
            now=new,
            why=f"{name} {old_version} was yanked ({old.yanked})",
            regression=True,
        )
    if now is None:
        return Move(
            name=name, was=old_version, now=None, why="no longer part of the resolution", regression=False
        )
    if now[0] == old_version and now[1] != old_files:
        why = f"the files of {name} {old_version} changed on the index (a new upload under the same version)"
        return Move(name=name, was=old_version, now=new, why=why, regression=False)
    date = releases[new].uploaded if new is not None and new in releases else None
    why = f"a newer release within the pins' ranges ({name} {new}" + (f", uploaded {date})" if date else ")")
    return Move(name=name, was=old_version, now=new, why=why, regression=False)


def check_row(
    row: Row,
    matrix: Matrix,
    baseline: Resolution | None,
    *,
    uv: str,
    env: Mapping[str, str],
    indexes: list[Index],
) -> RowCheck:
    """Re-resolve one row and compare it with its baseline."""
    result = RowCheck(row=row.id)
    if matrix.index_url(row) is not None and env.get("VERL_SETUP_PROVE_EXTRA_INDEXES") != "1":
        result.status = "skipped"
        result.reason = f"its torch comes from {matrix.index_url(row)}, which this run does not reach"
        return result
    start = time.monotonic()
    result.loose, result.loose_gone = check_installed_last(row, indexes)
    code, stdout, stderr = resolve(row, matrix, uv, env)
    result.seconds = round(time.monotonic() - start, 1)
    if code != 0:
        reason = explain_failure(stderr)
        # An index outage, or an offline run with a cold cache (M1), says nothing about the row:
        # exit 4, not 5
        if "could not be reached" in reason or reason.startswith("offline (UV_OFFLINE"):
            raise InstallError(f"row {row.id}: {reason}")
        result.status, result.reason = "no-longer-resolves", reason
        return result
    result.yanked = [
        f"{m[1]}=={m[2]} is yanked" + (f" ({m[3]})" if m[3] else "") for m in _YANKED.finditer(stderr)
    ]
    now = resolution_of(stdout)
    result.floor = row_floor(row, matrix, {n: v for n, (v, _) in now.items()}, indexes[-1])
    result.floor_above = floor_above(row, result.floor)
    result.resolution = Resolution(
        row_sha256=row.content_hash(),
        python=row.python.recommended,
        platform=python_platform(row),
        pins=now,
        glibc_floor=result.floor.glibc,
        glibc_floor_set_by=result.floor.set_by,
    )
    if baseline is None or baseline.row_sha256 != row.content_hash():
        result.reason = (
            "no baseline for this row's content (record one with `matrix check --record` or `make prove`)"
        )
        return result
    result.baseline = True
    for name in sorted(set(baseline.pins) | set(now)):
        was, is_now = baseline.pins.get(name), now.get(name)
        if was == is_now:
            continue
        if was is None:
            assert is_now is not None  # noqa: S101  # name comes from one of the two
            result.moved.append(
                Move(name=name, was=None, now=is_now[0], why="a new dependency", regression=False)
            )
        else:
            result.moved.append(_why(name, was, is_now, indexes))
    if result.moved:
        result.status = "resolves-differently"
    return result


def row_floor(row: Row, matrix: Matrix, pins: Mapping[str, str], index: Index) -> Floor:
    """The glibc floor of a row's resolution, from the wheels the index lists for each pin."""
    return floor_from_index(
        pins,
        index,
        python=row.python.recommended,
        arch=row.requires.arch[0],
        sdists=matrix.rows_file.built_from_sdist(row),
    )


def floor_above(row: Row, floor: Floor) -> str | None:
    """Why a computed floor is above the row's requires.glibc (None: it is not)."""
    from verl_setup.util.versions import parse_minor  # noqa: PLC0415

    if floor.glibc is None or parse_minor(floor.glibc, "glibc") <= parse_minor(row.requires.glibc, "glibc"):
        return None
    return (
        f"its wheels need glibc >= {floor.glibc} ({', '.join(floor.set_by)}), "
        f"the row says {row.requires.glibc}"
    )


def indexes_for(row: Row, matrix: Matrix, default: Index) -> list[Index]:
    """Where a row's distributions come from: the row's extra index (torch builds) first, then uv's."""
    url = matrix.index_url(row)
    return [default] if url is None else [_extra_index(url), default]


@functools.cache
def _extra_index(url: str) -> Index:
    return Index(url)


def default_index(uv: str, env: Mapping[str, str]) -> Index:
    """The index uv is configured with."""
    return Index(configured_index(uv, env))
