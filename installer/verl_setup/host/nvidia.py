"""NVIDIA probes: sysfs, procfs, NVML (in a child process), nvidia-smi CSV, XML and banner.

Each probe reads one source and returns None when that source is absent, fails or prints
something we cannot read; only the caller decides what "no GPU" means.
"""

from __future__ import annotations

import csv
import io
import json
import re
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from verl_setup.host.facts import Gpu, GpuProcess, NvidiaDriver
from verl_setup.scripts import script_path
from verl_setup.util.bounded import BoundError, read_capped
from verl_setup.util.runner import Completed, ProgramError, run

SMI_TIMEOUT = 5.0
NVML_TIMEOUT = 8.0
MAX_PCI_DEVICES = 1024
MAX_OUTPUT = 4 * 2**20  # bytes of one nvidia-smi answer we read and parse (8 GPUs with processes: ~0.5 MB)
QUERY_FIELDS = "index,name,uuid,driver_version,memory.total,memory.free,compute_cap"

_VERSION = r"([0-9]{3,4}\.[0-9]{1,3}(?:\.[0-9]{1,3})?)"
_PROCFS_RE = re.compile(r"Kernel Module(?:\s+for\s+\S+)?\s+" + _VERSION)
# nvidia-smi's banner said "Driver Version:" / "CUDA Version:" up to R5xx; from R610 it says
# "KMD Version:" / "CUDA UMD Version:" (sgl-project/sglang#27487, vast-ai/base-image#244).
_BANNER_DRIVER_RE = re.compile(r"(?:Driver|KMD) Version:\s*" + _VERSION)
_BANNER_CUDA_RE = re.compile(r"CUDA(?: UMD)? Version:\s*(\d+\.\d+)")


@dataclass(frozen=True, kw_only=True)
class SmiReading:
    """What one nvidia-smi or NVML call told us."""

    driver: str | None
    cuda: str | None
    gpus: tuple[Gpu, ...]


def read_sysfs_version(root: Path) -> str | None:
    """/sys/module/nvidia/version holds just the loaded kernel module's version."""
    return _first_version(root / "sys/module/nvidia/version", re.compile(r"^\s*" + _VERSION))


def read_procfs_version(root: Path) -> str | None:
    """/proc/driver/nvidia/version: 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03 ...'."""
    return _first_version(root / "proc/driver/nvidia/version", _PROCFS_RE)


def read_sysfs_pci_devices(root: Path) -> tuple[str, ...]:
    """Device ids of the NVIDIA display and 3D controllers (class 0x0300/0x0302) in sysfs."""
    found = []
    try:
        entries = sorted((root / "sys/bus/pci/devices").iterdir())[:MAX_PCI_DEVICES]
    except OSError:
        return ()
    for entry in entries:
        vendor, klass, device = (_sysfs_word(entry / name) for name in ("vendor", "class", "device"))
        if vendor == "0x10de" and klass[:6] in {"0x0300", "0x0302"} and (pci := pci_device_id(device)):
            found.append(pci)
    return tuple(found)


def _sysfs_word(path: Path) -> str:
    try:
        with path.open("rb") as handle:  # sysfs attributes are tiny; read no more than a line
            return handle.read(64).decode("ascii", errors="replace").strip().lower()
    except OSError:
        return ""


def _first_version(path: Path, pattern: re.Pattern[str]) -> str | None:
    try:  # a few hundred bytes on a real host; capped, and never a FIFO
        text = read_capped(path, 64 * 1024, "driver version file").decode("utf-8", errors="replace")
    except BoundError:
        return None
    m = pattern.search(text)
    return m[1] if m else None


def parse_banner(text: str) -> tuple[str | None, str | None]:
    """Driver and CUDA version from the plain `nvidia-smi` table, old or R610+ wording."""
    driver = _BANNER_DRIVER_RE.search(text)
    cuda = _BANNER_CUDA_RE.search(text)
    return (driver[1] if driver else None, cuda[1] if cuda else None)


def _mib(text: str | None) -> int | None:
    if text is None:
        return None
    m = re.fullmatch(r"\s*([0-9]{1,12})(?:\s*MiB)?\s*", text)  # ASCII digits, at most 1 EiB
    return int(m[1]) if m else None


def _small_int(text: str | None) -> int | None:
    """An index, minor number or pid: ASCII digits, at most 10 of them."""
    m = re.fullmatch(r"\s*([0-9]{1,10})\s*", text or "")
    return int(m[1]) if m else None


def pci_device_id(text: str | None) -> str | None:
    """The 16-bit device id of an NVIDIA function, as four lower-case hex digits.

    nvidia-smi's XML writes device and vendor as one word, device first ("233010DE" is device
    0x2330 of vendor 0x10DE); sysfs' `device` file holds just "0x2330".
    """
    word = (text or "").strip().lower().removeprefix("0x")
    if re.fullmatch(r"[0-9a-f]{4}10de", word):
        return word[:4]
    return word if re.fullmatch(r"[0-9a-f]{4}", word) else None


