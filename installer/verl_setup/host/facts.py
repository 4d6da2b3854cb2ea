"""HostFacts: what detection found, every fact with its source; JSON in and out (schema 2).

Schema 2 added `accelerators` (Ascend NPUs, AMD GPUs); a schema-1 file still loads, with none."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from verl_setup.errors import BadInputError
from verl_setup.util.bounded import MAX_DEPTH, BoundError, depth, one_line, read_capped
from verl_setup.util.databuild import Builder
from verl_setup.util.vocab import HostKindName

SCHEMA = 2
READABLE_SCHEMAS = (1, 2)

ContainerKind = Literal["none", "docker", "podman", "k8s", "other"]
# Accelerators other than NVIDIA's, by the platform verl names them after (verl/plugin/platform).
AcceleratorFamily = Literal["ascend", "rocm"]


@dataclass(frozen=True, kw_only=True)
class OsFacts:
    """Distribution, kernel, C library and CPU architecture; `source` names each fact's source."""

    distro: str | None
    distro_version: str | None
    kernel: str
    glibc: str | None
    arch: str
    source: str
    codename: str | None = None  # a host file written before the codename and ID_LIKE were read has neither
    like: tuple[str, ...] = ()  # os-release's ID_LIKE: the distributions this one is derived from


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
    # PCI device id (four hex digits, vendor 0x10de): names the chip, so the compute
    # capability does not hang on a product-name pattern (matrices/gpus.yaml).
    pci_device_id: str | None = None
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
class HostKind:
    """What sort of NVIDIA host this is: its driver numbers mean different things on each.

    linux: a discrete GPU under the Linux driver. wsl: the Windows driver seen through WSL 2
    (its version is compared with NVIDIA's Windows table). jetson: an integrated GPU under L4T,
    whose release number is no discrete-GPU driver at all.
    """

    kind: HostKindName
    evidence: str
    release: str | None = None  # Jetson: the L4T release (35.3.1)


@dataclass(frozen=True, kw_only=True)
class AcceleratorDevice:
    """One Ascend NPU chip or AMD GPU, as its own tool (or KFD) reports it."""

    index: int
    name: str
    # The target the software stack is built for: Ascend's chip name (910B3) or AMD's gfx target.
    chip: str | None
    bus_id: str | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    source: str


@dataclass(frozen=True, kw_only=True)
class Accelerator:
    """A non-NVIDIA accelerator family on this host: its devices, driver and toolkit, each with its source.

    `toolkit` is CANN on Ascend and ROCm on AMD; `pci_devices` counts the vendor's accelerator
    functions in sysfs (0x19e5 / 0x1002), which still shows hardware when no tool answers."""

    family: AcceleratorFamily
    devices: tuple[AcceleratorDevice, ...]
    driver: str | None = None
    driver_source: str | None = None
    tool_version: str | None = None  # npu-smi's own version line
    toolkit: str | None = None
    toolkit_version: str | None = None
    toolkit_source: str | None = None
    pci_devices: int = 0
    source: str

    @property
    def count(self) -> int:
        """Devices a tool listed, else the PCI functions sysfs shows."""
        return len(self.devices) or self.pci_devices


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
    host_kind: HostKind = field(default_factory=lambda: HostKind(kind="linux", evidence="default"))
    # The training backend the node is for: detection cannot see it, a saved host file may say it.
    backend: str | None = None
    accelerators: tuple[Accelerator, ...] = ()

    def to_json(self) -> str:
        """Serialise as the documented `detect --json` object."""
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=False) + "\n"


MAX_HOST_FILE = 4 * 2**20  # a `detect --json` is a few KB


def load_host_file(path: Path) -> HostFacts:
    """Read a saved `detect --json`; BadInputError names the file and the bad key.

    Bounded before it is parsed: a regular file (a FIFO would hang, /dev/zero fill memory) of at
    most MAX_HOST_FILE bytes, nested at most MAX_DEPTH deep, numbers within int()'s limit."""
    return host_from_data(read_json_file(path, MAX_HOST_FILE, "host file"), str(path))


def read_json_file(path: Path, cap: int, what: str) -> object:
    """A JSON file read bounded (a regular file of at most `cap` bytes, MAX_DEPTH deep, numbers
    int() can take); BadInputError naming `what` and the file otherwise."""
    shown = repr(one_line(str(path)))
    try:
        raw = read_capped(path, cap, what)
    except BoundError as exc:
        raise BadInputError(str(exc)) from exc
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError, or a 5000-digit number
        raise BadInputError(f"{what} {shown} is not JSON we can use: {one_line(str(exc))}") from exc
    except RecursionError as exc:
        raise BadInputError(f"{what} {shown} is nested too deeply") from exc
    if depth(data) > MAX_DEPTH:
        raise BadInputError(f"{what} {shown} is nested deeper than {MAX_DEPTH} levels")
    return data


def host_from_data(data: object, where: str) -> HostFacts:
    """A parsed `detect --json` object as HostFacts (a host file's, or one node's of a cluster file)."""
    shown = repr(one_line(where))
    if not isinstance(data, dict):
        raise BadInputError(f"host file {shown}: expected a JSON object")
    doc: dict[str, Any] = data
    if doc.get("command") == "detect" and isinstance(doc.get("data"), dict):
        doc = doc["data"]  # `detect --json` as printed (the envelope); the bare object also works
    if doc.get("schema") not in READABLE_SCHEMAS:
        raise BadInputError(
            f"host file {shown}: schema {one_line(repr(doc.get('schema')))} is not one of "
            f"{', '.join(map(str, READABLE_SCHEMAS))} "
            "(make it with `verl-setup detect --json`)"
        )
    builder = Builder(where)
    facts = builder.build(HostFacts, doc, "", 0)
    if facts is None:
        raise BadInputError(f"host file {one_line(builder.problems[0])}")
    return dataclasses.replace(
        facts, schema=SCHEMA
    )  # a schema-1 file is read as schema 2 with no accelerators
