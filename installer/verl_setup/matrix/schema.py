"""Matrix row and CUDA-fact dataclasses (util/databuild.py builds them from YAML, reporting by key)."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from verl_setup.util.vocab import EngineName


@dataclass(frozen=True, kw_only=True)
class VerlPin:
    """verl itself: exact version and the extras to install it with (none = no engine extra)."""

    version: str
    extras: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Engine:
    """The rollout engine; name "none" only for rows without a GPU."""

    name: EngineName
    version: str | None


@dataclass(frozen=True, kw_only=True)
class PythonSpec:
    """Supported Python minors and the exact version to install."""

    supported: tuple[str, ...]
    recommended: str


@dataclass(frozen=True, kw_only=True)
class TorchPin:
    """torch: exact version, the CUDA its wheel was built with, and the index that serves it."""

    version: str
    cuda: str | None
    index: str


@dataclass(frozen=True, kw_only=True)
class DriverRequirement:
    """Minimum driver under each policy."""

    compat: str
    strict: str


@dataclass(frozen=True, kw_only=True)
class CcRange:
    """Inclusive compute-capability range every GPU must fall in."""

    min: str
    max: str


@dataclass(frozen=True, kw_only=True)
class Requires:
    """What the host must offer for a row to fit."""

    arch: tuple[str, ...]
    glibc: str
    cuda: str | None
    driver: DriverRequirement | None
    compute_capability: CcRange | None
    gpu: bool = True


@dataclass(frozen=True, kw_only=True)
class KnownIssue:
    """A reported problem shown as a warning (optionally only for some Python minors)."""

    summary: str
    source: str
    python: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Docker:
    """Container facts for rendering."""

    base_image: str


@dataclass(frozen=True, kw_only=True)
class Row:
    """One tested verl stack: exact pins, requirements, and the evidence for each."""

    id: str
    deprecated: bool = False
    verl: VerlPin
    engine: Engine
    python: PythonSpec
    torch: TorchPin
    packages: dict[str, str]
    overrides: tuple[str, ...] = ()
    requires: Requires
    docker: Docker | None = None
    evidence: dict[str, str]
    known_issues: tuple[KnownIssue, ...] = ()
    # Modules whose import needs an NVIDIA driver although it fails otherwise on a machine
    # without one (module -> why, with its source): the probe counts them as `gpu` there.
    gpu_only_imports: dict[str, str] = field(default_factory=dict)
    notes: str | None = None
    line: int = field(default=0, compare=False)

    def requirements(self) -> list[str]:
        """Every exact pin as a requirement line, verl first, in a stable order."""
        extras = f"[{','.join(self.verl.extras)}]" if self.verl.extras else ""
        lines = [f"verl{extras}=={self.verl.version}"]
        if self.engine.name != "none":
            lines.append(f"{self.engine.name}=={self.engine.version}")
        lines.append(f"torch=={self.torch.version}")
        lines.extend(f"{name}=={version}" for name, version in self.packages.items())
        return lines

    def to_dict(self) -> dict[str, Any]:
        """The row as plain data (what `plan --json` prints under "row")."""
        data = dataclasses.asdict(self)
        data.pop("line")
        data["hash"] = self.content_hash()
        return data

    @functools.cached_property
    def _hash(self) -> str:
        return self._content_hash()

    def content_hash(self) -> str:
        """sha256 of the row's canonical JSON (computed once: rows are frozen)."""
        return self._hash

    def _content_hash(self) -> str:
        """sha256 of the row's canonical JSON: changes whenever any pin or requirement does.

        Fields left at their default are left out, so a new optional field does not unprove
        every row (matrices/proof.yaml records proofs by this hash)."""
        data = _plain(self)
        data.pop("line")
        for f in dataclasses.fields(self):
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            if f.name in data and default is not dataclasses.MISSING and getattr(self, f.name) == default:
                data.pop(f.name)
        blob = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()


@dataclass(frozen=True, kw_only=True)
class IndexSpec:
    """An extra package index a row may name."""

    url: str
    note: str | None = None


@dataclass(frozen=True, kw_only=True)
class WheelRelease:
    """What one flash-attn release published prebuilt: torch minors, CUDA majors, platform floor."""

    torch: tuple[str, ...]
    cuda_majors: tuple[str, ...]
    python: tuple[str, ...]
    glibc: str
    arch: tuple[str, ...] = ("x86_64",)
    source: str


@dataclass(frozen=True, kw_only=True)
class FlashAttnFacts:
    """flash-attn must match torch, CUDA, C++ ABI and Python: prebuilt wheels, or a build on request."""

    url: str
    source: str
    cxx11abi_from_torch: str
    build_requires: tuple[str, ...]
    releases: dict[str, WheelRelease]
    sha256: dict[str, str] = field(default_factory=dict)
    without: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class RowsFile:
    """matrices/verl.yaml."""

    schema: int
    indexes: dict[str, IndexSpec] = field(default_factory=dict)
    flash_attn: FlashAttnFacts | None = None
    rows: tuple[Row, ...]


@dataclass(frozen=True, kw_only=True)
class DriverFloor:
    """A driver minimum and which table it came from."""

    min_driver: str
    source: str


@dataclass(frozen=True, kw_only=True)
class Architecture:
    """A compute capability's architecture and the first CUDA that targets it."""

    name: str
    first_cuda: str


@dataclass(frozen=True, kw_only=True)
class CudaFile:
    """matrices/cuda.yaml."""

    schema: int
    sources: dict[str, str]
    families: dict[str, DriverFloor]
    toolkits: dict[str, DriverFloor]
    architectures: dict[str, Architecture]
    windows_families: dict[str, DriverFloor] = field(default_factory=dict)  # WSL: the Windows driver


def _plain(value: Any) -> Any:
    """dataclasses.asdict without its deep copies (the hash of every row is read on each plan)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
