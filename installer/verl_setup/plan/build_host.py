"""What a build against torch needs to know about this machine: its nvcc's CUDA, and its memory."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

GIB_PER_BUILD_JOB = 4  # flash-attention README: MAX_JOBS=4 on machines with less than 96 GB of RAM


def nvcc_version(env: Mapping[str, str]) -> str | None:
    """The CUDA release of the nvcc a build would use (CUDA_HOME's, else PATH's), e.g. "13.0"."""
    from verl_setup.util.runner import ProgramError, run  # noqa: PLC0415

    home = env.get("CUDA_HOME") or env.get("CUDA_PATH")
    nvcc = str(Path(home) / "bin" / "nvcc") if home and (Path(home) / "bin" / "nvcc").exists() else None
    nvcc = nvcc or shutil.which("nvcc", path=env.get("PATH", os.defpath))
    if nvcc is None:
        return None
    try:
        out = run([nvcc, "--version"], timeout=30, env=env)
    except ProgramError:
        return None
    found = re.search(r"release (\d+\.\d+)", out.stdout)
    return found[1] if found else None


def memory_gib() -> float | None:
    """This machine's memory in GiB (None where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        return None


def build_jobs(cores: int | None = None, memory: float | None = None) -> int:
    """How many build jobs the cores and memory allow (this machine's where not given)."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    memory = memory or memory_gib() or GIB_PER_BUILD_JOB
    return max(1, min(cores, int(memory // GIB_PER_BUILD_JOB)))
