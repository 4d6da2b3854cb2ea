"""Does an environment (or every node of a Ray cluster) hold what the row, manifest or lock say? Versions
from importlib.metadata in a child (nothing heavy imported); then a real `import verl` probe."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from packaging.markers import InvalidMarker, Marker
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from verl_setup.environment.abi import AbiReport, check_site_packages
from verl_setup.environment.closure_state import closure_json, closure_notes
from verl_setup.environment.import_probe import ProbeResult
from verl_setup.environment.lock import Lock
from verl_setup.errors import BadInputError, CheckFailedError
from verl_setup.host.interpreter import Answer, NoAnswer, answer_from, ask
from verl_setup.util.versions import minor_of
from verl_setup.util.vocab import ROLLOUT_ENGINES

MANIFEST = "verl-setup.json"
PROBE_TIMEOUT_S = 120.0
# verl's install docs warn that these get replaced behind its back by other installs.
WATCHED = frozenset(("torch", "vllm", "sglang", "tensordict", "pyarrow", "nvidia-cudnn-cu12"))
ENGINES = frozenset(ROLLOUT_ENGINES)
# Distributions that install the same top-level module: the last one installed wins.
CONFLICTS = (
    ("opencv-python", "opencv-python-headless", "opencv-contrib-python", "opencv-contrib-python-headless"),
    ("pynvml", "nvidia-ml-py"),
)
# Releases from which a distribution no longer ships the shared module: pynvml >= 12 is a shim
# over nvidia-ml-py (its wheel holds pynvml_utils/ and a redirector, and requires nvidia-ml-py).
NO_LONGER_CONFLICTS = {"pynvml": Version("12")}
Kind = Literal["missing", "replaced", "changed", "harmful", "duplicate", "python", "unreachable"]

# What verify asks an interpreter (host/interpreter.py), here and in each Ray node's workers.
PROBE_PARTS = ("paths", "markers")


@dataclass(frozen=True, kw_only=True)
class Dist:
    """One installed distribution: canonical name, version, and the folder it was found in."""

    name: str
    version: str
    location: str


@dataclass(frozen=True, kw_only=True)
class Snapshot:
    """What one interpreter sees: its exact version, platform and distributions, in sys.path order."""

    python: str
    executable: str
    prefix: str
    platform: str
    hostname: str
    markers: dict[str, str]
    dists: tuple[Dist, ...]

    @classmethod
    def from_answer(cls, answer: Answer) -> Snapshot:
        """What the interpreter probe said, every distribution canonically named."""
        dists = tuple(
            Dist(name=canonicalize_name(d.name), version=d.version, location=d.location)
            for d in answer.distributions
        )
        return cls(
            python=answer.full_version,
            executable=answer.executable,
            prefix=str(answer.prefix),
            platform=str(answer.platform),
            hostname=str(answer.hostname),
            markers=answer.markers,
            dists=dists,
        )

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Snapshot:
        """From the probe function's own output (what a Ray node sends back)."""
        return cls.from_answer(answer_from(str(data.get("executable", "?")), data))

    def versions(self) -> dict[str, str]:
        """name -> version of the copy import would use (the first on sys.path)."""
        out: dict[str, str] = {}
        for d in self.dists:
            out.setdefault(d.name, d.version)
        return out

    def duplicates(self, editables: tuple[str, ...] = ()) -> dict[str, list[Dist]]:
        """Distributions installed more than once on sys.path: an editable checkout's own metadata is
        the same install, and Ray's vendored copies (ray/thirdparty_files) are its workers' alone."""
        seen: dict[str, list[Dist]] = {}
        mine = {Path(e).resolve() for e in editables}
        own = (d for d in self.dists if not d.location.rstrip("/").endswith("ray/thirdparty_files"))
        for d in (d for d in own if Path(d.location).resolve() not in mine):
            seen.setdefault(d.name, []).append(d)
        return {name: copies for name, copies in seen.items() if len(copies) > 1}


