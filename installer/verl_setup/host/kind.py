"""Which sort of NVIDIA host this is: plain Linux, WSL 2 (the Windows driver) or Jetson (L4T)."""

from __future__ import annotations

import re
from pathlib import Path

from verl_setup.host.facts import HostKind
from verl_setup.util.bounded import BoundError, read_capped

# "# R35 (release), REVISION: 3.1, GCID: 32827747, BOARD: t186ref, EABI: aarch64, DATE: ..."
_TEGRA_RE = re.compile(r"#\s*R([0-9]{2,3})\s*\(release\),\s*REVISION:\s*([0-9]{1,3})\.([0-9]{1,3})")


def host_kind(root: Path) -> HostKind:
    """Jetson from /etc/nv_tegra_release or the device-tree model; WSL from the kernel release."""
    tegra = _read(root / "etc/nv_tegra_release")
    if tegra is not None:
        m = _TEGRA_RE.search(tegra)
        release = f"{m[1]}.{m[2]}.{m[3]}" if m else None
        return HostKind(kind="jetson", evidence="/etc/nv_tegra_release exists", release=release)
    model = (_read(root / "proc/device-tree/model") or "").strip("\0\n ")
    if re.search(r"\b(Jetson|Orin|Xavier|Thor)\b", model) and "NVIDIA" in model:
        return HostKind(kind="jetson", evidence=f"/proc/device-tree/model is {model[:80]!r}")
    osrelease = (_read(root / "proc/sys/kernel/osrelease") or "").strip()
    if re.search(r"microsoft", osrelease, re.IGNORECASE) or (root / "dev/dxg").exists():
        shown = osrelease[:80] or "unknown"
        return HostKind(kind="wsl", evidence=f"kernel {shown!r} (WSL: the GPU driver is the Windows one)")
    return HostKind(kind="linux", evidence="no Jetson or WSL markers")


def _read(path: Path) -> str | None:
    try:
        return read_capped(path, 4096, "marker file").decode("utf-8", errors="replace")
    except BoundError:
        return None
