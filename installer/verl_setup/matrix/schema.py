"""Matrix row and CUDA-fact dataclasses, built from YAML with every problem reported by key."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from verl_setup.matrix.yamlread import LinedDict
from verl_setup.util.vocab import EngineName, suggest


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

    def content_hash(self) -> str:
        """sha256 of the row's canonical JSON: changes whenever any pin or requirement does."""
        data = dataclasses.asdict(self)
        data.pop("line")
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
class GpuPattern:
    """A GPU product-name pattern and its compute capability."""

    pattern: str
    compute_capability: str


@dataclass(frozen=True, kw_only=True)
class CudaFile:
    """matrices/cuda.yaml."""

    schema: int
    sources: dict[str, str]
    families: dict[str, DriverFloor]
    toolkits: dict[str, DriverFloor]
    architectures: dict[str, Architecture]
    gpus: tuple[GpuPattern, ...]


T = TypeVar("T")


class Builder:
    """Builds dataclasses from YAML data, collecting every problem with file, line and key."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.problems: list[str] = []

    def problem(self, line: int, where: str, message: str) -> None:
        """Record one problem."""
        self.problems.append(f"{self.file}:{line}: {where}: {message}")

    def build(self, cls: type[T], data: Any, where: str, line: int) -> T | None:
        """Build `cls` from a mapping, or record why not and return None."""
        if not isinstance(data, dict):
            self.problem(line, where, f"expected a mapping, got {_kind(data)}")
            return None
        lines = data.key_lines if isinstance(data, LinedDict) else {}
        line = data.line if isinstance(data, LinedDict) else line
        fields = {f.name: f for f in dataclasses.fields(cls) if f.name != "line"}  # type: ignore[arg-type]
        hints = _hints(cls)
        ok = True
        for key in data:
            if key not in fields:
                hint = suggest(key, fields)
                self.problem(lines.get(key, line), where, f"unknown key {key!r}{hint}")
                ok = False
        kwargs: dict[str, Any] = {}
        for name, f in fields.items():
            key_where = f"{where}.{name}" if where else name
            if name not in data:
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                    self.problem(line, where or "top level", f"missing key {name!r}")
                    ok = False
                continue
            value = self.convert(hints[name], data[name], key_where, lines.get(name, line))
            if value is _BAD:
                ok = False
            else:
                kwargs[name] = value
        if "line" in {f.name for f in dataclasses.fields(cls)}:  # type: ignore[arg-type]
            kwargs["line"] = line
        return cls(**kwargs) if ok else None

    def convert(self, hint: Any, value: Any, where: str, line: int) -> Any:  # noqa: PLR0911, PLR0912
        """Check one value against a type hint; return _BAD after recording a problem."""
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin in (typing.Union, types.UnionType):
            if value is None and type(None) in args:
                return None
            (inner,) = [a for a in args if a is not type(None)]
            return self.convert(inner, value, where, line)
        if origin is Literal:
            if value in args:
                return value
            hint_text = suggest(str(value), [str(a) for a in args])
            self.problem(line, where, f"{value!r} is not one of {', '.join(map(str, args))}{hint_text}")
            return _BAD
        if origin is tuple:
            if not isinstance(value, list):
                self.problem(line, where, f"expected a list, got {_kind(value)}")
                return _BAD
            items = [
                self.convert(args[0], v, f"{where}[{_label(v, i)}]", getattr(v, "line", line))
                for i, v in enumerate(value)
            ]
            return _BAD if _BAD in items else tuple(items)
        if origin is dict:
            if not isinstance(value, dict):
                self.problem(line, where, f"expected a mapping, got {_kind(value)}")
                return _BAD
            lines = value.key_lines if isinstance(value, LinedDict) else {}
            mapping = {
                str(k): self.convert(args[1], v, f"{where}.{k}", lines.get(k, line)) for k, v in value.items()
            }
            return _BAD if any(v is _BAD for v in mapping.values()) else mapping
        if dataclasses.is_dataclass(hint):
            built = self.build(hint, value, where, line)  # type: ignore[arg-type]
            return _BAD if built is None else built
        if hint is str:
            if isinstance(value, str):
                return value
            quoted = " (quote it: YAML reads 3.10 as the number 3.1)" if isinstance(value, float) else ""
            self.problem(line, where, f"expected a string, got {_kind(value)} {value!r}{quoted}")
            return _BAD
        if hint is bool and isinstance(value, bool):
            return value
        if hint is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        self.problem(line, where, f"expected {getattr(hint, '__name__', hint)}, got {_kind(value)}")
        return _BAD


_BAD: Any = object()


_HINTS: dict[type[Any], dict[str, Any]] = {}


def _hints(cls: type[Any]) -> dict[str, Any]:
    """Resolved field types of a dataclass, once (resolving them is the slow part of a load)."""
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _kind(value: Any) -> str:
    return {dict: "a mapping", LinedDict: "a mapping", list: "a list", type(None): "null"}.get(
        type(value), type(value).__name__
    )


def _label(item: Any, index: int) -> str:
    """Name list items by their id where they have one: rows[verl0.4-vllm0.8.5], not rows[14]."""
    if isinstance(item, dict) and isinstance(item.get("id"), str):
        return str(item["id"])
    return str(index)
