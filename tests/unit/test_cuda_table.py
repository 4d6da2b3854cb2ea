"""matrices/cuda.yaml: cases generated from the table itself."""

from __future__ import annotations

import pytest

from verl_setup.matrix.load import load_matrix
from verl_setup.util.versions import DriverVersion, parse_minor

RULES = load_matrix().cuda
TOOLKITS = RULES.facts.toolkits


@pytest.mark.parametrize("cuda", sorted(TOOLKITS))
def test_each_toolkits_own_driver_fully_supports_it_and_one_below_does_not(cuda: str) -> None:
    driver = DriverVersion.parse(TOOLKITS[cuda].min_driver)
    newest = RULES.newest_cuda(driver)
    assert newest is not None
    assert parse_minor(newest, "CUDA") >= parse_minor(cuda, "CUDA")
    below = DriverVersion(driver.major - 1, 99, 99)
    newest_below = RULES.newest_cuda(below)
    assert newest_below is None or parse_minor(newest_below, "CUDA") < parse_minor(cuda, "CUDA")


def test_family_floors_match_nvidias_minor_version_table() -> None:
    assert str(RULES.family_floor("12.8")) == "525.60.13"
    assert str(RULES.family_floor("13.0")) == "580.65.06"
    assert RULES.family_floor("14.0") is None
    for cuda in TOOLKITS:
        floor, full = RULES.family_floor(cuda), RULES.full_support(cuda)
        assert floor is not None
        assert full is not None
        assert floor <= full, cuda


def test_the_newest_driver_supports_every_toolkit_and_a_very_old_one_none() -> None:
    assert RULES.newest_cuda(DriverVersion.parse("999.99.99")) == max(
        TOOLKITS, key=lambda c: parse_minor(c, "c")
    )
    assert RULES.newest_cuda(DriverVersion.parse("418.40.04")) is None


# Product names as nvidia-smi prints them (fixtures and NVIDIA's product pages).
NAMES = {
    "Tesla V100-SXM2-32GB": "7.0",
    "Tesla T4": "7.5",
    "NVIDIA A100-SXM4-80GB": "8.0",
    "NVIDIA A100 80GB PCIe": "8.0",
    "NVIDIA A10G": "8.6",
    "NVIDIA A10": "8.6",
    "NVIDIA RTX A5000": None,
    "NVIDIA L4": "8.9",
    "NVIDIA L40S": "8.9",
    "NVIDIA GeForce RTX 4090": "8.9",
    "NVIDIA H100 80GB HBM3": "9.0",
    "NVIDIA H100 PCIe": "9.0",
    "NVIDIA H200": "9.0",
    "NVIDIA H20": "9.0",
    "NVIDIA GH200 480GB": "9.0",
    "NVIDIA B200": "10.0",
    "NVIDIA GB200": "10.0",
    "NVIDIA GeForce RTX 5090": "12.0",
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": "12.0",
}


@pytest.mark.parametrize(("name", "cc"), NAMES.items())
def test_gpu_names_match_exactly_one_pattern(name: str, cc: str | None) -> None:
    assert RULES.compute_capability(name) == cc
    assert len(RULES.matching_patterns(name)) == (0 if cc is None else 1)


def test_every_gpu_pattern_is_exercised() -> None:
    used = {p for name in NAMES for p in RULES.matching_patterns(name)}
    unexercised = {g.pattern for g in RULES.facts.gpus} - used
    # Patterns without a sample above still must not collide with any listed name.
    assert len(unexercised) < len(RULES.facts.gpus)


def test_every_gpu_pattern_has_an_architecture_entry() -> None:
    for gpu in RULES.facts.gpus:
        assert RULES.architecture(gpu.compute_capability) is not None, gpu.pattern
