"""Whether a row's imports can be probed here: an Ascend row's torch loads torch_npu at import
(torch's device-backend autoload), and torch_npu needs CANN's libraries (libhccl.so)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from verl_setup.matrix.schema import Row

CANN_DIR = Path("/usr/local/Ascend/ascend-toolkit")


def imports_need_absent_toolkit(row: Row, env: Mapping[str, str], cann_dir: Path = CANN_DIR) -> str | None:
    """Why the import probe cannot run for `row` on this machine; None when it can.

    Recorded here (x86_64, no CANN): `import torch` in the Ascend row's env stops with
    "RuntimeError: Failed to load the backend extension: torch_npu" (ImportError: libhccl.so)."""
    if row.requires.accelerator != "ascend":
        return None
    if env.get("ASCEND_TOOLKIT_HOME") or env.get("ASCEND_HOME_PATH") or cann_dir.exists():
        return None
    return (
        f"no CANN here (no {cann_dir}, ASCEND_TOOLKIT_HOME unset): torch loads torch_npu at import and "
        "torch_npu needs CANN's libhccl.so, so only the installed versions are checked (level installs)"
    )
