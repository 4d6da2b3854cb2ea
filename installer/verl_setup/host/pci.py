"""Counting a vendor's PCI functions in sysfs: hardware seen without any vendor tool."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

MAX_PCI_DEVICES = 1024


def count_functions(
    root: Path, vendor: str, devices: Collection[str] = (), classes: Collection[str] = ()
) -> int:
    """PCI functions of `vendor` ("0x1002") whose device id is in `devices` and whose class
    (first four hex digits, "0x1200") is in `classes`; an empty collection accepts any."""
    try:
        entries = sorted((root / "sys/bus/pci/devices").iterdir())[:MAX_PCI_DEVICES]
    except OSError:
        return 0
    found = 0
    for entry in entries:
        if _word(entry / "vendor") != vendor:
            continue
        if devices and _word(entry / "device") not in devices:
            continue
        if classes and _word(entry / "class")[:6] not in classes:
            continue
        found += 1
    return found


def _word(path: Path) -> str:
    try:
        with path.open("rb") as handle:  # sysfs attributes are tiny; read no more than a line
            return handle.read(64).decode("ascii", errors="replace").strip().lower()
    except OSError:
        return ""
