"""What rendered files say for a row's accelerator: the Ray resource, the Kubernetes device-plugin
resource, and the toolkit's environment script (NVIDIA rows keep GPU and nvidia.com/gpu)."""

from __future__ import annotations

from typing import Any

# Device-plugin resource names: Ascend's device plugin advertises huawei.com/Ascend910 (910B/910C
# included), AMD's k8s-device-plugin amd.com/gpu; Ray schedules Ascend NPUs as "NPU" (Ray's NPU
# accelerator manager, verl's platform_npu), AMD GPUs as "GPU".
FAMILIES: dict[str | None, dict[str, Any]] = {
    None: {"ray_resource": "GPU", "k8s_resource": "nvidia.com/gpu", "set_env": None, "why": ""},
    "ascend": {
        "ray_resource": "NPU",
        "k8s_resource": "huawei.com/Ascend910",
        "set_env": "/usr/local/Ascend/ascend-toolkit/set_env.sh",
        "why": "CANN's own environment (ASCEND_TOOLKIT_HOME, LD_LIBRARY_PATH): torch_npu loads its "
        "libraries from it",
    },
    "rocm": {"ray_resource": "GPU", "k8s_resource": "amd.com/gpu", "set_env": None, "why": ""},
}


def accelerator_values(family: str | None) -> dict[str, Any]:
    """The `accel` values the templates read."""
    return FAMILIES.get(family, FAMILIES[None])
