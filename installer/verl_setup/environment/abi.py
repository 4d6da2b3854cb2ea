"""Do the compiled torch extensions in an environment fit the torch installed there? No GPU, no import.

Each extension's ELF dynamic symbol table is read: the torch symbols it leaves undefined must be
exported by one of torch's own libraries (libc10, libtorch_cpu, libtorch_python, ...), and the
CUDA runtime it NEEDs must be torch's CUDA major. A wheel built against another torch fails here in
one line naming both torches, instead of at import as `undefined symbol: _ZN3c10...`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from verl_setup.environment.owners import Owner, Owners, metadata_version
from verl_setup.scripts import script_path
from verl_setup.util.elf import ElfError, SharedObject, is_elf
from verl_setup.util.runner import ProgramError, run
from verl_setup.util.versions import minor_of

MAX_FILES = 50_000  # files walked per site-packages folder; a verl env has ~40k
MAX_DEPTH = 12
MAX_SHOWN = 3  # missing symbols named in the one-line message
# torch's shared libraries (their SONAMEs): an object NEEDing one of them is a torch extension.
TORCH_SONAMES = frozenset(
    (
        "libc10.so",
        "libc10_cuda.so",
        "libtorch.so",
        "libtorch_cpu.so",
        "libtorch_cuda.so",
        "libtorch_python.so",
    )
)
# Mangled names of torch's C++ namespaces (c10, at, torch, caffe2) and torch's THP C API, at the
# start of a nested name or of a source name: what only torch's libraries can define.
_TORCH_SYMBOL = re.compile(
    r"^_Z(?:T[VIS]|Th[n0-9]+_|Tv[n0-9_]+_)?(?:N[VKRO]*)?(?:3c10|2at|5torch|6caffe2|\d+THP)"
)
_PY_TAG = re.compile(r"\.cpython-(3\d+)-")
_NAME_TORCH = re.compile(r"torch(\d)\.?(\d{1,2})(?![0-9])")
_CUDART = re.compile(r"^libcudart\.so\.(\d+)")
# torch minors in a wheel's local version label: flash-attn's `+cu12torch2.6cxx11abiFALSE`,
# community builds' `+cu128torch2.9`, `+pt211cu130`.
_LABEL_TORCH = (re.compile(r"torch(\d+)\.(\d+)"), re.compile(r"(?:^|[.a-z])pt(\d)(\d{1,2})(?![0-9])"))
_VERSION_CUDA = re.compile(r"^cuda\s*(?::[^=\n]*)?=\s*['\"]([0-9.]+)['\"]", re.MULTILINE)
# c10::detail::torchCheckFail(const char*, const char*, unsigned, const std::string&) under each
# C++ ABI: which one libc10 exports says which ABI torch was built with.
_CHECK_FAIL = {
    True: "_ZN3c106detail14torchCheckFailEPKcS2_jRKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE",
    False: "_ZN3c106detail14torchCheckFailEPKcS2_jRKSs",
}
Kind = Literal["torch-symbols", "cuda-runtime", "unreadable"]


@dataclass(frozen=True, kw_only=True)
class Torch:
    """The torch installed in one site-packages folder, as its files say."""

    version: str
    cuda: str | None  # torch.version.cuda, e.g. "13.0"; None for a CPU build
    cxx11abi: bool | None  # whether libc10 exports C++11-ABI (std::__cxx11) names
    lib: Path

    @property
    def cuda_major(self) -> int | None:
        """The CUDA major torch was built with, or None for a CPU build."""
        return int(self.cuda.split(".")[0]) if self.cuda else None

    def describe(self) -> str:
        """`torch 2.11.0 (CUDA 13.0)`."""
        return f"torch {self.version} ({'CUDA ' + self.cuda if self.cuda else 'CPU'})"


@dataclass(frozen=True, kw_only=True)
class AbiFinding:
    """One compiled extension that does not fit the installed torch, with its one-line message."""

    kind: Kind
    file: Path
    distribution: str | None
    built_torch: str | None  # what the build was for, where a record, a version label or the ABI says
    installed_torch: str
    missing: tuple[str, ...] = ()  # torch symbols it needs that no torch library exports
    cuda_needed: int | None = None
    torch_cuda: int | None = None
    message: str

    def to_json(self) -> dict[str, Any]:
        """The finding as plain data (paths as strings)."""
        data = dataclasses.asdict(self)
        return {**data, "file": str(self.file), "missing": list(self.missing)}


@dataclass(frozen=True, kw_only=True)
class AbiReport:
    """What the check read and found in one environment."""

    site_packages: tuple[Path, ...]
    torch: Torch | None
    checked: tuple[Path, ...] = ()
    findings: tuple[AbiFinding, ...] = ()
    seconds: float = 0.0
    notes: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        """True when no extension failed the check."""
        return not self.findings

    def to_json(self) -> dict[str, Any]:
        """The report as plain data."""
        return {
            "ok": self.ok,
            "site_packages": [str(p) for p in self.site_packages],
            "torch": None
            if self.torch is None
            else {"version": self.torch.version, "cuda": self.torch.cuda, "cxx11abi": self.torch.cxx11abi},
            "checked": [str(p) for p in self.checked],
            "findings": [f.to_json() for f in self.findings],
            "seconds": round(self.seconds, 3),
            "notes": list(self.notes),
        }


def check_environment(target: Path) -> AbiReport:
    """Check every compiled torch extension of an environment (its interpreter or a site-packages folder)."""
    return check_site_packages(site_packages_of(target))


def site_packages_of(target: Path) -> tuple[Path, ...]:
    """The site-packages folders of an interpreter (a venv's are found without running it)."""
    if target.is_dir():
        return (target,)
    root = target.parent.parent
    if (root / "pyvenv.cfg").is_file():
        found = sorted({p.resolve() for p in root.glob("lib*/python3*/site-packages") if p.is_dir()})
        if found:
            return tuple(found)
    try:
        done = run(
            [str(target), str(script_path("site_packages"))],
            timeout=30,
        )
        folders = json.loads(done.stdout) if done.returncode == 0 else []
    except (ProgramError, ValueError):
        folders = []
    return tuple(Path(f) for f in folders if Path(f).is_dir())


def check_site_packages(folders: Sequence[Path]) -> AbiReport:
    """Check the compiled torch extensions found in `folders` against the torch found there."""
    started = time.monotonic()
    torch = next((t for t in map(installed_torch, folders) if t is not None), None)
    if torch is None:
        return AbiReport(
            site_packages=tuple(folders),
            torch=None,
            seconds=time.monotonic() - started,
            notes=("no torch installed: nothing to check",),
        )
    with contextlib.ExitStack() as stack:
        libs = []
        for path in sorted(torch.lib.glob("*.so*")):
            with contextlib.suppress(ElfError):
                libs.append(stack.enter_context(SharedObject(path)))
        checked, findings = [], []
        owners = Owners(folders)
        skipped = 0
        for path in _candidates(folders, torch):
            if _other_variant(path, torch):
                skipped += 1  # loaded only by the Python or torch its name says (a per-version build)
                continue
            try:
                with SharedObject(path) as obj:
                    if not _is_torch_extension(obj):
                        continue
                    checked.append(path)
                    findings.extend(_check_one(path, obj, torch, libs, owners))
            except ElfError as exc:
                if path.suffix == ".so" or ".so." in path.name:
                    findings.append(_unreadable(path, torch, owners, str(exc)))
    return AbiReport(
        site_packages=tuple(folders),
        torch=torch,
        checked=tuple(checked),
        findings=tuple(findings),
        seconds=time.monotonic() - started,
        notes=(f"{skipped} builds for another Python or torch left out (their names say which)",)
        if skipped
        else (),
    )


def check_wheel(wheel: Path, site_packages: Path) -> AbiReport:
    """Check a wheel's compiled extensions against the torch in `site_packages` before installing it."""
    import tempfile  # noqa: PLC0415
    import zipfile  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="verl-setup-abi-") as tmp:
        unpacked = Path(tmp)
        try:
            with zipfile.ZipFile(wheel) as archive:
                for member in archive.namelist():
                    if ".dist-info/" in member or ".so" in member.rsplit("/", 1)[-1]:
                        archive.extract(member, unpacked)  # zipfile keeps members inside `unpacked`
        except (OSError, zipfile.BadZipFile) as exc:
            raise ElfError(f"{wheel.name}: not a readable wheel ({exc})") from exc
        report = check_site_packages([site_packages, unpacked])
        inside = tuple(p for p in report.checked if unpacked in p.parents)
        findings = tuple(f for f in report.findings if unpacked in f.file.parents)
        return dataclasses.replace(
            report,
            checked=tuple(Path(wheel.name) / p.relative_to(unpacked) for p in inside),
            findings=tuple(
                dataclasses.replace(f, file=Path(wheel.name) / f.file.relative_to(unpacked)) for f in findings
            ),
        )


