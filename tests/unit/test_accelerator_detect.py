"""Ascend and AMD detection end to end on recorded real outputs (tests/fixtures/accel/SOURCES.md):
an npu-smi / rocm-smi on PATH that prints the recording, a host tree with the CANN install record,
KFD's topology and PCI functions, and the detect command's text and JSON."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, json_data, run_cli
from verl_setup.commands.text_output import host_text
from verl_setup.host import amd, ascend
from verl_setup.host.detect import detect, detect_accelerators
from verl_setup.host.facts import load_host_file

ACCEL = FIXTURES / "accel"

# fixture -> (npu-smi version, chips listed, chip name, HBM total MiB of the first)
NPU_SMI = {
    "npu-smi-info-24.1.1-910b4-1panel9472.txt": ("24.1.1", 2, "910B4", 32768),
    "npu-smi-info-25.2.0-910b4-1-hami47.txt": ("25.2.0", 2, "910B4-1", 65536),
    "npu-smi-info-24.1.rc1-910b3-vllm-ascend834.txt": ("24.1.rc1", 1, "910B3", 65536),
    # as posted: the table stops inside NPU 2's first row, which still names the chip
    "npu-smi-info-24.1.0-910b1-vllm-ascend3403.txt": ("24.1.0", 3, "910B1", 65536),
    # npu-smi 26 on an Atlas A3: two chips under NPU 0, a "Chip  Phy-ID" column
    "npu-smi-info-26.0.rc2-ascend910-a3-vllm-ascend12980.txt": ("26.0.rc2", 2, "910", 65536),
}


def fake_tool(bin_dir: Path, name: str, fixture: Path) -> None:
    """A vendor tool on PATH that prints a recorded real output."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / name
    script.write_text(f"#!/bin/sh\ncat {fixture}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


def pci_function(root: Path, slot: str, vendor: str, device: str, klass: str) -> None:
    d = root / "sys/bus/pci/devices" / slot
    d.mkdir(parents=True)
    for name, value in (("vendor", vendor), ("device", device), ("class", klass)):
        (d / name).write_text(value + "\n")


def cann(root: Path) -> None:
    info = root / "usr/local/Ascend/ascend-toolkit/latest/aarch64-linux/ascend_toolkit_install.info"
    info.parent.mkdir(parents=True)
    shutil.copy(ACCEL / "ascend_toolkit_install-8.1.RC1.alpha001-vllm-ascend834.info", info)


@pytest.mark.parametrize("fixture", sorted(NPU_SMI), ids=lambda f: f.split("-info-")[1].rsplit(".", 1)[0])
def test_npu_smi_recordings_give_chip_count_name_and_version(fixture: str) -> None:
    version, count, chip, hbm = NPU_SMI[fixture]
    parsed = ascend.parse_npu_smi_info((ACCEL / fixture).read_text())
    assert parsed is not None
    assert parsed[0] == version
    assert len(parsed[1]) == count
    assert {d.chip for d in parsed[1]} == {chip}
    assert parsed[1][0].memory_total_mib == hbm


def test_the_npu_process_table_and_other_text_are_no_chips() -> None:
    assert ascend.parse_npu_smi_info("command not found") is None
    assert ascend.parse_npu_smi_info("") is None


@pytest.mark.subprocess
def test_an_ascend_host_shows_npus_driver_and_cann(tmp_path: Path) -> None:
    fake_tool(tmp_path / "bin", "npu-smi", ACCEL / "npu-smi-info-24.1.rc1-910b3-vllm-ascend834.txt")
    cann(tmp_path)
    pci_function(tmp_path, "0000:c1:00.0", "0x19e5", "0xd802", "0x120000")
    pci_function(tmp_path, "0000:75:00.0", "0x19e5", "0xa250", "0x120000")  # a Kunpeng ZIP engine
    found = detect_accelerators(tmp_path, str(tmp_path / "bin"), {})
    assert len(found) == 1
    npu = found[0]
    assert (npu.family, npu.count, npu.pci_devices) == ("ascend", 1, 1)
    assert (npu.driver, npu.toolkit, npu.toolkit_version) == ("24.1.rc1", "CANN", "8.1.RC1.alpha001")
    assert npu.devices[0].name == "Ascend 910B3"


def test_npus_on_pci_without_npu_smi_are_still_counted(tmp_path: Path) -> None:
    for i in range(8):
        pci_function(tmp_path, f"0000:{i:02x}:00.0", "0x19e5", "0xd802", "0x120000")
    found = ascend.detect_ascend(tmp_path, None)
    assert found is not None
    assert (found.count, found.devices, found.source) == (8, (), "sysfs PCI 0x19e5")


def test_a_kunpeng_host_without_npus_has_no_ascend(tmp_path: Path) -> None:
    pci_function(tmp_path, "0000:75:00.0", "0x19e5", "0xa250", "0x120000")
    assert ascend.detect_ascend(tmp_path, None) is None


@pytest.mark.parametrize(
    ("fixture", "names", "gfx"),
    [
        (
            "rocm-smi-showproductname-mi250x-rocm_smi_lib159.json",
            ["AMD INSTINCT MI200 (MCM) OAM LC MBA HPE C2"],
            "gfx90a",
        ),
        ("rocm-smi-showproductname-mi300x-vf.txt", ["AMD Instinct MI300X VF"] * 4, "gfx942"),
    ],
    ids=["mi250x-json", "mi300x-vf-table"],
)
def test_rocm_smi_recordings_give_names_and_gfx_targets(fixture: str, names: list[str], gfx: str) -> None:
    devices = amd.parse_rocm_smi((ACCEL / fixture).read_text())
    assert devices is not None
    assert [d.name for d in devices] == names
    assert {d.chip for d in devices} == {gfx}


def test_kfd_topology_gives_each_gpu_nodes_gfx_target() -> None:
    mixed = amd.read_kfd(ACCEL / "kfd-rocprofiler-sdk")
    assert [(d.name, d.chip) for d in mixed] == [
        ("vega20", "gfx906"),
        ("gfx1102", "gfx1102"),
        ("gfx1032", "gfx1032"),
    ]
    assert [d.chip for d in amd.read_kfd(ACCEL / "kfd-mi350x")] == ["gfx950"]


def test_kfd_gfx_encoding() -> None:
    assert [amd.gfx_from_kfd(v) for v in (90402, 90010, 90500, 110002, 0)] == [
        "gfx942",
        "gfx90a",
        "gfx950",
        "gfx1102",
        None,
    ]


def _mi300x_host(root: Path) -> Path:
    fake_tool(root / "bin", "rocm-smi", ACCEL / "rocm-smi-showproductname-mi300x-vf.txt")
    version = root / amd.VERSION_FILE
    version.parent.mkdir(parents=True)
    version.write_text("6.4.1-120\n")
    for i in range(4):
        pci_function(root, f"0000:{0x11 + i:02x}:00.0", "0x1002", "0x74b5", "0x120000")
    pci_function(root, "0000:c4:00.1", "0x1002", "0x1640", "0x040300")  # an HDMI audio function
    return root / "bin"


@pytest.mark.subprocess
def test_an_amd_host_shows_gpus_gfx_and_rocm(tmp_path: Path) -> None:
    bin_dir = _mi300x_host(tmp_path)
    (found,) = detect_accelerators(tmp_path, str(bin_dir), {})
    assert (found.family, found.count, found.pci_devices) == ("rocm", 4, 4)
    assert (found.toolkit, found.toolkit_version) == ("ROCm", "6.4.1")
    assert {d.chip for d in found.devices} == {"gfx942"}


@pytest.mark.subprocess
def test_detect_text_and_json_carry_the_accelerator(tmp_path: Path) -> None:
    bin_dir = _mi300x_host(tmp_path)
    facts = detect(root=tmp_path, env={"PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin", "HOME": str(tmp_path)})
    text = host_text(facts)
    assert "accel      AMD GPU (ROCm): 4 device(s), 4 on PCI" in text
    assert "ROCm 6.4.1 (/opt/rocm/.info/version)" in text
    assert "AMD Instinct MI300X VF (gfx942)" in text
    saved = tmp_path / "host.json"
    saved.write_text(facts.to_json())
    data = json.loads(saved.read_text())
    assert data["schema"] == 2
    assert data["accelerators"][0]["family"] == "rocm"
    assert load_host_file(saved) == facts


def test_a_schema_1_host_file_still_loads_with_no_accelerators() -> None:
    old = next(
        p for p in sorted((FIXTURES / "hosts").glob("*.json")) if json.loads(p.read_text()).get("schema") == 1
    )
    facts = load_host_file(old)
    assert facts.accelerators == ()
    assert facts.schema == 2


@pytest.mark.subprocess
def test_detect_json_validates_against_the_published_schema() -> None:
    result = run_cli("detect", "--json")
    assert result.code == 0
    assert json_data(result.out)["accelerators"] == []
