"""How many jobs a build against torch may run: one per core, at most one per GIB_PER_BUILD_JOB GiB
of memory (the cores and memory are host/resources.py's)."""

from __future__ import annotations

from verl_setup.host.resources import memory_gib, usable_cores

GIB_PER_BUILD_JOB = 4  # flash-attention README: MAX_JOBS=4 on machines with less than 96 GB of RAM


def build_jobs(cores: int | None = None, memory: float | None = None) -> int:
    """How many build jobs the cores and memory allow (this machine's where not given)."""
    if cores is None:
        cores = usable_cores()
    memory = memory or memory_gib() or GIB_PER_BUILD_JOB
    return max(1, min(cores, int(memory // GIB_PER_BUILD_JOB)))
