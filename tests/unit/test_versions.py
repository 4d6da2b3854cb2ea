"""Driver and version strings from users and hosts."""

from __future__ import annotations

import pytest

from verl_setup.errors import BadInputError
from verl_setup.util.versions import DriverVersion, minor_of, parse_minor, parse_python


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("535.129.03", "535.129.03"),
        ("570.26", "570.26"),
        (" 580.65.06\n", "580.65.06"),
        ("384.98", "384.98"),
    ],
)
def test_driver_versions_parse_and_print_as_nvidia_writes_them(text: str, expected: str) -> None:
    assert str(DriverVersion.parse(text)) == expected


@pytest.mark.parametrize(
    "text", ["abc", "535", "535.129.03.1", "", "535.129.03 (open)", "v535.129.03", "-1.2"]
)
def test_strange_driver_strings_are_rejected_with_the_value_named(text: str) -> None:
    with pytest.raises(BadInputError, match="bad driver version"):
        DriverVersion.parse(text)


def test_driver_order_is_numeric_not_textual() -> None:
    assert DriverVersion.parse("535.54.03") < DriverVersion.parse("535.129.03")
    assert DriverVersion.parse("570.26") < DriverVersion.parse("570.26.01")
    assert DriverVersion.parse("999.0") < DriverVersion.parse("1000.0")


def test_python_and_minor_versions() -> None:
    assert parse_python("3.10") == (3, 10)
    assert parse_python("3.12.3") == (3, 12, 3)
    assert parse_minor("12.8", "CUDA") == (12, 8)
    for bad in ("2.7", "3", "3.x", "3.10.1.1"):
        with pytest.raises(BadInputError):
            parse_python(bad)


@pytest.mark.parametrize(
    ("version", "minor"),
    [("2.11.0+cu130", "2.11"), ("3.12.1", "3.12"), ("13.0", "13.0"), ("12", "12"), ("0.10.0.dev0", "0.10")],
)
def test_minor_of_keeps_major_and_minor_and_drops_a_local_label(version: str, minor: str) -> None:
    assert minor_of(version) == minor