def installed_torch(site_packages: Path) -> Torch | None:
    """The torch in `site_packages` (its dist-info, version.py and libc10), or None."""
    package = site_packages / "torch"
    lib = package / "lib"
    infos = sorted(site_packages.glob("torch-*.dist-info"))
    if not lib.is_dir() or not infos:
        return None
    version = metadata_version(infos[-1]) or infos[-1].name[len("torch-") : -len(".dist-info")]
    cuda = None
    with contextlib.suppress(OSError):
        match = _VERSION_CUDA.search((package / "version.py").read_text(errors="replace"))
        cuda = match.group(1) if match else None
    cxx11abi = None
    with contextlib.suppress(ElfError), SharedObject(lib / "libc10.so") as c10:
        found = c10.defines(_CHECK_FAIL.values())
        cxx11abi = True if _CHECK_FAIL[True] in found else False if _CHECK_FAIL[False] in found else None
    return Torch(version=version, cuda=cuda, cxx11abi=cxx11abi, lib=lib)


def _candidates(folders: Sequence[Path], torch: Torch) -> Iterator[Path]:
    """Shared objects below `folders`, torch's own package left out, bounded in count and depth.

    One scandir per folder (its entries carry their type, so no stat per file): site-packages
    holds tens of thousands of files, and this walk runs on every install and verify."""
    own = str(torch.lib.parent.resolve())
    seen = 0
    for folder in folders:
        # Symlinks are never followed, so below a real folder every path is already a real one.
        stack = [(os.path.realpath(folder), 0)]
        while stack:
            current, depth = stack.pop()
            try:
                with os.scandir(current) as found:
                    entries = list(found)
            except OSError:
                continue
            seen += len(entries)
            if seen > MAX_FILES:
                return
            # Only the few folders and shared objects are sorted (the walk's order stays the same).
            below: list[str] = []
            objects: list[str] = []
            for entry in entries:
                if entry.is_symlink():
                    continue
                if entry.is_dir(follow_symlinks=False):
                    if depth < MAX_DEPTH and entry.path != own and not entry.name.endswith(".dist-info"):
                        below.append(entry.path)
                elif entry.name.endswith(".so") or ".so." in entry.name:
                    objects.append(entry.path)
            stack.extend((path, depth + 1) for path in sorted(below))
            yield from (Path(p) for p in sorted(objects) if is_elf(Path(p)))