def _clean(text: str | None) -> str | None:
    if text is None:
        return None
    text = text.strip()
    return None if not text or text.startswith("[") or text in {"N/A", "Not Supported"} else text


def _version_in(text: str | None, pattern: str) -> str | None:
    m = re.search(pattern, text or "")
    return m[1] if m else None


def parse_query_csv(text: str) -> SmiReading | None:
    """Parse `nvidia-smi --query-gpu=... --format=csv` (header required, units allowed)."""
    if len(text) > MAX_OUTPUT:
        return None
    try:
        rows = list(csv.reader(io.StringIO(text.strip()), skipinitialspace=True))
    except csv.Error:  # a field over csv's 128 KiB limit, a NUL byte: not nvidia-smi's output
        return None
    if len(rows) < 2:
        return None
    header = [re.sub(r"\s*\[.*\]$", "", h.strip()) for h in rows[0]]
    if "name" not in header:
        return None
    gpus: list[Gpu] = []
    drivers: set[str] = set()
    for number, row in enumerate(rows[1:]):
        if len(row) != len(header):
            return None
        cell = {h: _clean(v) for h, v in zip(header, row, strict=True)}
        index = _small_int(cell.get("index"))
        driver = _version_in(cell.get("kmd_version") or cell.get("driver_version"), _VERSION)
        if driver:
            drivers.add(driver)
        gpus.append(
            Gpu(
                index=number if index is None else index,
                name=cell["name"] or "unknown",
                uuid=cell.get("uuid"),
                compute_capability=cell.get("compute_cap"),
                memory_total_mib=_mib(cell.get("memory.total")),
                memory_free_mib=_mib(cell.get("memory.free")),
                source="nvidia-smi --query-gpu",
            )
        )
    return SmiReading(driver=sorted(drivers)[0] if drivers else None, cuda=None, gpus=tuple(gpus))


def parse_smi_xml(text: str) -> SmiReading | None:
    """Parse `nvidia-smi -q -x`: driver, CUDA, every <gpu> with memory and processes."""
    if len(text) > MAX_OUTPUT:
        return None
    try:
        # The local nvidia-smi's output, not the network's; expat >= 2.4 refuses entity bombs.
        root = ET.fromstring(text)  # noqa: S314
    except (ET.ParseError, ValueError, RecursionError):
        return None
    if root.tag != "nvidia_smi_log":
        return None
    # R610 deprecates driver_version/cuda_version in favour of kmd_version/cuda_umd_version and
    # suffixes the old values with "[Deprecated; ...]": prefer the new names, keep only the number.
    driver = _version_in(root.findtext("kmd_version") or root.findtext("driver_version"), _VERSION)
    cuda = _version_in(root.findtext("cuda_umd_version") or root.findtext("cuda_version"), r"(\d+\.\d+)")
    gpus = []
    for number, node in enumerate(root.findall("gpu")):
        processes = tuple(
            GpuProcess(
                pid=pid,
                name=(p.findtext("process_name") or "").strip(),
                used_mib=_mib(p.findtext("used_memory")),
            )
            for p in node.findall("processes/process_info")
            if (pid := _small_int(p.findtext("pid"))) is not None
        )
        minor = _small_int(node.findtext("minor_number"))
        gpus.append(
            Gpu(
                index=number if minor is None else minor,
                name=(node.findtext("product_name") or "unknown").strip(),
                uuid=_clean(node.findtext("uuid")),
                compute_capability=_clean(node.findtext("compute_cap")),
                memory_total_mib=_mib(node.findtext("fb_memory_usage/total")),
                memory_free_mib=_mib(node.findtext("fb_memory_usage/free")),
                processes=processes,
                pci_device_id=pci_device_id(node.findtext("pci/pci_device_id")),
                source="nvidia-smi -q -x",
            )
        )
    return SmiReading(driver=driver, cuda=cuda, gpus=tuple(gpus))


def parse_nvml(data: dict[str, Any]) -> SmiReading | None:
    """Parse the JSON our NVML child prints (values straight from the NVML calls)."""
    try:
        cuda_int = data.get("cuda_driver_version")
        cuda = None if cuda_int is None else f"{cuda_int // 1000}.{cuda_int % 1000 // 10}"
        gpus = tuple(
            Gpu(
                index=int(g["index"]),
                name=str(g["name"]),
                uuid=g.get("uuid"),
                compute_capability=_nvml_cc(g["cuda_compute_capability"]),
                memory_total_mib=int(g["memory_total_bytes"]) // 2**20,
                memory_free_mib=int(g["memory_free_bytes"]) // 2**20,
                processes=tuple(
                    GpuProcess(
                        pid=int(p["pid"]),
                        name=str(p.get("name") or ""),
                        used_mib=None
                        if p.get("used_gpu_memory_bytes") is None
                        else int(p["used_gpu_memory_bytes"]) // 2**20,
                    )
                    for p in g.get("processes", [])
                ),
                source="nvml",
            )
            for g in data["devices"]
        )
        return SmiReading(driver=str(data["driver_version"]), cuda=cuda, gpus=gpus)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError):
        return None


