"""Reading a release's own metadata for `matrix propose`: its pins, its Pythons, its platforms, its CUDA.

Everything here comes from what the index serves for a release (the wheel's core metadata and
its file names); nothing is guessed from version numbers.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from email.message import Message
from itertools import chain
from typing import Any

from packaging import tags
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from verl_setup.environment.index import DistFile, Index, Release
from verl_setup.util.versions import minor_of

PYTHON_MINORS = ("3.10", "3.11", "3.12", "3.13", "3.14")
# torch names its CUDA runtime in Requires-Dist: nvidia-cuda-runtime-cu12==12.8.90 (CUDA 12 wheels),
# cuda-toolkit[...]==13.0.2 (CUDA 13 wheels).
_CUDA_PACKAGES = re.compile(r"^(nvidia-cuda-runtime(-cu\d+)?|cuda-toolkit)$")
_MANYLINUX = re.compile(r"manylinux_(\d+)_(\d+)_(x86_64|aarch64)")
_LEGACY_MANYLINUX = {"manylinux1": "2.5", "manylinux2010": "2.12", "manylinux2014": "2.17"}


@dataclass(frozen=True, kw_only=True)
class ReleaseMeta:
    """One release as its wheel's metadata describes it."""

    name: str
    version: str
    requires_python: SpecifierSet
    extras: tuple[str, ...]
    requirements: tuple[Requirement, ...]
    wheel: str  # the file the metadata was read from
    uploaded: str | None


def _marker_env(python: str, arch: str, extra: str) -> dict[str, str]:
    return {
        "python_version": python,
        "python_full_version": f"{python}.0",
        "platform_system": "Linux",
        "sys_platform": "linux",
        "os_name": "posix",
        "platform_machine": arch,
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "extra": extra,
    }


def wheel_for(release: Release, *, arch: str = "x86_64", python: str = "3.12") -> DistFile | None:
    """The release's wheel for Linux on `arch` (preferring the given Python), or a pure one."""
    cp = "cp" + python.replace(".", "")
    ranked = []
    for f in release.files:
        if not f.is_wheel or f.yanked is not None:
            continue
        tags = {str(t) for t in parse_wheel_filename(f.filename)[3]}
        linux = any(arch in t and "linux" in t for t in tags)
        pure = any(t.endswith("-none-any") for t in tags)
        if linux or pure:
            ranked.append((not any(t.startswith(cp) for t in tags), not linux, f.filename, f))
    return sorted(ranked, key=lambda r: r[:3])[0][3] if ranked else None


def read_release(index: Index, name: str, version: str) -> ReleaseMeta | None:
    """A release's metadata (None when the index has no usable wheel for Linux x86_64)."""
    release = index.releases(name).get(version)
    dist = None if release is None else wheel_for(release)
    if release is None or dist is None:
        return None
    meta: Message = index.metadata(dist)
    requirements = []
    for line in meta.get_all("Requires-Dist") or []:
        try:
            requirements.append(Requirement(line))
        except InvalidRequirement:
            continue
    return ReleaseMeta(
        name=canonicalize_name(name),
        version=version,
        requires_python=SpecifierSet(meta.get("Requires-Python") or ""),
        extras=tuple(meta.get_all("Provides-Extra") or ()),
        requirements=tuple(requirements),
        wheel=dist.filename,
        uploaded=release.uploaded,
    )


def requirements_of(
    meta: ReleaseMeta, extra: str | None = None, *, python: str = "3.12", arch: str = "x86_64"
) -> list[Requirement]:
    """What installing the release (with one extra) on Linux requires; its own extras expanded."""
    wanted, seen, out = ["", *([extra] if extra else [])], set[str](), list[Requirement]()
    while wanted:
        current = wanted.pop()
        if current in seen:
            continue
        seen.add(current)
        for req in meta.requirements:
            applies = req.marker is None or req.marker.evaluate(_marker_env(python, arch, current))
            base = req.marker is None or req.marker.evaluate(_marker_env(python, arch, ""))
            if not applies or (current and base):
                continue
            if canonicalize_name(req.name) == meta.name:
                wanted.extend(req.extras)
            else:
                out.append(req)
    return out


def exact_pin(requirements: list[Requirement], name: str) -> str | None:
    """The version a requirement list pins `name` to with ==, or None."""
    for req in requirements:
        if canonicalize_name(req.name) == canonicalize_name(name):
            for spec in req.specifier:
                if spec.operator == "==" and "*" not in spec.version:
                    return spec.version
    return None


def cuda_of(torch_requirements: list[Requirement]) -> tuple[str, str] | None:
    """(CUDA X.Y, the requirement that says so) from a torch wheel's Requires-Dist, or None (CPU)."""
    for req in torch_requirements:
        if _CUDA_PACKAGES.match(canonicalize_name(req.name)):
            pinned = exact_pin([req], req.name)
            if pinned:
                return minor_of(pinned), str(req).split(";", 1)[0].strip()
    return None


