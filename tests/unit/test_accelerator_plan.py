"""Planning for Ascend NPU and AMD GPU machines: never a compute capability asked for; an Ascend
910B with its CANN selects the Ascend row and says why; an MI300X gets the exact reason no row fits."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import json_data, run_cli
from tests.unit.test_accelerator_detect import ACCEL, cann, fake_tool
from verl_setup.host.detect import detect

ASCEND_ROW = "verl0.8-vllm-ascend0.18.0rc1"


@pytest.mark.parametrize(
    "argv",
    [
        ("--gpu", "Ascend 910B", "--cann", "8.5.1"),
        ("--npu", "910B", "--cann", "8.5.1"),
        ("--npu", "Ascend910B3", "--cann", "8.5.1"),
        ("--npu", "910C"),
    ],
    ids=["gpu-name", "npu-flag", "npu-chip-name", "a3-no-cann"],
)
def test_an_ascend_910b_or_910c_selects_the_ascend_row(argv: tuple[str, ...]) -> None:
    result = run_cli("plan", *argv, "--json")
    assert result.code == 0, result.err
    data = json_data(result.out)
    assert data["row"]["id"] == ASCEND_ROW
    assert data["facts"]["accelerator"]["value"]["family"] == "ascend"
    assert "--sm" not in result.out + result.err


def test_the_ascend_plan_explains_its_pins_with_the_vllm_ascend_table() -> None:
    result = run_cli("plan", "--npu", "910B", "--cann", "8.5.1", "--explain")
    assert result.code == 0, result.err
    assert f"selected   {ASCEND_ROW}" in result.out
    assert "vllm-ascend release table" in result.out
    assert "VLLM_TARGET_DEVICE=empty" in result.out  # the engine is built, not installed


def test_a_cann_of_another_minor_is_refused_with_what_the_row_needs() -> None:
    result = run_cli("plan", "--npu", "910B", "--cann", "8.1.RC1")
    assert result.code == 3
    assert "Ascend NPU 910B" in result.err
    assert "CANN 8.5.x needed (8.5.1 tested), host has 8.1.RC1" in result.err
    assert "NVIDIA row" not in result.err  # the nearest changes are the Ascend rows'


def test_a_310p_is_told_which_chips_the_rows_need() -> None:
    result = run_cli("plan", "--npu", "310P", "--cann", "8.5.1")
    assert result.code == 3
    assert "Ascend NPU 910B or 910C needed, this one is 310P" in result.err


@pytest.mark.parametrize("name", ["AMD Instinct MI300X", "MI300X", "gfx942"])
def test_an_mi300x_is_told_exactly_why_no_row_fits_and_never_asked_for_sm(name: str) -> None:
    result = run_cli("plan", "--gpu", name, "--rocm", "7.0")
    assert result.code == 3
    assert "AMD GPU (ROCm) gfx942" in result.err
    assert "no AMD GPU (ROCm) row at all" in result.err
    assert "torch's ROCm builds are not on the default package index" in result.err
    assert "--sm" not in result.err
    assert "compute capability" not in result.err


def test_an_unknown_nvidia_name_still_asks_for_its_compute_capability() -> None:
    result = run_cli("plan", "--gpu", "Nonesuch 9000", "--driver", "580.95.05")
    assert result.code == 2
    assert "--sm" in result.err


@pytest.mark.subprocess  # --no-gpu still detects this machine's Pythons
def test_nvidia_and_cpu_plans_never_take_the_ascend_row() -> None:
    gpu = json_data(run_cli("plan", "--driver", "580.95.05", "--gpu", "H100", "--json").out)
    cpu = json_data(run_cli("plan", "--no-gpu", "--json").out)
    assert gpu["row"]["id"] != ASCEND_ROW
    assert cpu["row"]["id"] == "cpu"
    reasons = {r["id"]: r["reasons"] for r in cpu["rejected"]}
    assert "needs Ascend NPUs (910B, 910C) with CANN 8.5.1; none found" in reasons[ASCEND_ROW][0]


def test_bad_accelerator_input_is_one_line_exit_2() -> None:
    for argv in (
        ("--npu", "H100"),
        ("--npu", "910B", "--cann", "eight"),
        ("--npu", "910B", "--gpu", "MI300X"),
    ):
        result = run_cli("plan", *argv)
        assert result.code == 2, argv
        assert result.err.count("\n") == 1


@pytest.mark.subprocess
def test_a_detected_ascend_host_file_plans_from_its_chip_and_cann(tmp_path: Path) -> None:
    fake_tool(tmp_path / "bin", "npu-smi", ACCEL / "npu-smi-info-24.1.rc1-910b3-vllm-ascend834.txt")
    cann(tmp_path)  # the recorded CANN is 8.1.RC1.alpha001
    facts = detect(
        root=tmp_path, env={"PATH": f"{tmp_path / 'bin'}{os.pathsep}/usr/bin:/bin", "HOME": str(tmp_path)}
    )
    host = tmp_path / "node.json"
    host.write_text(facts.to_json())
    result = run_cli("plan", "--host", str(host))
    assert result.code == 3
    assert "Ascend NPU 910B (Ascend 910B3; CANN 8.1.RC1.alpha001)" in result.err
    assert "CANN 8.5.x needed" in result.err
    doc = json.loads(host.read_text())
    doc["accelerators"][0]["toolkit_version"] = "8.5.1"
    doc["os"]["arch"] = "x86_64"
    host.write_text(json.dumps(doc))
    ok = run_cli("plan", "--host", str(host), "--json")
    assert ok.code == 0, ok.err
    assert json_data(ok.out)["row"]["id"] == ASCEND_ROW


def test_an_aarch64_ascend_host_gets_the_aarch64_row() -> None:
    result = run_cli("plan", "--npu", "910B", "--cann", "8.5.1", "--arch", "aarch64", "--json")
    assert result.code == 0, result.err
    row = json_data(result.out)["row"]
    assert row["id"] == ASCEND_ROW + "-aarch64"
    assert row["overrides"] == []  # torch-npu's aarch64 wheel takes the index's torch 2.9.0
