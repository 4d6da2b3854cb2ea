"""matrices/cuda.yaml: cases generated from the table itself (GPU identity: test_gpu_identity.py)."""

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
