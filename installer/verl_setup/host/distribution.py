"""The Linux distribution: ID, version, codename and the IDs it is like, each with the source that
stated it, read by the `distro` package in its order: os-release(5) (/etc/os-release, else
/usr/lib/os-release), then `lsb_release -a`, then the older release files (/etc/redhat-release,
/etc/SuSE-release, ...). A fact comes from the first source that states it, so `lsb_release`
runs only where os-release lacks one, and only on this machine (a tree under another root is files).

`distro` is imported where detection runs, not when the package loads (bench/startup.py).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from verl_setup.util.runner import ProgramError, run

if TYPE_CHECKING:
    from distro import LinuxDistribution

LSB_TIMEOUT = 5.0  # lsb_release is a Python script on Debian: about 0.1 s, unbounded if it hangs
LSB = "lsb_release -a"


@dataclass(frozen=True, kw_only=True)
class OsDistribution:
    """What the sources state, and fact -> the source it came from (absent: no source states it)."""

    id: str | None = None
    version: str | None = None
    codename: str | None = None
    like: tuple[str, ...] = ()
    sources: dict[str, str] = field(default_factory=dict)


def read_distribution(root: Path, *, lsb: bool | None = None) -> OsDistribution:
    """The distribution of the system under `root` ("/" is this machine); `lsb`: whether to ask
    `lsb_release` on PATH (default: for "/" only, whose program it is)."""
    import distro  # noqa: PLC0415  # only detection pays for its import

    live = root == Path("/")
    reader = distro.LinuxDistribution(
        include_lsb=False, include_uname=False, include_oslevel=False, root_dir=None if live else str(root)
    )
    os_release = _shown(reader.os_release_file, root)
    sources: list[tuple[str, Callable[[], dict[str, str]]]] = [(os_release, lambda: _os_release(reader))]
    if live if lsb is None else lsb:
        sources.append((LSB, _lsb_release))
    sources.append(("the release file", lambda: _release_file(reader, root)))
    read: dict[str, dict[str, str]] = {os_release: sources[0][1]()}
    found: dict[str, tuple[str, str]] = {}  # fact -> (value, source)
    if "like" in read[os_release]:  # ID_LIKE: only os-release states it (distro's like() too)
        found["like"] = (read[os_release]["like"], os_release)
    for fact in ("id", "version", "codename"):
        for name, load in sources:
            if name not in read:
                read[name] = load()
            if fact in read[name]:  # os-release's VERSION_CODENAME="" states "none": distro stops there too
                found[fact] = (read[name][fact], read[name].get("source", name))
                break
    value = {fact: v for fact, (v, _) in found.items() if v}
    return OsDistribution(
        id=value.get("id"),
        version=value.get("version"),
        codename=value.get("codename"),
        like=tuple(value.get("like", "").split()),
        sources={fact: found[fact][1] for fact in ("id", "version", "codename", "like") if value.get(fact)},
    )


def _os_release(reader: LinuxDistribution) -> dict[str, str]:
    """os-release's ID, VERSION_ID, codename (VERSION_CODENAME, else from VERSION) and ID_LIKE."""
    try:
        info = reader.os_release_info()
    except ValueError:  # a line shlex cannot close (a stray quote): read the lines one by one
        info = _line_by_line(Path(reader.os_release_file))
    except OSError:
        info = {}
    picked = _stated(id=info.get("id"), version=info.get("version_id"), like=info.get("id_like"))
    if "codename" in info:
        picked["codename"] = info["codename"]  # even "": os-release says there is none
    return picked


def _line_by_line(path: Path) -> dict[str, str]:
    """distro's own os-release parser, one line at a time: a broken line costs only itself."""
    from distro import LinuxDistribution  # noqa: PLC0415

    parse = LinuxDistribution._parse_os_release_content
    info: dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return info
    for line in text.splitlines():
        try:
            info.update(parse(io.StringIO(line)))
        except ValueError:
            continue
    return info


def _lsb_release() -> dict[str, str]:
    """`lsb_release -a` (Distributor ID, Release, Codename), as distro parses it; none if absent."""
    from distro import NORMALIZED_LSB_ID, LinuxDistribution  # noqa: PLC0415

    try:
        out = run(["lsb_release", "-a"], timeout=LSB_TIMEOUT)
    except (ProgramError, OSError):
        return {}
    if out.returncode != 0:
        return {}
    info = LinuxDistribution._parse_lsb_release_content(out.stdout.splitlines())  # distro's own parser
    name = info.get("distributor_id", "").lower().replace(" ", "_")
    return _stated(
        id=NORMALIZED_LSB_ID.get(name, name), version=info.get("release"), codename=info.get("codename")
    )


def _release_file(reader: LinuxDistribution, root: Path) -> dict[str, str]:
    """The first /etc/*-release or *_version file distro recognises (CentOS 6, old SUSE, ...)."""
    from distro import NORMALIZED_DISTRO_ID  # noqa: PLC0415

    try:
        info = reader.distro_release_info()
    except (OSError, ValueError):
        return {}
    if not info:
        return {}
    name = info.get("id", "").lower().replace(" ", "_")
    stated = _stated(id=NORMALIZED_DISTRO_ID.get(name, name), version=info.get("version_id"),
                     codename=info.get("codename"))  # fmt: skip
    return {**stated, "source": _shown(reader.distro_release_file, root)}


def _stated(**facts: str | None) -> dict[str, str]:
    """The facts a source gives a value for."""
    return {fact: value for fact, value in facts.items() if value}


def _shown(path: str, root: Path) -> str:
    """A file under `root` as the system it belongs to names it (/etc/os-release)."""
    try:
        return "/" + Path(path).relative_to(root).as_posix()
    except ValueError:
        return path