@dataclass(frozen=True, kw_only=True)
class Expected:
    """What should be installed, and whether that list is complete (lock, manifest) or the row's pins."""

    source: str
    pins: dict[str, str]
    complete: bool
    python: str | None = None
    closure: Mapping[str, Any] | None = None  # the manifest's closure record
    user: dict[str, str] = field(default_factory=dict)  # the user's packages: name -> where asked
    notes: tuple[str, ...] = ()  # environment/user_verify.py's warnings
    editables: tuple[str, ...] = ()  # the user's checkouts: their egg-info is no second copy


@dataclass(frozen=True, kw_only=True)
class Mismatch:
    """One difference that fails verification."""

    kind: Kind
    name: str
    expected: str | None = None
    found: str | None = None
    note: str = ""

    def line(self) -> str:
        """The finding as one aligned line of the diff."""
        if self.kind in ("replaced", "changed", "python"):
            what = f"{self.name} {self.expected} -> {self.found}"
        elif self.kind == "missing":
            what = f"{self.name} {self.expected}"
        else:
            what = f"{self.name} {self.found or ''}".rstrip()
        return f"  {self.kind:<11}{what}" + (f"  ({self.note})" if self.note else "")

    def to_json(self) -> dict[str, str | None]:
        """The finding as plain data."""
        return {
            "kind": self.kind,
            "name": self.name,
            "expected": self.expected,
            "found": self.found,
            "note": self.note,
        }


@dataclass(frozen=True, kw_only=True)
class Report:
    """The result of verifying one environment."""

    snapshot: Snapshot
    expected: Expected
    findings: tuple[Mismatch, ...]
    notes: tuple[str, ...]
    probe: ProbeResult | None = None
    abi: AbiReport | None = None  # the compiled torch extensions against the installed torch

    @property
    def import_ok(self) -> bool | None:
        """Whether the import probe passed (None: not run)."""
        return None if self.probe is None else self.probe.ok

    @property
    def import_detail(self) -> str:
        """The probe's one-line summary."""
        return "" if self.probe is None else self.probe.summary()

    @property
    def import_seconds(self) -> float | None:
        """How long the probe took."""
        return None if self.probe is None else self.probe.seconds

    @property
    def ok(self) -> bool:
        """No finding, and the smoke import (if run) worked."""
        return not self.findings and self.import_ok is not False and (self.abi is None or self.abi.ok)

    def summary(self) -> str:
        """One line for the error message."""
        kinds: dict[str, list[str]] = {}
        for f in self.findings:
            kinds.setdefault(f.kind, []).append(f.name)
        parts = [
            f"{len(v)} {k} ({', '.join(v[:4])}{', ...' if len(v) > 4 else ''})" for k, v in kinds.items()
        ]
        if self.abi is not None and self.abi.findings:
            parts.append(f"ABI check: {self.abi.findings[0].message}")
        if self.import_ok is False:
            parts.append(f"import probe failed: {self.import_detail}")
        return f"{self.snapshot.prefix} does not match {self.expected.source}: " + "; ".join(parts)

    def text(self) -> str:
        """The human-readable report."""
        s = self.snapshot
        lines = [f"verify {s.prefix} (Python {s.python}, {s.platform}) against {self.expected.source}"]
        lines += [f.line() for f in self.findings]
        lines += [f"  note       {n}" for n in self.notes]
        if self.abi is not None:
            lines += [f"  abi        {f.message}" for f in self.abi.findings]
            read, failed = len(self.abi.checked), len(self.abi.findings)
            lines.append(f"  ABI check: {read} compiled torch extensions read, {failed} failed")
        matched = sum(1 for n, v in self.expected.pins.items() if same_version(s.versions().get(n), v))
        lines.append(f"  {matched} of {len(self.expected.pins)} expected distributions match")
        text = "\n".join(lines) + "\n"
        return text if self.probe is None else text + self.probe.text()

    def to_json(self) -> dict[str, Any]:
        """The documented `verify --json` data (schemas/verify.json)."""
        s = self.snapshot
        return {
            "ok": self.ok,
            "prefix": s.prefix,
            "python": s.python,
            "platform": s.platform,
            "expected": {"source": self.expected.source, "complete": self.expected.complete},
            "findings": [f.to_json() for f in self.findings],
            "notes": list(self.notes),
            "distributions": dict(sorted(s.versions().items())),
            "import": None if self.probe is None else self.probe.to_json(),
            "abi": None if self.abi is None else self.abi.to_json(),
            "closure": closure_json(s.versions(), self.expected.closure),
        }


