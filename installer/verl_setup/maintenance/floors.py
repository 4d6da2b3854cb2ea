"""A row's real glibc floor, computed from the manylinux tags of the wheels it resolved to.

A hand-written `requires.glibc` drifts below the wheels a row resolves (a pin that publishes only
manylinux_2_31, a dependency that dropped its manylinux_2_28 wheels). `matrix prove` and `matrix
check` compute the floor instead: for every resolved distribution, the lowest glibc among its
wheels that install for the row's Python and CPU architecture (a pure-Python wheel, or an sdist
the matrix builds on purpose, sets none), and for the row the highest of these, with the
distributions that set it. musllinux wheels never install on a glibc host, so they set nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from verl_setup.environment.index import Index, Release
from verl_setup.util.versions import minor_of

_MANYLINUX = re.compile(r"^manylinux_(\d+)_(\d+)_(\w+)$")
# PEP 600's aliases of the legacy manylinux tags.
_LEGACY = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
NEWEST_GLIBC_MINOR = 60  # above any glibc shipped today, so every manylinux tag is considered
FETCH_WORKERS = 8


@dataclass(frozen=True, kw_only=True)
class Floor:
    """The glibc a resolution needs, and the distributions that set it.

    set_by reads like "llguidance 1.7.6 (manylinux_2_31)"."""

    glibc: str | None  # None: nothing in it needs more than the oldest manylinux
    set_by: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        """Plain data for records and --json."""
        return {"glibc": self.glibc, "set_by": list(self.set_by)}


def tag_glibc(platform: str, arch: str) -> tuple[int, int] | None:
    """The glibc a wheel platform tag needs on `arch` ((0, 0): any platform; None: not for it)."""
    if platform == "any":
        return (0, 0)
    legacy = platform.removesuffix(f"_{arch}")
    if legacy != platform and legacy in _LEGACY:
        return _LEGACY[legacy]
    found = _MANYLINUX.match(platform)
    if found and found[3] == arch:
        return int(found[1]), int(found[2])
    return None


def _supported(python: str, arch: str) -> frozenset[Tag]:
    """Every tag a CPython of this minor accepts on `arch` (platforms of every glibc)."""
    major, minor = (int(p) for p in minor_of(python).split("."))
    platforms = [f"manylinux_2_{m}_{arch}" for m in range(NEWEST_GLIBC_MINOR, 4, -1)]
    platforms += [f"{name}_{arch}" for name in _LEGACY]
    version = (major, minor)
    return frozenset(cpython_tags(version, platforms=platforms)) | frozenset(
        compatible_tags(version, f"cp{major}{minor}", platforms=platforms)
    )


def wheel_glibc(filename: str, supported: frozenset[Tag], arch: str) -> tuple[int, int] | None:
    """The lowest glibc at which this wheel installs (None: it does not install here at all)."""
    try:
        tags = parse_wheel_filename(filename)[3]
    except InvalidWheelFilename:
        return None
    needs = [tag_glibc(t.platform, arch) for t in tags if t in supported]
    found = [n for n in needs if n is not None]
    return min(found) if found else None


def release_floor(release: Release, supported: frozenset[Tag], arch: str) -> tuple[int, int] | None:
    """The lowest glibc among a release's installable wheels (None: it has none)."""
    found = [wheel_glibc(f.filename, supported, arch) for f in release.files if f.is_wheel]
    usable = [g for g in found if g is not None]
    return min(usable) if usable else None


def _show(glibc: tuple[int, int]) -> str:
    return f"{glibc[0]}.{glibc[1]}"


def compute_floor(
    pins: Mapping[str, str],
    releases: Mapping[str, Release | None],
    *,
    python: str,
    arch: str,
    sdists: Iterable[str] = (),
) -> Floor:
    """The floor of a resolution (name -> version) from each release's files on the index."""
    supported = _supported(python, arch)
    built = {canonicalize_name(n) for n in sdists}
    floors: dict[str, tuple[int, int]] = {}
    for name, version in pins.items():
        release = releases.get(name)
        if release is None or canonicalize_name(name) in built:
            continue  # not on this index (a direct URL) or built from its sdist on purpose
        floor = release_floor(release, supported, arch)
        if floor is not None and floor > (0, 0):
            floors[f"{name} {version}"] = floor
    if not floors:
        return Floor(glibc=None)
    top = max(floors.values())
    setters = tuple(f"{what} (manylinux_{top[0]}_{top[1]})" for what, g in sorted(floors.items()) if g == top)
    return Floor(glibc=_show(top), set_by=setters)


def floor_from_index(
    pins: Mapping[str, str], index: Index, *, python: str, arch: str, sdists: Iterable[str] = ()
) -> Floor:
    """compute_floor, with every release read from the index's JSON Simple API (in parallel)."""

    def fetch(name: str) -> tuple[str, Release | None]:
        return name, index.releases(name).get(pins[name])

    with ThreadPoolExecutor(max_workers=FETCH_WORKERS) as pool:
        releases = dict(pool.map(fetch, sorted(pins)))
    return compute_floor(pins, releases, python=python, arch=arch, sdists=sdists)


def platform_arch(platform: str) -> str:
    """ "x86_64-manylinux_2_31" -> "x86_64"."""
    return platform.split("-", 1)[0]
