"""GPU identity (matrices/gpus.yaml) against real product names with their true compute
capability (tests/fixtures/gpus/product-names.csv, from NVIDIA's CUDA GPUs table and pci.ids)."""

from __future__ import annotations

import csv
import re

import pytest

from tests.conftest import FIXTURES, NVIDIA, run_cli
from verl_setup.host.nvidia import parse_smi_xml, pci_device_id
from verl_setup.matrix.gpus import load_gpu_table
from verl_setup.matrix.load import load_matrix

TABLE = load_gpu_table()
PRODUCTS = list(
    csv.DictReader(
        line
        for line in (FIXTURES / "gpus/product-names.csv").open(encoding="utf-8")
        if not line.startswith("#")
    )
)
# Names nothing can place: a bare model number shared by two families, an engineering sample,
# a Jetson's integrated GPU, a future product. Each must ask for --sm, never get a number.
UNPLACEABLE = [
    "RTX 5000",
    "RTX 4000",
    "NVIDIA Graphics Device",
    "Orin (nvgpu)",
    "NVIDIA RTX 9000 Omega",
    "H1000",
]


@pytest.mark.parametrize("row", PRODUCTS, ids=[r["name"] for r in PRODUCTS])
def test_every_real_product_name_gets_its_true_compute_capability(row: dict[str, str]) -> None:
    found = TABLE.by_name(row["name"])
    assert found is not None, row["name"]
    assert found.compute_capability == row["cc"]
    assert len(TABLE.matching(row["name"])) == 1  # anchored: no family swallows another's product


@pytest.mark.parametrize(
    "row", [r for r in PRODUCTS if r["pci"]], ids=[r["name"] for r in PRODUCTS if r["pci"]]
)
def test_the_pci_device_id_gives_the_same_answer_as_nvidias_table(row: dict[str, str]) -> None:
    found = TABLE.by_device(row["pci"])
    assert found is not None
    assert found.compute_capability == row["cc"]


def test_the_device_id_outranks_a_misleading_name() -> None:
    # A Quadro RTX 5000 (TU104, 0x1eb0) whose name a pattern could misread is placed by its chip.
    found = TABLE.identify("RTX 5000", "1eb0")
    assert found is not None
    assert (found.compute_capability, found.via) == ("7.5", "pci 0x1eb0 (TU104)")


@pytest.mark.parametrize("name", UNPLACEABLE)
def test_a_name_nothing_can_place_gets_no_number(name: str) -> None:
    assert TABLE.by_name(name) is None


@pytest.mark.parametrize(
    "name",
    ["Quadro RTX 5000", "NVIDIA RTX 5000 Ada Generation", "NVIDIA RTX 2000 Ada", "NVIDIA GeForce RTX 2050"],
)
def test_plan_for_an_issue_14_name_uses_its_true_sm(name: str) -> None:
    result = run_cli("plan", "--json", "--driver", "570.124.06", "--gpu", name, "--row", "cpu")
    assert result.code in (0, 2, 3), result.err
    if result.code == 0:
        assert f'"compute_capability": "{TABLE.by_name(name).compute_capability}"' in result.out  # type: ignore[union-attr]


def test_quadro_rtx_5000_is_refused_by_rows_that_need_sm80() -> None:
    result = run_cli("plan", "--explain", "--driver", "570.124.06", "--gpu", "Quadro RTX 5000")
    assert "GPU 'Quadro RTX 5000' is 7.5" in result.out + result.err


@pytest.mark.parametrize("name", UNPLACEABLE)
def test_plan_with_an_unplaceable_name_exits_2_asking_for_sm(name: str) -> None:
    result = run_cli("plan", "--driver", "570.124.06", "--gpu", name)
    assert result.code == 2
    assert "--sm X.Y" in result.err
    assert len(result.err.splitlines()) == 1


def test_every_chip_has_an_architecture_in_cuda_yaml_and_every_device_a_chip() -> None:
    rules = load_matrix().cuda
    for chip, entry in TABLE.facts.chips.items():
        assert rules.architecture(entry.compute_capability) is not None, chip
    assert set(TABLE.facts.devices.values()) <= set(TABLE.facts.chips)
    assert len(TABLE.facts.devices) > 400  # the whole pci.ids extract, not a handful


def test_every_name_pattern_is_exercised_by_a_real_product() -> None:
    used = {entry.pattern for row in PRODUCTS for entry in TABLE.matching(row["name"])}
    assert used == {entry.pattern for entry in TABLE.facts.names}


def test_pci_device_ids_from_the_xml_and_from_sysfs() -> None:
    assert pci_device_id("233010DE") == "2330"  # nvidia-smi -q -x: device then vendor
    assert pci_device_id("0x2330") == "2330"  # /sys/bus/pci/devices/*/device
    for bad in ("", "2330", "12345678", "0x23301002", "²³³⁰"):
        assert pci_device_id(bad) == ("2330" if bad == "2330" else None)
    reading = parse_smi_xml((NVIDIA / "smi-q-x-590.44.01-2x-rtx-a5000.xml").read_text())
    assert reading is not None
    assert [g.pci_device_id for g in reading.gpus] == ["2231", "2231"]
    # The recorded RTX A5000 has no compute_cap field: its id alone places it (GA102, 8.6).
    assert load_matrix().cuda.compute_capability(reading.gpus[0].name, reading.gpus[0].pci_device_id) == "8.6"


def test_name_matching_is_bounded() -> None:
    assert TABLE.by_name("H100" + " x" * 10_000) is None  # over MAX_NAME: no regex work at all
    assert re.fullmatch(r"[0-9a-f]{4}", next(iter(TABLE.facts.devices)))