def _other_variant(path: Path, torch: Torch) -> bool:
    """A file named for another CPython (`.cpython-310-`) or torch (`_torch24-`) than installed."""
    python = next(
        (p.name[len("python") :].replace(".", "") for p in path.parents if p.name.startswith("python3")), None
    )
    py_tag = _PY_TAG.search(path.name)
    if python and py_tag and py_tag.group(1) != python:
        return True
    torch_tag = _NAME_TORCH.search(path.name)
    return torch_tag is not None and torch_tag.group(1, 2) != tuple(minor_of(torch.version).split("."))


def _is_torch_extension(obj: SharedObject) -> bool:
    return any(name in TORCH_SONAMES for name in obj.needed) or obj.mentions(b"_ZN3c10")


def _check_one(
    path: Path, obj: SharedObject, torch: Torch, libs: Sequence[SharedObject], owners: Owners
) -> list[AbiFinding]:
    findings: list[AbiFinding] = []
    wanted = {name for name in obj.undefined() if _TORCH_SYMBOL.match(name)}
    for lib in libs:
        if not wanted:
            break
        wanted -= lib.defines(wanted)
    missing = tuple(sorted(wanted))
    majors = {int(m.group(1)) for n in obj.needed if (m := _CUDART.match(n))}
    if not missing and majors <= {torch.cuda_major}:
        return findings  # the owner (every RECORD read) is only needed to name a finding
    owner = owners.of(path)
    if missing:
        built = _built_torch(owner, missing, torch)
        shown = ", ".join(missing[:MAX_SHOWN]) + (
            f" and {len(missing) - MAX_SHOWN} more" if len(missing) > MAX_SHOWN else ""
        )
        plural = len(missing) > 1
        findings.append(
            AbiFinding(
                kind="torch-symbols",
                file=path,
                distribution=owner.name if owner else None,
                built_torch=built,
                installed_torch=torch.describe(),
                missing=missing,
                message=(
                    f"{_name(path, owner)} was built against {built or 'another torch'}, "
                    f"this environment has {torch.describe()}: {len(missing)} torch "
                    f"symbol{'s' if plural else ''} it needs {'are' if plural else 'is'} missing "
                    f"({shown}); rebuild it against torch {torch.version}"
                ),
            )
        )
    for major in sorted(majors - {torch.cuda_major}):
        built = owner.record.get("torch") if owner else None
        findings.append(
            AbiFinding(
                kind="cuda-runtime",
                file=path,
                distribution=owner.name if owner else None,
                built_torch=str(built) if built else None,
                installed_torch=torch.describe(),
                cuda_needed=major,
                torch_cuda=torch.cuda_major,
                message=(
                    f"{_name(path, owner)} needs the CUDA {major} runtime (libcudart.so.{major}), "
                    f"this environment has {torch.describe()}; "
                    f"rebuild it for CUDA {torch.cuda or 'none (a CPU torch)'}"
                ),
            )
        )
    return findings