def same_version(found: str | None, expected: str) -> bool:
    """Equal as versions (2.11 == 2.11.0), but a local build label counts (2.11.0+cpu != 2.11.0)."""
    if found is None:
        return False
    try:
        return Version(found) == Version(expected)
    except InvalidVersion:
        return found == expected


def probe(python: Path, env: Mapping[str, str] | None = None) -> Snapshot:
    """Ask the interpreter what it has installed (no package is imported)."""
    try:
        answer = ask(
            python, timeout=PROBE_TIMEOUT_S, env=env, parts=PROBE_PARTS, distributions="*", tied=True
        )
    except NoAnswer as exc:
        raise CheckFailedError(str(exc)) from exc
    return Snapshot.from_answer(answer)


def last_line(text: str) -> str:
    """The last non-empty line (a traceback's exception line)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "no message"


def from_lock(lock: Lock, markers: Mapping[str, str]) -> Expected:
    """A lock's pins that apply to this interpreter (uv's environment markers evaluated)."""
    pins = {}
    for pin in lock.pins:
        try:
            applies = pin.marker is None or Marker(pin.marker).evaluate(dict(markers))
        except InvalidMarker as exc:
            raise BadInputError(f"{lock.path}: bad marker for {pin.name}: {exc}") from exc
        if applies:
            pins[pin.name] = pin.version
    return Expected(source=f"lock {lock.path.name}", pins=pins, complete=True, python=lock.python)


def from_requirements(source: str, requirements: list[str]) -> Expected:
    """A row's pins (`name[extras]==version` lines): only these are known."""
    pins = {str(canonicalize_name(r.split("==")[0].split("[")[0])): r.split("==")[1] for r in requirements}
    return Expected(source=source, pins=pins, complete=False)


