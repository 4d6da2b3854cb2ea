"""Memory and CPUs: the machine's, and what the affinity mask and this process's cgroup allow.

Each reader names its source: /proc/meminfo, sysconf, os.cpu_count, sched_getaffinity, and the
cgroup's own files (v2 memory.max, memory.events and cpu.max; v1 memory.limit_in_bytes and cpu.cfs_*).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

MEMINFO = Path("/proc/meminfo")
CGROUP_ROOT = Path("/sys/fs/cgroup")
SELF_CGROUP = Path("/proc/self/cgroup")
UNLIMITED = 2**60  # v1's "no limit" is a page-rounded LONG_MAX, not "max"


def meminfo(path: Path = MEMINFO) -> tuple[int, int]:
    """(MemTotal, MemAvailable) in bytes."""
    values: dict[str, int] = {}
    for line in path.read_text(encoding="ascii").splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            values[name] = int(parts[0]) * 1024
    return values.get("MemTotal", 0), values.get("MemAvailable", values.get("MemFree", 0))


def memory_gib() -> float | None:
    """This machine's memory in GiB, from sysconf (None where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        return None


def cgroup_limit(root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP) -> tuple[int | None, str]:
    """This process's cgroup memory limit (v2 memory.max, else v1 memory.limit_in_bytes)."""
    try:
        lines = self_cgroup.read_text(encoding="ascii").splitlines()
    except OSError:
        return None, ""
    for line in lines:
        _, controllers, rel = line.split(":", 2)
        rel = rel.lstrip("/")
        if controllers == "":
            candidates = [root / rel / "memory.max", root / "unified" / rel / "memory.max"]
        elif "memory" in controllers.split(","):
            candidates = [root / "memory" / rel / "memory.limit_in_bytes"]
        else:
            continue
        for file in candidates:
            try:
                text = file.read_text(encoding="ascii").strip()
            except OSError:
                continue
            if text == "max" or not text.isdigit() or int(text) >= UNLIMITED:
                continue
            return int(text), str(file)
    return None, ""


def memory_events(root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP) -> Path | None:
    """This process's cgroup v2 memory.events, if it has one."""
    try:
        lines = self_cgroup.read_text(encoding="ascii").splitlines()
    except OSError:
        return None
    for line in lines:
        hierarchy, controllers, rel = ([*line.split(":", 2), "", ""])[:3]
        if hierarchy == "0" and controllers == "":
            candidate = root / rel.lstrip("/") / "memory.events"
            if candidate.is_file():
                return candidate
    return None


def online_cpus() -> int | None:
    """The machine's CPUs (os.cpu_count: the affinity mask and cgroup quota aside), None if unknown."""
    return os.cpu_count()


def usable_cores() -> int:
    """The CPUs this process may run on: its affinity mask (taskset, Slurm), else the machine's."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@dataclass(frozen=True, kw_only=True)
class CpuLimit:
    """The CPUs this process may use, and what limits them."""

    online: int
    affinity: int
    quota: float | None
    quota_source: str

    @property
    def allowed(self) -> float:
        return min(self.affinity, self.quota) if self.quota is not None else float(self.affinity)


def cpu_limit(root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP) -> CpuLimit:
    """Online CPUs, the affinity mask (taskset, Slurm) and the cgroup CPU quota (v2 cpu.max, v1 cfs)."""
    quota, source = None, ""
    try:
        lines = self_cgroup.read_text(encoding="ascii").splitlines()
    except OSError:
        lines = []
    for line in lines:
        _, controllers, rel = line.split(":", 2)
        rel = rel.lstrip("/")
        if controllers == "":
            file = root / rel / "cpu.max"
            try:
                max_, period = file.read_text(encoding="ascii").split()
            except (OSError, ValueError):
                continue
            if max_ != "max":
                quota, source = int(max_) / int(period), str(file)
        elif "cpu" in controllers.split(","):
            for folder in (root / controllers / rel, root / "cpu" / rel):
                try:
                    q = int((folder / "cpu.cfs_quota_us").read_text(encoding="ascii"))
                    p = int((folder / "cpu.cfs_period_us").read_text(encoding="ascii"))
                except (OSError, ValueError):
                    continue
                if q > 0 and p > 0:
                    quota, source = q / p, str(folder / "cpu.cfs_quota_us")
                break
    return CpuLimit(
        online=os.cpu_count() or 1, affinity=len(os.sched_getaffinity(0)), quota=quota, quota_source=source
    )
