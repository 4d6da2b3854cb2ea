"""Ascend NPU probes: `npu-smi info`, the CANN toolkit's install file, and PCI functions 0x19e5.

Each probe reads one source and returns None (or 0) when it is absent, fails or prints something
we cannot read. The recorded real outputs they are tested on are in tests/fixtures/accel/.
"""

from __future__ import annotations

import re
from pathlib import Path

from verl_setup.host.facts import Accelerator, AcceleratorDevice
from verl_setup.host.pci import count_functions
from verl_setup.util.bounded import BoundError, read_capped
from verl_setup.util.runner import ProgramError, run

SMI_TIMEOUT = 10.0
MAX_OUTPUT = 2**20  # `npu-smi info` for 16 chips with processes is a few KB
VENDOR = "0x19e5"
# Huawei's vendor id also covers Kunpeng's own engines (HiSilicon ZIP, SEC, HPRE: also "Processing
# accelerators"), so only the NPU device ids count: d801 Ascend 910, d802 910B, d803 910C (A3),
# d500 310P (lspci lines in Ascend's and vendors' install guides; docs/accelerators.md).
NPU_DEVICE_IDS = frozenset({"0xd801", "0xd802", "0xd803", "0xd500"})
# The CANN toolkit's own record of what is installed (ascend-toolkit/latest/<arch>-linux/).
TOOLKIT_DIRS = ("usr/local/Ascend/ascend-toolkit/latest",)

_BANNER = re.compile(r"npu-smi\s+(\S+)\s+Version:\s*(\S+)")
# First row of a chip: "| 0     910B4               | OK            | 88.2 ..." (health is a word).
_ROW1 = re.compile(r"^\|\s*(\d+)\s+([A-Za-z0-9][\w.-]*)\s*\|\s*([A-Za-z][A-Za-z ]*?)\s*\|")
# Second row: "| 0                         | 0000:C1:00.0  | 0   0    / 0   26838/ 32768  |"; with
# npu-smi 26 on Atlas A3 the first cell is "Chip  Phy-ID" ("0     0").
_ROW2 = re.compile(
    r"^\|\s*(\d+)(?:\s+(\d+))?\s*\|\s*([0-9A-Fa-fx]{4}:[0-9A-Fa-fx]{2}:[0-9A-Fa-fx]{2}\.\d)\s*\|(.*)"
)
_PAIR = re.compile(r"(\d+)\s*/\s*(\d+)")
_TOOLKIT_VERSION = re.compile(r"^version=(\S+)\s*$", re.M)


def parse_npu_smi_info(text: str) -> tuple[str | None, tuple[AcceleratorDevice, ...]] | None:
    """npu-smi's version and one device per chip row; None when the text is no npu-smi table."""
    banner = _BANNER.search(text)
    devices: list[AcceleratorDevice] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        first = _ROW1.match(line.strip())
        if not first or not any(c.isalpha() for c in first.group(2)):
            continue
        second = _ROW2.match(lines[i + 1].strip()) if i + 1 < len(lines) else None
        used = total = None
        if second is not None:
            pairs = _PAIR.findall(second.group(4))
            if pairs:  # the last "used / total" pair of the row is HBM (Memory-Usage comes first)
                used, total = int(pairs[-1][0]), int(pairs[-1][1])
        name = first.group(2)
        devices.append(
            AcceleratorDevice(
                index=len(devices),
                name=f"Ascend {name.removeprefix('Ascend')}",
                chip=name.removeprefix("Ascend"),
                bus_id=second.group(3) if second else None,
                memory_total_mib=total,
                memory_used_mib=used,
                source="npu-smi info",
            )
        )
    if banner is None and not devices:
        return None
    return (banner.group(2) if banner else None), tuple(devices)


def probe_npu_smi(
    smi: str, timeout: float = SMI_TIMEOUT
) -> tuple[str | None, tuple[AcceleratorDevice, ...]] | None:
    """Run `npu-smi info` (bounded in time and size); None when it is missing, fails or hangs."""
    try:
        out = run([smi, "info"], timeout=timeout, limit=MAX_OUTPUT)
    except ProgramError:
        return None
    return parse_npu_smi_info(out.stdout) if out.returncode == 0 else None


def parse_toolkit_info(text: str) -> str | None:
    """`version=8.1.RC1.alpha001` from ascend_toolkit_install.info."""
    found = _TOOLKIT_VERSION.search(text)
    return found.group(1) if found else None


def read_cann_version(root: Path, home: str | None = None) -> tuple[str, str] | None:
    """(version, file) from the CANN toolkit's install record; `home` is ASCEND_TOOLKIT_HOME when set."""
    bases = [Path(home)] if home else []
    bases += [root / d for d in TOOLKIT_DIRS]
    for base in bases:
        try:
            candidates = sorted(base.glob("*-linux/ascend_toolkit_install.info"))[:4]
        except OSError:
            continue
        for path in candidates:
            try:
                text = read_capped(path, 64 * 1024, "CANN install record").decode("utf-8", errors="replace")
            except (BoundError, OSError):
                continue
            if version := parse_toolkit_info(text):
                return version, str(path)
    return None


def detect_ascend(root: Path, smi: str | None, toolkit_home: str | None = None) -> Accelerator | None:
    """Ascend NPUs on this host, or None when neither npu-smi nor sysfs shows one."""
    pci = count_functions(root, VENDOR, NPU_DEVICE_IDS)
    reading = probe_npu_smi(smi) if smi else None
    if reading is None and pci == 0:
        return None
    version, devices = reading if reading else (None, ())
    cann = read_cann_version(root, toolkit_home)
    return Accelerator(
        family="ascend",
        devices=devices,
        # npu-smi ships in the driver package and prints that package's version.
        driver=version,
        driver_source="npu-smi info" if version else None,
        tool_version=version,
        toolkit="CANN",
        toolkit_version=cann[0] if cann else None,
        toolkit_source=cann[1] if cann else None,
        pci_devices=pci,
        source="npu-smi info" if reading else "sysfs PCI 0x19e5",
    )
