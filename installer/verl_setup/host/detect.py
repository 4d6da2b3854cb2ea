"""Run every probe and assemble HostFacts. Knows nothing about the matrix."""

from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from verl_setup.host import nvidia, pythons, system
from verl_setup.host.facts import Gpu, HostFacts, NvidiaDriver

TOOLS = ("uv", "docker", "nvcc", "nvidia-smi", "ray")


def detect(root: Path = Path("/"), env: dict[str, str] | None = None) -> HostFacts:
    """Probe this host (or a tree under `root`, for tests) and return its facts."""
    env = dict(os.environ) if env is None else env
    path_env = env.get("PATH", os.defpath)
    home = Path(env.get("HOME") or Path.home())
    with ThreadPoolExecutor(max_workers=4) as pool:
        pythons_job = pool.submit(pythons.detect_pythons, path_env, home, env)
        gpu_job = pool.submit(_nvidia, root, path_env)
        tools = tuple(t for t in pool.map(lambda n: system.tool(n, path_env), TOOLS) if t)
        driver, gpus, notes = gpu_job.result()
        found_pythons = pythons_job.result()
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
    )


def _nvidia(root: Path, path_env: str) -> tuple[NvidiaDriver | None, tuple[Gpu, ...], tuple[str, ...]]:
    """Driver and GPUs by source precedence; NVML only runs when a kernel driver is loaded."""
    notes: list[str] = []
    sysfs = nvidia.read_sysfs_version(root)
    procfs = nvidia.read_procfs_version(root)
    reading, source = None, ""
    if sysfs or procfs:
        reading, source = nvidia.probe_nvml(), "nvml"
        if reading is None:
            notes.append("NVML unavailable or failed; asked nvidia-smi instead")
    smi = shutil.which("nvidia-smi", path=path_env)
    if reading is None and smi:
        with ThreadPoolExecutor(max_workers=2) as pool:
            xml_job = pool.submit(nvidia.probe_smi_xml, smi)
            csv_reading = nvidia.probe_smi_query(smi)
            xml_reading = xml_job.result()
        if xml_reading is not None:
            reading = nvidia.merge_compute_capability(xml_reading, csv_reading)
            source = "nvidia-smi -q -x"
        elif csv_reading is not None:
            reading, source = csv_reading, "nvidia-smi --query-gpu"
        else:
            notes.append("nvidia-smi gave no readable answer (missing, failed or timed out)")
            banner_driver, banner_cuda = nvidia.probe_smi_banner(smi)
            if banner_driver or banner_cuda:
                reading = nvidia.SmiReading(driver=banner_driver, cuda=banner_cuda, gpus=())
                source = "nvidia-smi banner"
    if (sysfs or procfs) and smi is None and reading is None:
        notes.append("an NVIDIA kernel driver is loaded but neither NVML nor nvidia-smi answered")
    driver = nvidia.driver_fact(sysfs, procfs, reading, source)
    return driver, (reading.gpus if reading else ()), tuple(notes)
