"""Run every probe and assemble HostFacts. Knows nothing about the matrix."""

from __future__ import annotations

import os
import shutil
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from verl_setup.host import amd, ascend, nvidia, pythons, system
from verl_setup.host.facts import Accelerator, Gpu, HostFacts, NvidiaDriver
from verl_setup.host.kind import host_kind

T = TypeVar("T")
TOOLS = ("uv", "docker", "nvcc", "nvidia-smi", "ray")
MAX_WORKERS = 6


def detect(root: Path = Path("/"), env: dict[str, str] | None = None) -> HostFacts:
    """Probe this host (or a tree under `root`, for tests) and return its facts."""
    env = dict(os.environ) if env is None else env
    path_env = env.get("PATH", os.defpath)
    home = Path(env.get("HOME") or Path.home())
    with ThreadPoolExecutor(max_workers=MAX_WORKERS) as pool:
        pythons_job = pool.submit(pythons.detect_pythons, path_env, home, env)
        gpu_job = pool.submit(_nvidia, root, path_env)
        accel_job = pool.submit(detect_accelerators, root, path_env, env)
        tools = tuple(t for t in pool.map(lambda n: system.tool(n, path_env), TOOLS) if t)
        driver, gpus, notes = gpu_job.result()
        found_pythons = pythons_job.result()
        accelerators = accel_job.result()
    return HostFacts(
        os=system.os_facts(root),
        container=system.container(root, env),
        pythons=found_pythons,
        nvidia=driver,
        gpus=gpus,
        cuda_toolkits=system.cuda_toolkits(root, next((t for t in tools if t.name == "nvcc"), None)),
        tools=tools,
        env=system.relevant_env(env),
        notes=notes,
        host_kind=host_kind(root),
        accelerators=accelerators,
    )


def detect_accelerators(root: Path, path_env: str, env: dict[str, str]) -> tuple[Accelerator, ...]:
    """Ascend NPUs and AMD GPUs (each family's probes; none found is ())."""
    found = (
        ascend.detect_ascend(root, shutil.which("npu-smi", path=path_env), env.get("ASCEND_TOOLKIT_HOME")),
        amd.detect_amd(root, shutil.which("rocm-smi", path=path_env)),
    )
    return tuple(a for a in found if a is not None)


def _nvidia(root: Path, path_env: str) -> tuple[NvidiaDriver | None, tuple[Gpu, ...], tuple[str, ...]]:
    """Driver and GPUs by source precedence; NVML only runs when a kernel driver is loaded.

    Every probe that can hang starts at once under one deadline, so a wedged driver costs one
    timeout, not one per probe; the best answer that came back is used.
    """
    notes: list[str] = []
    sysfs = nvidia.read_sysfs_version(root)
    procfs = nvidia.read_procfs_version(root)
    smi = shutil.which("nvidia-smi", path=path_env)
    deadline = time.monotonic() + nvidia.SMI_TIMEOUT
    with ThreadPoolExecutor(max_workers=4) as pool:
        cut: list[str] = []  # "nvidia-smi: output over 4 MiB, cut", from any probe
        nvml_job = pool.submit(nvidia.probe_nvml, nvidia.SMI_TIMEOUT, cut) if sysfs or procfs else None
        xml_job = csv_job = banner_job = None
        if smi:
            xml_job = pool.submit(nvidia.probe_smi_xml, smi, deadline, cut)
            csv_job = pool.submit(nvidia.probe_smi_query, smi, deadline, cut)
            banner_job = pool.submit(nvidia.probe_smi_banner, smi, deadline, cut)
        reading = _result(nvml_job)
        xml_reading, csv_reading = _result(xml_job), _result(csv_job)
        banner = _result(banner_job) or (None, None)
    notes += sorted(set(cut))
    source = "nvml" if reading is not None else ""
    if nvml_job is not None and reading is None:
        notes.append("NVML unavailable or failed; asked nvidia-smi instead")
    if reading is None and xml_reading is not None:
        reading = nvidia.merge_compute_capability(xml_reading, csv_reading)
        source = "nvidia-smi -q -x"
    elif reading is None and csv_reading is not None:
        reading, source = csv_reading, "nvidia-smi --query-gpu"
    elif reading is None and smi:
        notes.append("nvidia-smi gave no readable answer (missing, failed or timed out)")
        if banner[0] or banner[1]:
            reading = nvidia.SmiReading(driver=banner[0], cuda=banner[1], gpus=())
            source = "nvidia-smi banner"
    if (sysfs or procfs) and smi is None and reading is None:
        notes.append("an NVIDIA kernel driver is loaded but neither NVML nor nvidia-smi answered")
    gpus = _with_pci_ids(reading.gpus if reading else (), nvidia.read_sysfs_pci_devices(root))
    driver = nvidia.driver_fact(sysfs, procfs, reading, source)
    return driver, gpus, tuple(notes)


def _result(job: Future[T] | None) -> T | None:
    return None if job is None else job.result()


def _with_pci_ids(gpus: tuple[Gpu, ...], sysfs_ids: tuple[str, ...]) -> tuple[Gpu, ...]:
    """Give GPUs without a PCI device id the one sysfs lists, when every NVIDIA GPU there is one chip."""
    if len(set(sysfs_ids)) != 1:
        return gpus
    return tuple(g if g.pci_device_id else replace(g, pci_device_id=sysfs_ids[0]) for g in gpus)
