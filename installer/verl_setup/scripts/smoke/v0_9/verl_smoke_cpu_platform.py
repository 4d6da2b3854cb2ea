"""A `cpu` platform for verl 0.9, loaded into every verl process by VERL_USE_EXTERNAL_MODULES.

verl 0.9.1 has no CPU platform: with no accelerator it falls back to `nvidia`
(verl/plugin/platform/platform_manager.py:114-117), and auto_set_device turns trainer.device=cpu
into cuda (verl/utils/device.py:160-166). This registers `cpu` (chosen with VERL_PLATFORM=cpu): its
device module is torch.cpu plus the CUDA-style calls verl makes, answered for host memory. Ray still
schedules on a logical GPU (ray_resource_name "GPU", `ray start --num-gpus 1`): verl's resource pools
count GPUs (verl/single_controller/ray/base.py:226-242). verl's process group string
`cpu:gloo,{device}:{backend}` (verl/utils/distributed.py:63,89) is `cpu:gloo,cpu:gloo` here, which
torch refuses; init_process_group gets `cpu:gloo` instead.

Runs in the target env (verl-setup smoke puts this folder on PYTHONPATH); verl's private hooks are
used, so this file is kept per verl minor (scripts/smoke/v0_9 for 0.9.x).
"""

import contextlib
import functools
import os
import sys
from pathlib import Path
from types import ModuleType

import torch
import torch.distributed
from verl.plugin.platform.platform_base import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry

MARK = "verl-setup-smoke:"


def _host_memory():
    """(available, total) bytes from /proc/meminfo, as torch.cuda.mem_get_info answers for a GPU."""
    fields = {}
    with contextlib.suppress(OSError), Path("/proc/meminfo").open(encoding="ascii") as f:
        for line in f:
            name, _, rest = line.partition(":")
            fields[name] = int(rest.split()[0]) * 1024
    return fields.get("MemAvailable", 0), fields.get("MemTotal", 0)


def _nothing(*_args, **_kwargs):
    return None


def _zero(*_args, **_kwargs):
    return 0


class CpuDevice(ModuleType):
    """torch.cpu with the calls verl makes on torch.cuda: counters are 0, waits return at once."""

    def __init__(self):
        super().__init__("verl_smoke_cpu_device")
        answers = {
            "is_available": lambda: True,
            "device_count": lambda: 1,
            "current_device": _zero,
            "set_device": _nothing,
            "synchronize": _nothing,
            "empty_cache": _nothing,
            "get_device_name": lambda *_: "cpu",
            "get_device_capability": lambda *_: (None, None),
            "mem_get_info": lambda *_: _host_memory(),
            "manual_seed": torch.manual_seed,
            "manual_seed_all": torch.manual_seed,
            "get_rng_state": lambda *_: torch.get_rng_state(),
            "set_rng_state": lambda state, *_: torch.set_rng_state(state),
            "reset_peak_memory_stats": _nothing,
            "memory_allocated": _zero,
            "max_memory_allocated": _zero,
            "memory_reserved": _zero,
            "max_memory_reserved": _zero,
            "ipc_collect": _nothing,
        }
        for name, value in answers.items():
            setattr(self, name, value)

    def __getattr__(self, name):
        found = getattr(torch.cpu, name, None)
        return found if found is not None else _nothing


DEVICE = CpuDevice()


@PlatformRegistry.register(platform="cpu")
class PlatformCPU(PlatformBase):
    """verl on the host CPU: gloo for collectives, a logical Ray GPU per worker."""

    @property
    def device_name(self):
        return "cpu"

    @property
    def vendor_name(self):
        return "cpu"

    @property
    def device_module(self):
        return DEVICE

    def is_available(self):
        return True

    def is_platform_available(self, use_smi_check=False):
        # Never auto-detected: only VERL_PLATFORM=cpu chooses it.
        return False

    def current_device(self):
        # verl uses it as a device (`.to(get_device_id())`, fsdp_utils.py:507): an int means cuda:N
        return torch.device("cpu")

    def device_count(self):
        return 1

    def set_device(self, device_index):
        return None

    def synchronize(self, device_index=None):
        return None

    def manual_seed(self, seed):
        torch.manual_seed(seed)

    def manual_seed_all(self, seed):
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings):
        return None

    def empty_cache(self):
        return None

    def get_device_capability(self, device_index=0):
        return None, None

    def communication_backend_name(self):
        return "gloo"

    def visible_devices_envvar(self):
        return "CUDA_VISIBLE_DEVICES"

    @contextlib.contextmanager
    def nvtx_range(self, msg):
        yield

    def profiler_start(self):
        return None

    def profiler_stop(self):
        return None

    def ray_resource_name(self):
        return "GPU"

    def ray_noset_envvars(self):
        return ["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]

    def is_ipc_supported(self):
        return False

    def cudart(self):
        return None


def _one_gloo(init):
    """init_process_group with verl's `cpu:gloo,cpu:gloo` made `cpu:gloo`."""

    @functools.wraps(init)
    def wrapped(*args, **kwargs):
        backend = kwargs.get("backend")
        if isinstance(backend, str) and set(backend.split(",")) == {"cpu:gloo"}:
            kwargs["backend"] = "cpu:gloo"
        return init(*args, **kwargs)

    return wrapped


if os.environ.get("VERL_PLATFORM", "").strip().lower() == "cpu" and not getattr(
    torch.distributed.init_process_group, "_verl_smoke", False
):
    torch.distributed.init_process_group = _one_gloo(torch.distributed.init_process_group)
    torch.distributed.init_process_group._verl_smoke = True
    print(f"{MARK} cpu platform loaded (pid {os.getpid()})", file=sys.stderr, flush=True)
