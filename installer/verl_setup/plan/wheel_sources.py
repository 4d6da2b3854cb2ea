"""Which wheel sources may serve a package built against torch, for one row, in order.

The user's sources (--wheel-source, VERL_SETUP_WHEEL_SOURCES) come first, then the enabled
sources of matrices/verl.yaml. This reads only data: a release asset is named by its URL
pattern; an index is looked up at install time (environment/wheel_pick.py), where the wheel
that lands is then read by the ABI check.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit

from packaging.version import Version

from verl_setup.errors import BadInputError
from verl_setup.matrix.schema import ExtensionFacts, Row, RowsFile, TorchFrom, Trust, WheelSource
from verl_setup.matrix.wheel_seen import SeenSource, wheel_key, world_of
from verl_setup.util.bounded import one_line
from verl_setup.util.versions import minor_of, parse_minor

ENV_VAR = "VERL_SETUP_WHEEL_SOURCES"


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """One source that says it serves the wheel: a release asset (its URL) or an index to look in."""

    source: str
    trust: Trust
    torch_from: TorchFrom
    url: str | None = None  # a release asset: the wheel itself
    index_url: str | None = None  # an index: where install looks the wheel up
    sha256: str | None = None
    cxx11abi: bool = True
    # The wheel's distribution when it is the whole project (ExtensionFacts.whole), replacing the
    # package and its companions; None: the package's own wheel (or, for a user's index, either).
    distribution: str | None = None
    reason: str


def user_sources(values: Sequence[str], env: Mapping[str, str]) -> tuple[WheelSource, ...]:
    """The user's sources: flags first, then the variable (comma-separated); each a folder, a
    file:// or an http(s):// URL of a PEP 503 index (or a flat folder of wheels)."""
    given = [*values, *(v.strip() for v in env.get(ENV_VAR, "").split(",") if v.strip())]
    out: list[WheelSource] = []
    for value in dict.fromkeys(given):
        out.append(
            WheelSource(
                id=f"user {_masked(value)}",  # R3: printed by plan, errors and --json; never its password
                kind="index",
                url=_as_url(value),
                torch_from="manifest",
                trust="user",
                evidence="given by the user (--wheel-source, wheel_sources in a config, the variable)",
            )
        )
    return tuple(out)


def _masked(value: str) -> str:
    from verl_setup.util.secrets import mask  # noqa: PLC0415  # its patterns only for a source given

    return mask(value)


def _shown(value: str) -> str:
    return one_line(_masked(value))


def _as_url(value: str) -> str:
    if "\n" in value or "\r" in value:
        raise BadInputError("--wheel-source: a line break in the value")
    scheme = urlsplit(value).scheme
    if scheme in ("http", "https"):
        return value.rstrip("/") + "/"
    if scheme == "file":
        path = Path(urlsplit(value).path)
    elif scheme == "":
        path = Path(value).expanduser().absolute()
    else:
        raise BadInputError(f"--wheel-source {_shown(value)!r}: not a folder, file:// or http(s):// URL")
    if not path.is_dir():
        raise BadInputError(f"--wheel-source {_shown(value)!r}: no such folder")
    if (path / "simple" / "index.html").is_file():  # a folder `wheelhouse build --out` made: its index
        path = path / "simple"
    return path.as_uri().rstrip("/") + "/"


def ordered_sources(rows_file: RowsFile, user: Sequence[WheelSource]) -> list[WheelSource]:
    """The user's sources, then the matrix's enabled ones (a rows file without any: every
    package's release assets, as before sources were data)."""
    listed = rows_file.wheel_sources or tuple(
        WheelSource(
            id=f"{name}-releases",
            kind="release-assets",
            packages=(name,),
            torch_from="file-name",
            trust="upstream",
            evidence=facts.source,
        )
        for name, facts in rows_file.torch_extensions.items()
        if facts.url is not None
    )
    return [*user, *(s for s in listed if s.enabled)]


