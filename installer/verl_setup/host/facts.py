"""HostFacts: what detection found, every fact with its source; JSON in and out (schema 1)."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from verl_setup.errors import BadInputError

SCHEMA = 1

ContainerKind = Literal["none", "docker", "podman", "k8s", "other"]


@dataclass(frozen=True, kw_only=True)
class OsFacts:
    """Distribution, kernel, C library and CPU architecture."""

    distro: str | None
    distro_version: str | None
    kernel: str
    glibc: str | None
    arch: str
    source: str


@dataclass(frozen=True, kw_only=True)
class Container:
    """Whether we run inside a container, and the evidence for it."""

    kind: ContainerKind
    evidence: str


@dataclass(frozen=True, kw_only=True)
class PythonInterpreter:
    """One interpreter: its exact version and whether `--version` agrees with the running library."""

    path: str
    version: str
    implementation: str
    version_flag: str | None
    libpython: str | None
    mismatch: str | None
    source: str


@dataclass(frozen=True, kw_only=True)
class NvidiaDriver:
    """The loaded NVIDIA kernel driver and the newest CUDA its user-mode driver reports."""

    version: str
    source: str
    cuda: str | None = None
    cuda_source: str | None = None


@dataclass(frozen=True, kw_only=True)
class GpuProcess:
    """A process holding GPU memory."""

    pid: int
    name: str
    used_mib: int | None


@dataclass(frozen=True, kw_only=True)
class Gpu:
    """One GPU as the driver reports it."""

    index: int
    name: str
    uuid: str | None
    compute_capability: str | None
    memory_total_mib: int | None
    memory_free_mib: int | None
    processes: tuple[GpuProcess, ...] = ()
    source: str


@dataclass(frozen=True, kw_only=True)
class CudaToolkit:
    """A CUDA toolkit on disk (nvcc present does not mean a GPU is present)."""

    path: str
    version: str | None
    on_path: bool
    source: str


@dataclass(frozen=True, kw_only=True)
class Tool:
    """An external program we may drive."""

    name: str
    path: str
    version: str | None


@dataclass(frozen=True, kw_only=True)
class HostFacts:
    """Everything detection found. No GPU is valid data: nvidia None, gpus ()."""

    schema: int = SCHEMA
    os: OsFacts
    container: Container
    pythons: tuple[PythonInterpreter, ...]
    nvidia: NvidiaDriver | None
    gpus: tuple[Gpu, ...]
    cuda_toolkits: tuple[CudaToolkit, ...]
    tools: tuple[Tool, ...]
    env: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def to_json(self) -> str:
        """Serialise as the documented `detect --json` object."""
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=False) + "\n"


def load_host_file(path: Path) -> HostFacts:
    """Read a saved `detect --json`; BadInputError names the file and the bad key."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BadInputError(f"cannot read host file {str(path)!r}: {exc.strerror}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadInputError(f"host file {str(path)!r} is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise BadInputError(f"host file {str(path)!r}: expected a JSON object")
    if data.get("schema") != SCHEMA:
        raise BadInputError(
            f"host file {str(path)!r}: schema {data.get('schema')!r} is not {SCHEMA} "
            "(make it with `verl-setup detect --json`)"
        )
    try:
        return _build(HostFacts, data, "")
    except _ShapeError as exc:
        raise BadInputError(f"host file {str(path)!r}: {exc}") from exc


class _ShapeError(Exception):
    pass


T = TypeVar("T")


def _build(cls: type[T], data: Any, where: str) -> T:
    """Construct dataclass `cls` from JSON data, checking every field's type."""
    if not isinstance(data, dict):
        raise _ShapeError(f"{where or 'top level'}: expected an object")
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]  # cls is a dataclass by contract
        key = f"{where}.{f.name}" if where else f.name
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise _ShapeError(f"{key}: missing")
            continue
        kwargs[f.name] = _convert(hints[f.name], data[f.name], key)
    unknown = set(data) - {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    if unknown:
        raise _ShapeError(f"{where or 'top level'}: unknown key {sorted(unknown)[0]!r}")
    return cls(**kwargs)


def _convert(hint: Any, value: Any, key: str) -> Any:  # noqa: PLR0911  # one branch per JSON shape
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _convert(inner, value, key)
    if origin is Literal:
        if value not in args:
            raise _ShapeError(f"{key}: {value!r} is not one of {', '.join(map(str, args))}")
        return value
    if origin is tuple:
        if not isinstance(value, list):
            raise _ShapeError(f"{key}: expected a list")
        return tuple(_convert(args[0], v, f"{key}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise _ShapeError(f"{key}: expected an object of strings")
        return dict(value)
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, key)  # type: ignore[arg-type]
    if hint is bool and isinstance(value, bool):
        return value
    if hint is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if hint is str and isinstance(value, str):
        return value
    raise _ShapeError(f"{key}: expected {getattr(hint, '__name__', hint)}, got {value!r}")
