"""host/resources.py and host/nvcc.py: the memory, CPUs, cgroup limits and nvcc a build or a check
reads, from made cgroup trees, this machine, and an nvcc that prints a real `nvcc --version`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from verl_setup.host.nvcc import nvcc_release, nvcc_version, toolkit_homes
from verl_setup.host.resources import (
    cgroup_limit,
    cpu_limit,
    meminfo,
    memory_events,
    memory_gib,
    usable_cores,
)
from verl_setup.plan.build_host import GIB_PER_BUILD_JOB, build_jobs

# The two lines a real `nvcc --version` (CUDA 13.0.88, /usr/local/cuda-13.0) ends with; the same
# recorded output as tests/unit/test_wheelbuild.py's.
NVCC_VERSION = "Cuda compilation tools, release 13.0, V13.0.88\nBuild cuda_13.0.r13.0/compiler.36424714_0\n"


def test_cgroup_v2_and_v1_limits_from_a_made_tree(tmp_path: Path) -> None:
    (tmp_path / "job/slurm").mkdir(parents=True)
    (tmp_path / "job/slurm/memory.max").write_text("8589934592\n")
    (tmp_path / "job/slurm/cpu.max").write_text("150000 100000\n")
    self_v2 = tmp_path / "self-v2"
    self_v2.write_text("0::/job/slurm\n")
    assert cgroup_limit(tmp_path, self_v2) == (8 * 2**30, str(tmp_path / "job/slurm/memory.max"))
    limit = cpu_limit(tmp_path, self_v2)
    assert (limit.quota, limit.quota_source) == (1.5, str(tmp_path / "job/slurm/cpu.max"))
    (tmp_path / "memory/docker/abc").mkdir(parents=True)
    (tmp_path / "memory/docker/abc/memory.limit_in_bytes").write_text("9223372036854771712\n")  # unlimited
    self_v1 = tmp_path / "self-v1"
    self_v1.write_text("7:memory:/docker/abc\n")
    assert cgroup_limit(tmp_path, self_v1) == (None, "")


def test_memory_events_is_the_v2_cgroups_own(tmp_path: Path) -> None:
    self_cgroup = tmp_path / "self"
    self_cgroup.write_text("12:memory:/docker/abc\n0::/job/slurm\n")
    assert memory_events(tmp_path, self_cgroup) is None  # the folder has no memory.events
    (tmp_path / "job/slurm").mkdir(parents=True)
    (tmp_path / "job/slurm/memory.events").write_text("low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n")
    assert memory_events(tmp_path, self_cgroup) == tmp_path / "job/slurm/memory.events"
    assert memory_events(tmp_path, tmp_path / "absent") is None


def test_this_machines_meminfo_cores_and_affinity() -> None:
    total, available = meminfo()
    assert total >= available > 0
    assert cpu_limit().affinity == len(os.sched_getaffinity(0)) == usable_cores()
    gib = memory_gib()
    assert gib is not None
    assert abs(gib * 2**30 - total) < 0.1 * total  # sysconf, /proc/meminfo: within 10%


def test_build_jobs_are_bounded_by_cores_and_memory() -> None:
    assert build_jobs(cores=64, memory=24) == 24 // GIB_PER_BUILD_JOB
    assert build_jobs(cores=2, memory=512) == 2
    assert build_jobs(cores=8, memory=1) == 1
    assert 1 <= build_jobs() <= usable_cores()


def _nvcc(home: Path) -> Path:
    (home / "bin").mkdir(parents=True)
    nvcc = home / "bin" / "nvcc"
    lines = " ".join(f"'{line}'" for line in NVCC_VERSION.splitlines())
    nvcc.write_text(f"#!/bin/sh\nprintf '%s\\n' {lines}\n")
    nvcc.chmod(0o755)
    return nvcc


@pytest.mark.subprocess
def test_the_build_nvcc_is_cuda_homes_before_paths(tmp_path: Path) -> None:
    nvcc = _nvcc(tmp_path / "cuda-13.0")
    assert nvcc_release(nvcc) == ("13.0", "13.0.88")
    assert nvcc_version({"CUDA_HOME": str(tmp_path / "cuda-13.0"), "PATH": "/usr/bin:/bin"}) == "13.0"
    assert nvcc_version({"PATH": f"{nvcc.parent}:/usr/bin:/bin"}) == "13.0"
    # CUDA_HOME without an nvcc falls through to PATH's; neither gives None.
    assert nvcc_version({"CUDA_HOME": str(tmp_path), "PATH": f"{nvcc.parent}:/usr/bin:/bin"}) == "13.0"
    assert nvcc_version({"CUDA_HOME": str(tmp_path), "PATH": str(tmp_path)}) is None
    # One reader of `nvcc --version` for builds and the toolkit choice: an nvcc that fails says nothing.
    broken = tmp_path / "broken" / "bin" / "nvcc"
    broken.parent.mkdir(parents=True)
    broken.write_text(f"#!/bin/sh\nprintf '%s\\n' '{NVCC_VERSION.splitlines()[0]}'\nexit 1\n")
    broken.chmod(0o755)
    assert nvcc_release(broken) is None
    assert nvcc_version({"CUDA_HOME": str(tmp_path / "broken"), "PATH": "/usr/bin:/bin"}) is None


def test_toolkit_homes_name_where_each_was_found(tmp_path: Path) -> None:
    nvcc = _nvcc(tmp_path / "on-path")
    env = {"CUDA_HOME": "/opt/cuda-home", "PATH": f"{nvcc.parent}:/usr/bin:/bin"}
    assert toolkit_homes("12.8", env) == [
        (Path("/opt/cuda-home"), "CUDA_HOME"),
        (tmp_path / "on-path", "nvcc on PATH"),
        (Path("/usr/local/cuda-12.8"), "/usr/local/cuda-12.8"),
        (Path("/usr/local/cuda"), "/usr/local/cuda"),
    ]