def candidates(
    sources: Sequence[WheelSource],
    facts: ExtensionFacts,
    row: Row,
    *,
    name: str,
    version: str,
    python: str,
    glibc: str | None,
    seen: Mapping[str, SeenSource] | None = None,
) -> tuple[list[Candidate], list[str]]:
    """The sources that say they serve this wheel, in order, and why each other one does not.

    `seen`: what `matrix check` last found in each source; a wheel it found missing is not served."""
    found: list[Candidate] = []
    why_not: list[str] = []
    for source in sources:
        if source.kind == "release-assets":
            if name not in source.packages:
                continue
            wheel, why = wheel_for(facts, row, version, python, glibc, name=name)
            if wheel is None:
                why_not.append(f"{source.id}: {why}")
                continue
            url, sha256, abi, reason = wheel
            found.append(
                Candidate(
                    source=source.id,
                    trust=source.trust,
                    torch_from=source.torch_from,
                    url=url,
                    sha256=sha256,
                    cxx11abi=abi,
                    reason=f"{reason}, from {source.id}",
                )
            )
            continue
        if source.url is None:
            continue
        if not source.serves:  # a user's index: what it holds is read at install time
            found.append(
                Candidate(
                    source=source.id,
                    trust=source.trust,
                    torch_from=source.torch_from,
                    index_url=source.url,
                    reason=f"looked up in {source.id}",
                )
            )
            continue
        why = _served(source, row, name=name, version=version, python=python, glibc=glibc)
        whole = facts.whole
        if why and whole is not None:
            why_whole = _served(source, row, name=whole, version=version, python=python, glibc=glibc)
            if not why_whole:
                gone, note = last_check(
                    (seen or {}).get(source.id), row, name=whole, version=version, python=python
                )
                if gone:
                    why_not.append(f"{source.id}: {gone}")
                    continue
                candidate = whole_candidate(source, source.url, row, facts, name=name, version=version)
                found.append(replace(candidate, reason=f"{candidate.reason} ({note})"))
                continue
            why = f"{why}; {why_whole}"
        if not why:
            why, note = last_check(
                (seen or {}).get(source.id), row, name=name, version=version, python=python
            )
        if why:
            why_not.append(f"{source.id}: {why}")
            continue
        found.append(
            Candidate(
                source=source.id,
                trust=source.trust,
                torch_from=source.torch_from,
                index_url=index_url(source.url, row),
                reason=(
                    f"prebuilt for torch {torch_minor(row)}, CUDA {row.torch.cuda}, from {source.id} ({note})"
                ),
            )
        )
    return found, why_not


def last_check(seen: SeenSource | None, row: Row, *, name: str, version: str, python: str) -> tuple[str, str]:
    """(why the source no longer serves the wheel, "" if it may; what to say of its last check),
    from `matrix check`'s record of the row's world."""
    world = world_of(row.torch.cuda, torch_minor(row))
    if seen is None:
        return "", f"{world} never checked: `verl-setup matrix check --record` looks"
    wheel = seen.wheels.get(wheel_key(world, name, version, python, row.requires.arch[0]))
    if wheel is not None and wheel.status == "missing":
        last = f"last seen {wheel.last_seen}" if wheel.last_seen else "never seen there"
        return (
            f"{world} had no {name} {version} for Python {minor_of(python)} on "
            f"{row.requires.arch[0]} when last checked ({seen.checked}; {last})",
            "",
        )
    return "", f"{world} last checked {seen.checked}"


def whole_candidate(
    source: WheelSource, url: str, row: Row, facts: ExtensionFacts, *, name: str, version: str
) -> Candidate:
    """A source's wheel of the whole project (TransformerEngine in one wheel) for the package."""
    return Candidate(
        source=source.id,
        trust=source.trust,
        torch_from=source.torch_from,
        index_url=index_url(url, row),
        distribution=facts.whole,
        reason=(
            f"{facts.whole} {version} prebuilt for torch {torch_minor(row)}, CUDA {row.torch.cuda} "
            f"from {source.id}: {replaced(facts, name, row)}"
        ),
    )


def replaced(facts: ExtensionFacts, name: str, row: Row) -> str:
    """ "the whole transformer-engine in one wheel, in place of transformer-engine,
    transformer-engine-cu13, transformer-engine-torch" (the row's packages it replaces)."""
    names = [*(c for c in facts.companions if c in row.packages), name]
    return f"the whole {facts.whole} in one wheel, in place of {', '.join(dict.fromkeys(names))}"