def python_minors(*specifiers: SpecifierSet) -> list[str]:
    """The Python minors every Requires-Python admits (uv ignores upper bounds; we do not)."""
    return [m for m in PYTHON_MINORS if all(s.contains(f"{m}.0", prereleases=True) for s in specifiers)]


def linux_wheels(release: Release, arch: str) -> dict[str, str]:
    """ "interpreter-abi" tag -> the lowest manylinux glibc floor ("2.17") among the release's
    wheels for `arch` (packaging's own reading of the file name). Pure wheels count as "any"."""
    out: dict[str, str] = {}
    for f in release.files:
        if not f.is_wheel or f.yanked is not None:
            continue
        try:
            wheel_tags = parse_wheel_filename(f.filename)[3]
        except InvalidWheelFilename:
            continue
        for tag in wheel_tags:
            key = f"{tag.interpreter}-{tag.abi}"
            floor = "any" if tag.platform == "any" else manylinux_floor(tag.platform, arch)
            if floor is None:
                continue
            known = out.get(key)
            if known != "any" and (known is None or floor == "any" or _glibc(floor) < _glibc(known)):
                out[key] = floor
    return out


def manylinux_floor(platform: str, arch: str) -> str | None:
    """The glibc a manylinux platform tag needs on `arch`: PEP 600's `manylinux_X_Y`, and the
    legacy names PEP 600 maps onto it (manylinux1 = 2.5, manylinux2010 = 2.12, manylinux2014 = 2.17)."""
    m = _MANYLINUX.fullmatch(platform)
    if m:
        return f"{m[1]}.{m[2]}" if m[3] == arch else None
    legacy, _, tag_arch = platform.partition("_")
    return _LEGACY_MANYLINUX.get(legacy) if tag_arch == arch else None


def serves_python(wheels: dict[str, str], minor: str) -> bool:
    """Whether a wheel in `linux_wheels` installs on this CPython minor (packaging.tags' list:
    its own cp tag, abi3 from older minors, `none`, py3 and pure wheels)."""
    supported = _interpreter_abis(minor)
    return any(tuple(key.split("-", 1)) in supported for key in wheels)


def glibc_floor(wheels: dict[str, str], minor: str) -> str | None:
    """The manylinux glibc floor of the wheel that serves this minor (None: a pure wheel)."""
    floors = [floor for key, floor in wheels.items() if floor != "any" and serves_python({key: floor}, minor)]
    return max(floors, key=_glibc) if floors else None


def _interpreter_abis(minor: str) -> frozenset[tuple[str, ...]]:
    version = (3, int(minor.split(".")[1]))
    cp = f"cp3{version[1]}"
    every = chain(
        tags.cpython_tags(version, abis=[cp], platforms=["any"]),
        tags.compatible_tags(version, cp, platforms=["any"]),
    )
    return frozenset((t.interpreter, t.abi) for t in every)


def _glibc(floor: str) -> tuple[int, ...]:
    return tuple(int(p) for p in floor.split("."))


@dataclass(frozen=True, kw_only=True)
class UvConfig:
    """What a release's pyproject.toml says to uv: [tool.uv] override-dependencies and conflicts."""

    overrides: tuple[str, ...]
    conflicts: tuple[tuple[str, ...], ...]  # groups of extras that cannot be installed together
    source: str  # the sdist it was read from


def uv_config(index: Index, name: str, version: str) -> UvConfig | None:
    """[tool.uv] of a release's own pyproject.toml, read from its sdist (None: no sdist, or Python 3.10).

    Wheels do not carry it, and verl's uv flow depends on it (its overrides make verl[sglang]
    resolvable at all), so it is data for a candidate row like the Requires-Dist."""

    release = index.releases(name).get(version)
    sdist = next((f for f in release.files if f.filename.endswith(".tar.gz")), None) if release else None
    if sdist is None:
        return None
    text = index.sdist_member(sdist, "pyproject.toml")
    if text is None:
        return None
    data = _toml(text)
    if data is None:
        return None
    uv = data.get("tool", {}).get("uv", {})
    groups = tuple(
        tuple(str(item["extra"]) for item in group if isinstance(item, dict) and "extra" in item)
        for group in uv.get("conflicts", [])
    )
    return UvConfig(
        overrides=tuple(str(o) for o in uv.get("override-dependencies", [])),
        conflicts=groups,
        source=sdist.filename,
    )


def _toml(text: str) -> dict[str, Any] | None:
    if sys.version_info >= (3, 11):  # Python 3.10 has no tomllib: the candidate goes without overrides
        import tomllib  # noqa: PLC0415  # only propose reads a pyproject.toml

        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            return None
    return None
