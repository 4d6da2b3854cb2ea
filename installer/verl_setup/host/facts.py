"""HostFacts: what detection found, every fact with its source; JSON in and out (schema 1)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from verl_setup.errors import BadInputError
from verl_setup.util.databuild import Builder

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
    # The training backend the node is for: detection cannot see it, a saved host file may say it.
    backend: str | None = None

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
    builder = Builder(str(path))
    facts = builder.build(HostFacts, data, "", 0)
    if facts is None:
        raise BadInputError(f"host file {builder.problems[0]}")
    return facts
