"""An Ascend row's imports are probed only where CANN is: here torch itself cannot load without it."""

from __future__ import annotations

from pathlib import Path

from verl_setup.environment.accelerator_imports import imports_need_absent_toolkit
from verl_setup.matrix.load import load_matrix

MATRIX = load_matrix()


def test_an_ascend_row_without_cann_checks_versions_only(tmp_path: Path) -> None:
    row = MATRIX.row("verl0.8-vllm-ascend0.18.0rc1")
    why = imports_need_absent_toolkit(row, {}, tmp_path / "no-cann")
    assert why is not None
    assert "libhccl.so" in why
    assert "level installs" in why


def test_cann_present_or_sourced_probes_imports(tmp_path: Path) -> None:
    row = MATRIX.row("verl0.8-vllm-ascend0.18.0rc1")
    assert imports_need_absent_toolkit(row, {"ASCEND_TOOLKIT_HOME": "/opt/cann"}, tmp_path / "none") is None
    (tmp_path / "cann").mkdir()
    assert imports_need_absent_toolkit(row, {}, tmp_path / "cann") is None


def test_nvidia_and_cpu_rows_always_probe_imports(tmp_path: Path) -> None:
    assert imports_need_absent_toolkit(MATRIX.row("cpu"), {}, tmp_path / "none") is None