def from_manifest(path: Path) -> Expected | None:
    """Everything install recorded in the environment's manifest, or None without one."""
    from verl_setup.environment.user_verify import user_editables, user_names, user_warnings  # noqa: PLC0415

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Expected(
            source=f"manifest {path} (row {data['row']['id']})",
            pins={str(canonicalize_name(k)): str(v) for k, v in data["distributions"].items()},
            complete=True,
            python=str(data["python"]["version"]),
            closure=data.get("closure"),
            user=user_names(data),
            notes=tuple(user_warnings(data)),
            editables=user_editables(data),
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BadInputError(f"{path}: unreadable verl-setup manifest ({exc})") from exc


def _shim(name: str, version: str) -> bool:
    since = NO_LONGER_CONFLICTS.get(name)
    try:
        return since is not None and Version(version) >= since
    except InvalidVersion:
        return False


def compare(snap: Snapshot, expected: Expected) -> tuple[list[Mismatch], list[str]]:
    """Findings (missing, replaced, harmful, duplicated) and notes for one environment."""
    have = snap.versions()
    findings: list[Mismatch] = []
    notes: list[str] = list(expected.notes)
    if expected.python and expected.python != snap.python:
        if minor_of(expected.python) == minor_of(snap.python):
            notes.append(f"Python {snap.python}, {expected.source} was made for {expected.python}")
        else:
            findings.append(
                Mismatch(kind="python", name="python", expected=expected.python, found=snap.python)
            )
    for name, want in sorted(expected.pins.items()):
        got = have.get(name)
        mine = f"your package ({expected.user[name]})" if name in expected.user else ""
        if got is None:
            findings.append(Mismatch(kind="missing", name=name, expected=want, note=mine))
        elif not same_version(got, want):
            watched = name in WATCHED
            note = "verl's docs warn about this one being replaced by other installs" if watched else mine
            kind: Kind = "replaced" if watched else "changed"
            findings.append(Mismatch(kind=kind, name=name, expected=want, found=got, note=note))
    extras = sorted(set(have) - set(expected.pins))
    for name in extras:
        if name in ENGINES or (expected.complete and name in WATCHED):
            findings.append(
                Mismatch(kind="harmful", name=name, found=have[name], note=f"not part of {expected.source}")
            )
    for group in CONFLICTS:
        present = [n for n in group if n in have and not _shim(n, have[n])]
        for name in present[1:] if len(present) > 1 else ():
            note = f"beside {present[0]}: both install the same module, the last one installed wins"
            findings.append(Mismatch(kind="harmful", name=name, found=have[name], note=note))
    for name, copies in sorted(snap.duplicates(expected.editables).items()):
        where = ", ".join(f"{d.version} in {d.location}" for d in copies)
        findings.append(
            Mismatch(
                kind="duplicate", name=name, found=copies[0].version, note=f"{len(copies)} copies: {where}"
            )
        )
    if extras and expected.complete:
        notes.append(f"{len(extras)} more distributions than {expected.source}: {', '.join(extras[:8])}")
    return findings, notes


def verify_env(
    python: Path,
    expected_for: Callable[[Snapshot], Expected],
    *,
    import_timeout: float | None,
    env: Mapping[str, str] | None = None,
    engine: str | None = None,
    gpu_only: Mapping[str, str] | None = None,
    left_out: Mapping[str, str] | None = None,
    known: Mapping[str, str] | None = None,
) -> Report:
    """List distributions, compare with `expected_for(snapshot)`, then run the import probe.

    The probe imports what a training run of the installed verl imports (import_probe.py);
    `import_timeout` None skips it. The engine is the row's, else the one installed.
    """
    from verl_setup.environment.import_probe import run_probe  # noqa: PLC0415

    # The ABI read (ELF files) runs while the child lists distributions; elsewhere, read again.
    guess = tuple(sorted(python.absolute().parent.parent.glob("lib/python*/site-packages")))
    with ThreadPoolExecutor(1) as pool:
        early = pool.submit(check_site_packages, guess)
        snap = probe(python, env)
        folders = tuple(dict.fromkeys(Path(d.location) for d in snap.dists if Path(d.location).is_dir()))
        abi = early.result() if set(folders) == set(guess) else check_site_packages(folders)
    expected = expected_for(snap)
    findings, notes = compare(snap, expected)
    notes += closure_notes(snap.versions(), expected.closure)
    if import_timeout is None:
        return Report(snapshot=snap, expected=expected, findings=tuple(findings), notes=tuple(notes), abi=abi)
    engine = engine or next((e for e in ROLLOUT_ENGINES if e in snap.versions()), "none")
    result = run_probe(python, engine, import_timeout, env, gpu_only=gpu_only, left_out=left_out, known=known)
    return Report(
        snapshot=snap, expected=expected, findings=tuple(findings), notes=tuple(notes), probe=result, abi=abi
    )


def target_python(prefix: Path | None, python: str | None, env: Mapping[str, str]) -> Path:
    """The interpreter to verify: --python, else --prefix, else $VIRTUAL_ENV, else ./.venv."""
    import shutil  # noqa: PLC0415

    if python is not None:
        found = python if "/" in python else shutil.which(python)
        if found is None or not Path(found).exists():
            raise BadInputError(f"no interpreter {python!r}")
        return Path(found)
    root = Path(prefix or env.get("VIRTUAL_ENV") or ".venv")
    exe = root / "bin" / "python"
    if not exe.exists():
        raise BadInputError(f"no environment at {root} (no bin/python): give --prefix PATH or --python EXE")
    return exe
