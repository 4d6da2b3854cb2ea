"""Issue 14: every crash and hang class found by feeding real-world and fuzzed input, one named
test each. Each bad input must end in exit 2 (or 3 where no row applies) with exactly one error
line naming the value, no traceback, and no wait."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.conftest import NVIDIA, CliResult, run_cli
from tests.conftest import host as host_facts
from verl_setup.errors import BadInputError
from verl_setup.host.facts import load_host_file
from verl_setup.host.nvidia import parse_nvml, parse_query_csv, parse_smi_xml
from verl_setup.util.versions import DriverVersion, parse_count, parse_minor, parse_python

HUGE = "9" * 5000  # beyond int()'s 4300-digit limit
DRIVER = ("--driver", "570.124.06")


def one_line_error(result: CliResult, code: int = 2) -> str:
    assert result.code == code, (result.code, result.err)
    assert "Traceback" not in result.err
    assert len(result.err.splitlines()) == 1, result.err
    return result.err


def validate_report(result: CliResult) -> str:
    """`matrix validate` lists problems on stdout, one a line; a file it cannot read is one."""
    assert result.code == 2, (result.code, result.out, result.err)
    assert "Traceback" not in result.out + result.err
    assert len(result.out.splitlines()) == 1, result.out
    return result.out


def alias_bomb(levels: int = 9) -> str:
    """The billion-laughs document in YAML: each level is nine copies of the one before."""
    lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for n in range(1, levels):
        lines.append(f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 9)}]")
    return "\n".join(lines) + "\n"


# -- numbers of more than 4300 digits ------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ("plan", *DRIVER, "--sm", f"{HUGE}.0"),
        ("plan", *DRIVER, "--sm", "9.0", "--python", f"3.{HUGE}"),
        ("plan", *DRIVER, "--sm", "9.0", "--gpu-count", HUGE),
        ("plan", "--driver", f"{HUGE}.1", "--sm", "9.0"),
        ("plan", *DRIVER, "--sm", "9.0", "--verl", HUGE),
    ],
    ids=["sm", "python", "gpu-count", "driver", "verl"],
)
def test_huge_integers_in_flags(argv: tuple[str, ...]) -> None:
    one_line_error(run_cli(*argv))


def test_huge_integer_in_verl_setup_gpu_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERL_SETUP_GPU_COUNT", HUGE)
    assert "GPU count" in one_line_error(run_cli("plan", *DRIVER, "--sm", "9.0"))


def test_huge_integer_in_a_host_file(tmp_path: Path) -> None:
    host = tmp_path / "node.json"
    host.write_text(host_facts(driver="570.124.06").to_json().rstrip()[:-1] + f', "x": {HUGE}}}')
    assert "not JSON we can use" in one_line_error(run_cli("plan", "--host", str(host)))


def test_huge_integer_in_a_matrix_file(tmp_path: Path) -> None:
    rows = tmp_path / "verl.yaml"
    rows.write_text(f"schema: {HUGE}\nrows: []\n")
    assert "unusable value" in validate_report(run_cli("matrix", "validate", str(rows)))


def test_huge_integer_in_nvidia_smi_memory_fields() -> None:
    csv_text = f"index, name, memory.total [MiB]\n0, NVIDIA H100, {HUGE} MiB\n"
    reading = parse_query_csv(csv_text)
    assert reading is not None
    assert reading.gpus[0].memory_total_mib is None
    xml = (NVIDIA / "smi-q-x-515.105.01-tesla-t4.xml").read_text()
    xml = xml.replace("<total>15360 MiB</total>", f"<total>{HUGE} MiB</total>", 1)
    xml_reading = parse_smi_xml(xml)
    assert xml_reading is not None
    assert xml_reading.gpus[0].memory_total_mib is None


# -- digits str.isdigit() accepts and int() does not ---------------------------------------


# Superscript two, fullwidth twelve, Arabic-Indic three, and a mix.
@pytest.mark.parametrize("text", ["²", "\uff11\uff12", "\u0663", "3²"])
def test_unicode_digits(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(BadInputError):
        parse_count(text, "GPU count", 4096)
    with pytest.raises(BadInputError):
        parse_minor(f"{text}.0", "compute capability")
    with pytest.raises(BadInputError):
        DriverVersion.parse(f"5{text}5.129.03")
    with pytest.raises(BadInputError):
        parse_python(f"3.1{text}")
    monkeypatch.setenv("VERL_SETUP_GPU_COUNT", text)
    one_line_error(run_cli("plan", *DRIVER, "--sm", "9.0"))


def test_unicode_digits_in_nvidia_smi_fields() -> None:
    reading = parse_query_csv("index, name, memory.total [MiB]\n², NVIDIA H100, ²² MiB\n")
    assert reading is not None
    assert (reading.gpus[0].index, reading.gpus[0].memory_total_mib) == (0, None)


# -- files that are not what they claim ----------------------------------------------------


def test_deeply_nested_host_json(tmp_path: Path) -> None:
    host = tmp_path / "node.json"
    host.write_text("[" * 100_000 + "]" * 100_000)
    assert "nested" in one_line_error(run_cli("plan", "--host", str(host)))
    host.write_text('{"schema": 1, "os": ' + "[" * 200 + "]" * 200 + "}")
    assert "nested deeper" in one_line_error(run_cli("plan", "--host", str(host)))


def test_host_file_dev_zero() -> None:
    start = time.monotonic()
    assert "not a regular file" in one_line_error(run_cli("plan", "--host", "/dev/zero"))
    assert time.monotonic() - start < 2


def test_host_file_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "node.json"
    os.mkfifo(fifo)
    start = time.monotonic()
    assert "not a regular file" in one_line_error(run_cli("plan", "--host", str(fifo)))
    assert time.monotonic() - start < 2


def test_host_file_over_the_size_cap(tmp_path: Path) -> None:
    host = tmp_path / "node.json"
    with host.open("wb") as handle:
        handle.truncate(5 * 2**20)  # sparse: no disk used
    assert "the limit is" in one_line_error(run_cli("plan", "--host", str(host)))


def test_over_long_matrix_path() -> None:
    err = one_line_error(run_cli("plan", *DRIVER, "--sm", "9.0", "--matrix", "m" * 5000 + ".yaml"))
    assert "no such matrix file" in err
    assert len(err) < 5000  # the path is cut, not echoed whole


def test_matrix_file_fifo_and_directory(tmp_path: Path) -> None:
    fifo = tmp_path / "verl.yaml"
    os.mkfifo(fifo)
    start = time.monotonic()
    validate_report(run_cli("matrix", "validate", str(fifo)))
    one_line_error(run_cli("plan", *DRIVER, "--sm", "9.0", "--matrix", str(tmp_path)))
    assert time.monotonic() - start < 2


def test_csv_field_over_131072_characters() -> None:
    assert parse_query_csv('index, name\n0, "' + "x" * 200_000 + '"\n') is None


def test_nvml_one_element_compute_capability() -> None:
    device = {
        "index": 0,
        "name": "NVIDIA H100",
        "uuid": "GPU-1",
        "cuda_compute_capability": [9],
        "memory_total_bytes": 1,
        "memory_free_bytes": 1,
    }
    assert parse_nvml({"driver_version": "580.65.06", "devices": [device]}) is None
    device["cuda_compute_capability"] = [9, 0]
    reading = parse_nvml({"driver_version": "580.65.06", "devices": [device]})
    assert reading is not None
    assert reading.gpus[0].compute_capability == "9.0"


# -- YAML alias bombs: refused before anything is stringified ------------------------------


@pytest.mark.parametrize(
    "tail",
    ["? *l8\n: 1\n", "schema: 1\nrows: [{id: *l8}]\n", "schema: *l8\nrows: []\n"],
    ids=["mapping-key", "string-value", "literal-field"],
)
def test_yaml_alias_bomb(tmp_path: Path, tail: str) -> None:
    rows = tmp_path / "verl.yaml"
    rows.write_text(alias_bomb() + tail)
    start = time.monotonic()
    assert "aliases are not allowed" in validate_report(run_cli("matrix", "validate", str(rows)))
    assert "aliases are not allowed" in one_line_error(
        run_cli("plan", *DRIVER, "--sm", "9.0", "--matrix", str(rows))
    )
    assert time.monotonic() - start < 2


# -- error messages that spanned lines -------------------------------------------------------


def test_newlines_in_arch_and_glibc_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERL_SETUP_ARCH", "x86_64\nInjected: line")
    monkeypatch.setenv("VERL_SETUP_GLIBC", "2.17\nmore")
    result = run_cli("plan", *DRIVER, "--sm", "9.0")
    assert result.code in (2, 3)
    one_line_error(result, result.code)


def test_newline_in_the_matrix_path(tmp_path: Path) -> None:
    one_line_error(run_cli("plan", *DRIVER, "--sm", "9.0", "--matrix", str(tmp_path / "a\nb.yaml")))


def test_pyyaml_reader_error_is_one_line(tmp_path: Path) -> None:
    rows = tmp_path / "verl.yaml"
    rows.write_bytes(b"schema: 1\nrows: [\x00]\n")
    assert "malformed YAML" in validate_report(run_cli("matrix", "validate", str(rows)))


def test_host_file_errors_name_the_file_once_and_on_one_line(tmp_path: Path) -> None:
    host = tmp_path / "bad\nname.json"
    host.write_text("{")
    with pytest.raises(BadInputError) as caught:
        load_host_file(host)
    assert "\n" not in str(caught.value)


# -- found by `make fuzz` --------------------------------------------------------------------


@pytest.mark.parametrize("glibc", ["²", "2.3²", "9" * 5000, "2.35\n"])
def test_unicode_or_huge_glibc_from_the_environment(glibc: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # VERL_SETUP_GLIBC="²" reached select's int() and crashed with exit 1.
    monkeypatch.setenv("VERL_SETUP_GLIBC", glibc)
    result = run_cli("plan", *DRIVER, "--sm", "9.0")
    if glibc == "2.35\n":
        assert result.code == 0  # trailing newline of `ldd --version | ...` is not an error
    else:
        assert "bad glibc version" in one_line_error(result)