def torch_minor(row: Row) -> str:
    """ "2.11" of torch 2.11.0+cu130."""
    return minor_of(row.torch.version)


def index_url(pattern: str, row: Row) -> str:
    """An index URL pattern filled in for the row: {cuda_tag} cu130, {torch_minor} 2.11."""
    cuda = row.torch.cuda or ""
    return pattern.format(cuda_tag="cu" + minor_of(cuda).replace(".", ""), torch_minor=torch_minor(row))


def _served(source: WheelSource, row: Row, *, name: str, version: str, python: str, glibc: str | None) -> str:
    """ "" when one of the source's build sets holds the wheel, else why none does."""
    minor = minor_of(python)
    arch = row.requires.arch[0]
    reasons = []
    for served in source.serves:
        if version not in served.packages.get(name, ()):
            reasons.append(f"no {name} {version}")
        elif torch_minor(row) not in served.torch:
            reasons.append(f"no build for torch {torch_minor(row)}")
        elif row.torch.cuda not in served.cuda:
            reasons.append(f"no build for CUDA {row.torch.cuda}")
        elif minor not in served.python or arch not in served.arch:
            reasons.append(f"no build for Python {minor} on {arch}")
        elif glibc is not None and parse_minor(glibc, "glibc") < parse_minor(served.glibc, "glibc"):
            reasons.append(f"its wheels need glibc >= {served.glibc}, the target has {glibc}")
        else:
            return ""
    return "; ".join(dict.fromkeys(reasons)) or f"serves no {name}"


LOCAL_LABEL = re.compile(r"\+cu(?P<cuda>\d+)torch(?P<torch>\d+\.\d+)")


def torch_in_name(filename: str) -> str | None:
    """The torch minor a wheel's local version label names (+cu130torch2.11, +cu12torch2.8...)."""
    found = LOCAL_LABEL.search(filename)
    return found["torch"] if found else None


def wheel_for(  # noqa: PLR0911  # one return per reason a wheel does not fit
    facts: ExtensionFacts | None,
    row: Row,
    version: str,
    python: str,
    glibc: str | None,
    *,
    name: str = "flash-attn",
) -> tuple[tuple[str, str | None, bool, str] | None, str]:
    """((url, sha256, cxx11abi, reason), "") for a matching prebuilt wheel, else (None, why not)."""
    if facts is None or facts.url is None:
        return None, f"the matrix lists no prebuilt {name} wheels"
    release = facts.releases.get(version)
    torch_minor = minor_of(row.torch.version)
    cuda_major = row.torch.cuda.split(".")[0] if row.torch.cuda else None
    arch = row.requires.arch[0]
    if release is None:
        return None, f"{name} {version} published no prebuilt wheels known to the matrix"
    if torch_minor not in release.torch:
        return None, f"{name} {version} published no wheel for torch {torch_minor}"
    if cuda_major is None or cuda_major not in release.cuda_majors:
        return None, f"{name} {version} published no wheel for CUDA {cuda_major}"
    if arch not in release.arch:
        return None, f"{name} {version} published no {arch} wheel"
    minor = minor_of(python)
    if minor not in release.python:
        return None, f"{name} {version} published no wheel for Python {minor}"
    if glibc is not None and parse_minor(glibc, "glibc") < parse_minor(release.glibc, "glibc"):
        return None, f"its prebuilt wheels need glibc >= {release.glibc} and the target has {glibc}"
    abi = Version(torch_minor) >= Version(facts.cxx11abi_from_torch)
    py = "cp" + minor_of(python).replace(".", "")
    url = facts.url.format(
        version=version,
        cuda_major=cuda_major,
        torch_minor=torch_minor,
        torch_version=row.torch.version,
        abi=str(abi).upper(),
        py=py,
        arch=arch,
    )
    sha256 = facts.sha256.get(url.rsplit("/", 1)[-1])
    reason = f"prebuilt for torch {torch_minor}, CUDA {cuda_major}, {py}, C++11 ABI {str(abi).upper()}"
    return (url, sha256, abi, reason), ""