def _unreadable(path: Path, torch: Torch, owners: Owners, reason: str) -> AbiFinding:
    owner = owners.of(path)
    return AbiFinding(
        kind="unreadable",
        file=path,
        distribution=owner.name if owner else None,
        built_torch=None,
        installed_torch=torch.describe(),
        message=f"{_name(path, owner)} cannot be read as a shared object ({reason}); reinstall it",
    )


def _name(path: Path, owner: Owner | None) -> str:
    return f"{path.name} ({owner.name} {owner.version})" if owner else str(path)


def _built_torch(owner: Owner | None, missing: Sequence[str], torch: Torch) -> str | None:
    """The torch the build was for: its build record, its version label, else what its ABI shows."""
    if owner is not None:
        recorded = owner.record.get("torch")
        if isinstance(recorded, str) and recorded:
            return f"torch {recorded}"
        local = owner.version.partition("+")[2].lower()
        for pattern in _LABEL_TORCH:
            if match := pattern.search(local):
                return f"torch {match.group(1)}.{match.group(2)} (its version label +{local})"
    if (
        torch.cxx11abi
        and not any("St7__cxx11" in name for name in missing)
        and any("Ss" in name for name in missing)
    ):
        return "a torch with the pre-C++11 ABI (PyPI's torch before 2.7, or a cxx11abiFALSE build)"
    return None
