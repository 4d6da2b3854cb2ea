"""Which interpreter `uv venv` gets: the exact version found here, else uv's, else the same minor."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from verl_setup.errors import InstallError
from verl_setup.host.facts import PythonInterpreter
from verl_setup.util.versions import minor_of

SOURCE_ORDER = ("uv-managed", "pyenv versions", "PATH")


@dataclass(frozen=True, kw_only=True)
class PythonChoice:
    """The interpreter `uv venv --python` gets: a path, or a version for uv to find or download."""

    request: str
    version: str
    source: str
    warning: str | None = None
    fallback: PythonChoice | None = None  # used when uv cannot find or download `request`


def choose_python(wanted: str, found: Sequence[PythonInterpreter], *, downloads: bool) -> PythonChoice:
    """The exact version: detected, else uv's (found or downloaded); the same minor only as a fallback."""
    usable = [p for p in found if p.implementation == "cpython" and p.mismatch is None]
    usable.sort(key=lambda p: SOURCE_ORDER.index(p.source) if p.source in SOURCE_ORDER else len(SOURCE_ORDER))
    exact = [p for p in usable if p.version == wanted]
    if exact:
        return PythonChoice(request=exact[0].path, version=wanted, source=exact[0].source)
    minor = minor_of(wanted)
    same = sorted(
        (p for p in usable if p.version.startswith(minor + ".")),
        key=lambda p: tuple(int(x) for x in p.version.split(".") if x.isdigit()),
    )
    fallback = None
    if same:
        p = same[-1]
        why = "uv could not get it" if downloads else "Python downloads are off"
        fallback = PythonChoice(
            request=p.path,
            version=p.version,
            source=p.source,
            warning=(
                f"Python {wanted} not available ({why}); using {p.version} ({p.path}, {p.source}). "
                f"Ray refuses worker nodes whose Python patch differs from the head's: run {p.version} "
                "on every node, or install the exact version"
            ),
        )
    if downloads:
        return PythonChoice(
            request=wanted,
            version=wanted,
            source="uv (found, or downloaded as a managed Python)",
            fallback=fallback,
        )
    if fallback is not None and wanted != minor:
        return fallback
    if fallback is not None:
        return dataclasses.replace(fallback, warning=None)
    exact_name = wanted if wanted != minor else f"{minor}.x"
    raise InstallError(
        f"no Python {minor} found (looked on PATH, in pyenv's versions folder and among uv-managed "
        f"Pythons) and downloads are off (--no-python-downloads or UV_PYTHON_DOWNLOADS): install Python "
        f"{exact_name} (`uv python install {wanted}` or `pyenv install {exact_name}`), or allow downloads"
    )
