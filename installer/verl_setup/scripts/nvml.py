"""Run inside a child process: print NVML's view of the host as JSON (exit 1 when NVML fails)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text(encoding="utf-8").strip()
    except OSError:
        return ""


def read() -> dict[str, Any]:
    """Query NVML for the driver, CUDA driver version, and every device."""
    import pynvml  # heavy and absent on many hosts: only in this child

    pynvml.nvmlInit()
    try:
        devices = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            procs = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
            devices.append(
                {
                    "index": index,
                    "name": pynvml.nvmlDeviceGetName(handle),
                    "uuid": pynvml.nvmlDeviceGetUUID(handle),
                    "cuda_compute_capability": list(pynvml.nvmlDeviceGetCudaComputeCapability(handle)),
                    "memory_total_bytes": memory.total,
                    "memory_free_bytes": memory.free,
                    "processes": [
                        {
                            "pid": p.pid,
                            "name": _name(p.pid),
                            "used_gpu_memory_bytes": p.usedGpuMemory,
                        }
                        for p in procs
                    ],
                }
            )
        return {
            "driver_version": pynvml.nvmlSystemGetDriverVersion(),
            "cuda_driver_version": pynvml.nvmlSystemGetCudaDriverVersion_v2(),
            "devices": devices,
        }
    finally:
        pynvml.nvmlShutdown()


def main() -> int:
    """Print the reading, or a one-line reason on stderr."""
    try:
        sys.stdout.write(json.dumps(read()))
    except Exception as exc:  # any NVML failure means "no NVML reading"
        sys.stderr.write(f"nvml: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
