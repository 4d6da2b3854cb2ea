"""AMD GPU probes: `rocm-smi --showproductname` (JSON, or its table), KFD's topology, the ROCm
version file and PCI functions 0x1002.

Each probe reads one source and returns None (or 0) when it is absent, fails or prints something
we cannot read. `amd-smi` is not asked: no real `amd-smi static --json` output was found to test
a reader on (docs/accelerators.md). The recorded outputs are in tests/fixtures/accel/.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

from verl_setup.host.facts import Accelerator, AcceleratorDevice
from verl_setup.host.pci import count_functions
from verl_setup.util.bounded import BoundError, read_capped
from verl_setup.util.runner import ProgramError, run

SMI_TIMEOUT = 10.0
MAX_OUTPUT = 2**20
MAX_NODES = 256
VENDOR = "0x1002"
# Display (0x0300, 0x0380) and processing-accelerator (0x1200) functions: an MI300X is the latter;
# the audio and USB functions a Radeon card also has are neither.
GPU_CLASSES = frozenset({"0x0300", "0x0302", "0x0380", "0x1200"})
KFD_NODES = "sys/class/kfd/kfd/topology/nodes"
VERSION_FILE = "opt/rocm/.info/version"

_TEXT_ROW = re.compile(r"^GPU\[(\d+)\]\s*:\s*([^:]+?):\s*(.*?)\s*$")
_ROCM_VERSION = re.compile(r"^\s*([0-9]{1,2}\.[0-9]{1,3}(?:\.[0-9]{1,4})?)(?:[-.]|\s|$)")


def gfx_from_kfd(version: int) -> str | None:
    """KFD's gfx_target_version (MMmmss, decimal) as a gfx target: 90402 -> gfx942, 90010 -> gfx90a."""
    if version <= 0:
        return None
    major, minor, stepping = version // 10000, (version // 100) % 100, version % 100
    if minor > 9 or stepping > 15:
        return None
    return f"gfx{major}{minor}{stepping:x}"


def normal_gfx(text: str) -> str | None:
    """rocm-smi's "GFX Version" as a gfx target; it prints MI250X's gfx90a as "gfx9010" (the
    stepping in decimal, ROCm/rocm_smi_lib#159)."""
    text = text.strip().lower()
    if m := re.fullmatch(r"gfx9(\d)(\d\d)", text):
        return f"gfx9{m.group(1)}{int(m.group(2)):x}" if int(m.group(2)) <= 15 else None
    return text if re.fullmatch(r"gfx[0-9a-f]{3,5}", text) else None


def parse_rocm_smi(text: str) -> tuple[AcceleratorDevice, ...] | None:
    """`rocm-smi --showproductname` as JSON (cardN objects) or as its table (GPU[N] : key: value)."""
    cards: dict[int, dict[str, str]] = {}
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        for key, value in data.items():
            if (m := re.fullmatch(r"card(\d+)", str(key))) and isinstance(value, dict):
                cards[int(m.group(1))] = {str(k).lower(): str(v) for k, v in value.items()}
    else:
        for line in text.splitlines():
            if m := _TEXT_ROW.match(line.strip()):
                cards.setdefault(int(m.group(1)), {})[m.group(2).strip().lower()] = m.group(3)
    if not cards:
        return None
    return tuple(
        AcceleratorDevice(
            index=i,
            name=card.get("card series") or card.get("device name") or card.get("card model") or "AMD GPU",
            chip=normal_gfx(card.get("gfx version", "")),
            source="rocm-smi --showproductname",
        )
        for i, card in sorted(cards.items())
    )


def probe_rocm_smi(smi: str, timeout: float = SMI_TIMEOUT) -> tuple[AcceleratorDevice, ...] | None:
    """Run `rocm-smi --showproductname --json`; None when it is missing, fails or hangs."""
    try:
        out = run([smi, "--showproductname", "--json"], timeout=timeout, limit=MAX_OUTPUT)
    except ProgramError:
        return None
    return parse_rocm_smi(out.stdout) if out.returncode == 0 else None


def read_kfd(root: Path) -> tuple[AcceleratorDevice, ...]:
    """GPU nodes of KFD's topology (a node with SIMDs and a gfx target; node 0 is usually a CPU)."""
    base = root / KFD_NODES
    try:
        nodes = sorted(base.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else 1 << 30)
    except OSError:
        return ()
    found: list[AcceleratorDevice] = []
    for node in nodes[:MAX_NODES]:
        props = _properties(node / "properties")
        gfx = gfx_from_kfd(props.get("gfx_target_version", 0))
        if props.get("simd_count", 0) <= 0 or gfx is None:
            continue
        name = _first_line(node / "name") or gfx
        found.append(AcceleratorDevice(index=len(found), name=name, chip=gfx, source=f"kfd node {node.name}"))
    return tuple(found)


def read_rocm_version(root: Path) -> str | None:
    """The first line of /opt/rocm/.info/version ("7.2.4" or "6.2.0-66"): the ROCm release."""
    line = _first_line(root / VERSION_FILE)
    m = _ROCM_VERSION.match(line or "")
    return m.group(1) if m else None


def detect_amd(root: Path, smi: str | None) -> Accelerator | None:
    """AMD GPUs on this host, or None when neither rocm-smi, KFD nor sysfs shows one."""
    kfd = read_kfd(root)
    listed = probe_rocm_smi(smi) if smi else None
    pci = count_functions(root, VENDOR, classes=GPU_CLASSES)
    if not listed and not kfd:
        return None  # an AMD display function alone (an APU, a BMC's VGA) is no ROCm device
    devices = listed or kfd
    if listed and kfd and len(kfd) == len(listed):  # fill a gfx target rocm-smi left out, in order
        devices = tuple(d if d.chip else replace(d, chip=k.chip) for d, k in zip(listed, kfd, strict=True))
    version = read_rocm_version(root)
    return Accelerator(
        family="rocm",
        devices=devices,
        toolkit="ROCm",
        toolkit_version=version,
        toolkit_source=f"/{VERSION_FILE}" if version else None,
        pci_devices=pci,
        source="rocm-smi --showproductname" if listed else "kfd topology",
    )


def _properties(path: Path) -> dict[str, int]:
    try:
        text = read_capped(path, 64 * 1024, "KFD node properties").decode("ascii", errors="replace")
    except (BoundError, OSError):
        return {}
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[key] = int(value.strip())
    return out


def _first_line(path: Path) -> str | None:
    try:
        text = read_capped(path, 4096, "version file").decode("utf-8", errors="replace")
    except (BoundError, OSError):
        return None
    return text.splitlines()[0].strip() if text.strip() else None