def _nvml_cc(value: object) -> str | None:
    """nvmlDeviceGetCudaComputeCapability gives (major, minor); anything else is no reading."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise ValueError(f"compute capability {value!r} is not (major, minor)")
    major, minor = value
    if not all(isinstance(v, int) and 0 <= v < 1000 for v in (major, minor)):
        raise ValueError(f"compute capability {value!r} is not two small integers")
    return f"{major}.{minor}"


def _ask(argv: list[str], timeout: float, notes: list[str] | None) -> Completed | None:
    """Run one probe under the output cap; None when it failed, with a note when it was cut."""
    try:
        return run(argv, timeout=timeout, limit=MAX_OUTPUT)
    except ProgramError as exc:
        if exc.cut and notes is not None:
            notes.append(str(exc))
        return None


def probe_nvml(timeout: float = NVML_TIMEOUT, notes: list[str] | None = None) -> SmiReading | None:
    """Ask NVML in a child process: a wedged driver can hang NVML, and a child can be killed."""
    out = _ask([sys.executable, str(script_path("nvml"))], timeout, notes)
    if out is None or out.returncode != 0:
        return None
    try:
        data = json.loads(out.stdout)
    except (ValueError, RecursionError):  # JSONDecodeError, or a number beyond int()'s limit
        return None
    return parse_nvml(data) if isinstance(data, dict) else None


def probe_smi_query(
    smi: str = "nvidia-smi", deadline: float | None = None, notes: list[str] | None = None
) -> SmiReading | None:
    """`nvidia-smi --query-gpu`, retried without compute_cap for drivers that predate it."""
    deadline = time.monotonic() + SMI_TIMEOUT if deadline is None else deadline
    for fields in (QUERY_FIELDS, QUERY_FIELDS.replace(",compute_cap", "")):
        out = _ask([smi, f"--query-gpu={fields}", "--format=csv"], _left(deadline), notes)
        if out is None:
            return None
        if out.returncode == 0:
            return parse_query_csv(out.stdout)
    return None


def probe_smi_xml(
    smi: str = "nvidia-smi", deadline: float | None = None, notes: list[str] | None = None
) -> SmiReading | None:
    """`nvidia-smi -q -x`: the only smi surface that lists processes per GPU.

    A degraded nvidia-smi (one GPU fallen off the bus, a failing NVML call) can exit non-zero
    and still print the whole document: use it whenever it parses, as rattler does.
    """
    deadline = time.monotonic() + SMI_TIMEOUT if deadline is None else deadline
    out = _ask([smi, "-q", "-x"], _left(deadline), notes)
    return None if out is None else parse_smi_xml(out.stdout)


def probe_smi_banner(
    smi: str = "nvidia-smi", deadline: float | None = None, notes: list[str] | None = None
) -> tuple[str | None, str | None]:
    """Last resort: the plain table's banner."""
    deadline = time.monotonic() + SMI_TIMEOUT if deadline is None else deadline
    out = _ask([smi], _left(deadline), notes)
    return parse_banner(out.stdout) if out is not None and out.returncode == 0 else (None, None)


def _left(deadline: float) -> float:
    """Seconds until the shared deadline (a little, never zero: run() needs a positive timeout)."""
    return max(0.05, deadline - time.monotonic())


def merge_compute_capability(primary: SmiReading, secondary: SmiReading | None) -> SmiReading:
    """Fill compute capability from another reading of the same GPUs (matched by UUID)."""
    if secondary is None:
        return primary
    by_uuid = {g.uuid: g for g in secondary.gpus if g.uuid}
    gpus = tuple(
        replace(g, compute_capability=by_uuid[g.uuid].compute_capability)
        if g.compute_capability is None and g.uuid in by_uuid
        else g
        for g in primary.gpus
    )
    return replace(primary, gpus=gpus)


def driver_fact(
    sysfs: str | None, procfs: str | None, reading: SmiReading | None, reading_source: str
) -> NvidiaDriver | None:
    """Pick the driver version by source precedence: sysfs, procfs, NVML/nvidia-smi."""
    cuda = reading.cuda if reading else None
    cuda_source = reading_source if cuda else None
    for version, source in (
        (sysfs, "sysfs /sys/module/nvidia/version"),
        (procfs, "procfs /proc/driver/nvidia/version"),
        (reading.driver if reading else None, reading_source),
    ):
        if version:
            return NvidiaDriver(version=version, source=source, cuda=cuda, cuda_source=cuda_source)
    return None
