"""nvidia-smi, procfs and NVML parsers against real recorded outputs (tests/fixtures/nvidia/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import NVIDIA
from verl_setup.host import nvidia


def read(name: str) -> str:
    return (NVIDIA / name).read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("fixture", "version"),
    [
        ("proc-driver-version-384.98.txt", "384.98"),
        ("proc-driver-version-525.60.11-open.txt", "525.60.11"),
        ("proc-driver-version-565.57.01-open.txt", "565.57.01"),
    ],
)
def test_procfs_version_proprietary_and_open_module(tmp_path: Path, fixture: str, version: str) -> None:
    target = tmp_path / "proc/driver/nvidia/version"
    target.parent.mkdir(parents=True)
    target.write_text(read(fixture))
    assert nvidia.read_procfs_version(tmp_path) == version


def test_sysfs_and_procfs_absent_is_none(tmp_path: Path) -> None:
    assert nvidia.read_sysfs_version(tmp_path) is None
    assert nvidia.read_procfs_version(tmp_path) is None


@pytest.mark.parametrize(
    ("fixture", "driver", "cuda"),
    [
        ("smi-banner-470.63.01-legacy.txt", "470.63.01", "11.4"),
        ("smi-banner-590.48.01-h100-load.txt", "590.48.01", "13.1"),
        ("smi-banner-610.43.02-h200.txt", "610.43.02", "13.3"),
        ("smi-banner-610.43.02-rtx-pro-6000-mig-in-pod.txt", "610.43.02", "13.3"),
    ],
)
def test_banner_old_and_r610_wording(fixture: str, driver: str, cuda: str) -> None:
    assert nvidia.parse_banner(read(fixture)) == (driver, cuda)


def test_query_csv_reads_every_gpu_line_not_only_the_first() -> None:
    reading = nvidia.parse_query_csv(read("smi-query-610.43.02-8x-rtx-pro-6000.csv"))
    assert reading is not None
    assert len(reading.gpus) == 8
    assert {g.name for g in reading.gpus} == {"NVIDIA RTX PRO 6000 Blackwell Server Edition"}
    assert [g.index for g in reading.gpus] == list(range(8))
    assert reading.gpus[7].uuid == "GPU-f4c61521-240a-da09-2787-e576034e197e"
    assert reading.gpus[0].memory_total_mib == 97887
    assert reading.gpus[0].compute_capability is None  # not queried in that capture
    assert reading.driver == "610.43.02"


@pytest.mark.parametrize(
    ("fixture", "driver", "name", "total"),
    [
        ("smi-query-590.48.01-h100-all-fields.csv", "590.48.01", "NVIDIA H100 80GB HBM3", 81559),
        ("smi-query-610.43.02-h200-all-fields.csv", "610.43.02", "NVIDIA H200", 143771),
    ],
)
def test_query_csv_with_units_and_compute_cap(fixture: str, driver: str, name: str, total: int) -> None:
    reading = nvidia.parse_query_csv(read(fixture))
    assert reading is not None
    (gpu,) = reading.gpus
    assert (reading.driver, gpu.name, gpu.compute_capability, gpu.memory_total_mib) == (
        driver,
        name,
        "9.0",
        total,
    )
    assert gpu.memory_free_mib is not None
    assert gpu.memory_free_mib <= total


def test_xml_t4_lists_the_processes_holding_memory() -> None:
    reading = nvidia.parse_smi_xml(read("smi-q-x-515.105.01-tesla-t4.xml"))
    assert reading is not None
    assert (reading.driver, reading.cuda) == ("515.105.01", "11.7")
    (gpu,) = reading.gpus
    assert gpu.name == "Tesla T4"
    assert gpu.memory_total_mib == 15360
    assert len(gpu.processes) == 2
    assert all(p.pid > 0 and p.used_mib for p in gpu.processes)


def test_xml_two_gpus_each_with_its_own_process() -> None:
    reading = nvidia.parse_smi_xml(read("smi-q-x-590.44.01-2x-rtx-a5000.xml"))
    assert reading is not None
    assert reading.driver == "590.44.01"
    assert len(reading.gpus) == 2
    assert {g.name for g in reading.gpus} == {"NVIDIA RTX A5000"}
    assert len({g.uuid for g in reading.gpus}) == 2
    assert all(len(g.processes) == 1 for g in reading.gpus)
    assert {p.name for g in reading.gpus for p in g.processes} == {"llama-server"} or all(
        "llama-server" in p.name for g in reading.gpus for p in g.processes
    )


def test_xml_a100_mig_driver_535() -> None:
    reading = nvidia.parse_smi_xml(read("smi-q-x-535.54.03-a100-sxm4-mig.xml"))
    assert reading is not None
    assert reading.driver == "535.54.03"
    assert reading.cuda == "12.2"
    assert reading.gpus[0].name == "NVIDIA A100-SXM4-80GB"


@pytest.mark.parametrize(
    "garbage",
    ["", "not xml", "<other/>", "Failed to initialize NVML: Driver/library version mismatch"],
)
def test_garbage_gives_none_never_an_exception(garbage: str) -> None:
    assert nvidia.parse_smi_xml(garbage) is None
    assert nvidia.parse_query_csv(garbage) is None
    assert nvidia.parse_banner(garbage) == (None, None)


def test_nvml_reading_converts_units_and_versions() -> None:
    # Values as NVML returns them (bytes, CUDA as 1000*major + 10*minor), for the H100 capture.
    reading = nvidia.parse_nvml(
        {
            "driver_version": "590.48.01",
            "cuda_driver_version": 13010,
            "devices": [
                {
                    "index": 0,
                    "name": "NVIDIA H100 80GB HBM3",
                    "uuid": "GPU-00000000-0000-0000-0000-000000000000",
                    "cuda_compute_capability": [9, 0],
                    "memory_total_bytes": 81559 * 2**20,
                    "memory_free_bytes": 60000 * 2**20,
                    "processes": [{"pid": 11345, "name": "gpu_burn", "used_gpu_memory_bytes": 15690 * 2**20}],
                }
            ],
        }
    )
    assert reading is not None
    assert reading.cuda == "13.1"
    assert reading.gpus[0].compute_capability == "9.0"
    assert reading.gpus[0].memory_total_mib == 81559
    assert reading.gpus[0].processes[0].used_mib == 15690
    assert nvidia.parse_nvml({"devices": "nonsense"}) is None
