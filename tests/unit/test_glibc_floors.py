"""glibc floors from the wheels, binary-only installs, and what plan and validate make of them."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import json_data, run_cli
from verl_setup.environment.index import DistFile, Release
from verl_setup.environment.uv import explain_failure
from verl_setup.maintenance.floors import compute_floor
from verl_setup.matrix.load import default_matrix_path, load_matrix
from verl_setup.matrix.resolved import Resolution, record_resolved
from verl_setup.util.binary import binary_only

BUNDLED = default_matrix_path()


def release(version: str, *filenames: str) -> Release:
    files = tuple(
        DistFile(
            filename=f,
            url=f"http://127.0.0.1/{f}",
            sha256=None,
            upload_time=None,
            yanked=None,
            requires_python=None,
            has_metadata=False,
        )
        for f in filenames
    )
    return Release(version=version, files=files)


# File names as the index lists them (llguidance 1.7.6, pandas 2.3.3, antlr4 4.9.3, six 1.17.0).
RELEASES = {
    "llguidance": release(
        "1.7.6",
        "llguidance-1.7.6-cp39-abi3-manylinux_2_31_x86_64.whl",
        "llguidance-1.7.6-cp39-abi3-manylinux_2_31_aarch64.whl",
        "llguidance-1.7.6-cp39-abi3-musllinux_1_2_x86_64.whl",
        "llguidance-1.7.6.tar.gz",
    ),
    "pandas": release(
        "2.3.3",
        "pandas-2.3.3-cp312-cp312-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
        "pandas-2.3.3-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
    ),
    "antlr4-python3-runtime": release("4.9.3", "antlr4-python3-runtime-4.9.3.tar.gz"),
    "six": release("1.17.0", "six-1.17.0-py2.py3-none-any.whl"),
}
PINS = {"llguidance": "1.7.6", "pandas": "2.3.3", "antlr4-python3-runtime": "4.9.3", "six": "1.17.0"}


def test_the_floor_is_the_highest_lowest_glibc_among_installable_wheels() -> None:
    floor = compute_floor(PINS, RELEASES, python="3.12", arch="x86_64", sdists=["antlr4-python3-runtime"])
    assert floor.glibc == "2.31"
    assert floor.set_by == ("llguidance 1.7.6 (manylinux_2_31)",)


def test_only_wheels_for_the_python_and_arch_count() -> None:
    # cp311's manylinux2014 wheel does not install on 3.12: pandas needs 2.24 there, 2.17 on 3.11.
    pins = {"pandas": "2.3.3", "six": "1.17.0"}
    assert compute_floor(pins, RELEASES, python="3.12", arch="x86_64").glibc == "2.24"
    assert compute_floor(pins, RELEASES, python="3.11", arch="x86_64").glibc == "2.17"
    # musllinux never installs on glibc; pure-Python wheels set no floor.
    assert compute_floor({"six": "1.17.0"}, RELEASES, python="3.12", arch="x86_64").glibc is None
    aarch = compute_floor({"llguidance": "1.7.6"}, RELEASES, python="3.12", arch="aarch64")
    assert aarch.glibc == "2.31"


def test_binary_only_names_exactly_the_sdists_built_on_purpose() -> None:
    assert binary_only([]) == ["--only-binary", ":all:"]
    assert binary_only(["antlr4-python3-runtime"]) == [
        "--only-binary",
        ":all:",
        "--no-binary",
        "antlr4-python3-runtime",
    ]
    matrix = load_matrix()
    sdists = matrix.rows_file.built_from_sdist
    assert "flashinfer-python" in sdists(matrix.row("verl0.6-sglang0.5.2"))  # pins 0.3.1: sdist only
    assert "flashinfer-python" not in sdists(matrix.row("verl0.9-vllm0.24.0"))  # pins 0.6.12: a wheel
    assert "antlr4-python3-runtime" in sdists(matrix.row("cpu"))


def test_a_missing_wheel_is_one_line_naming_the_package() -> None:
    # uv 0.13.9's own words (`uv pip compile --only-binary :all:` of verl0.9-vllm0.19.1-cu128 at
    # x86_64-manylinux_2_28, run 2026-12-01).
    stderr = (
        "error: No solution found when resolving dependencies\n"
        "  cause: Because vllm==0.19.1 has no usable wheels and you require vllm==0.19.1, we can "
        "conclude that your requirements are unsatisfiable.\n\n"
        "hint: Wheels are required for `vllm` because building from source is disabled for all "
        "packages (i.e., with `--no-build`)\n"
    )
    message = explain_failure(stderr)
    assert message.startswith("vllm has no wheel for this Python and platform")
    assert "binary-only" in message
    assert "\n" not in message


def test_plan_on_glibc_2_28_refuses_the_vllm_0_24_row_naming_llguidance() -> None:
    result = run_cli(
        "plan", "--json", "--glibc", "2.28", "--arch", "x86_64", "--driver", "580.95.05", "--gpu", "H100"
    )
    rejected = {r["id"]: r["reasons"] for r in json_data(result.out)["rejected"]}
    reasons = rejected["verl0.9-vllm0.24.0"]
    assert any(r.startswith("glibc >= 2.31 needed, host has 2.28") and "llguidance" in r for r in reasons)


def test_plan_on_glibc_2_17_refuses_the_verl_0_4_and_0_5_rows() -> None:
    for verl in ("0.4", "0.5"):
        result = run_cli(
            "plan",
            "--verl",
            verl,
            "--glibc",
            "2.17",
            "--arch",
            "x86_64",
            "--driver",
            "550.54.15",
            "--gpu",
            "A100",
        )
        assert result.code == 3
        assert f"verl{verl}-" in result.err
        assert "glibc >= 2.28 needed, host has 2.17" in result.err


def test_validate_fails_a_row_whose_glibc_is_below_its_wheels(tmp_path: Path) -> None:
    text = BUNDLED.read_text(encoding="utf-8")
    for name in ("cuda.yaml", "proof.yaml"):
        (tmp_path / name).write_text((BUNDLED.parent / name).read_text(encoding="utf-8"), encoding="utf-8")
    rows = tmp_path / "verl.yaml"
    rows.write_text(text, encoding="utf-8")
    row = load_matrix(rows).row("verl0.9-vllm0.24.0")
    record_resolved(
        rows,
        {
            row.id: Resolution(
                row_sha256=row.content_hash(),
                python="3.12.3",
                platform="x86_64-manylinux_2_31",
                pins={"llguidance": ("1.7.6", "0" * 16)},
                glibc_floor="2.31",
                glibc_floor_set_by=("llguidance 1.7.6 (manylinux_2_31)",),
            )
        },
    )
    assert run_cli("matrix", "validate", str(rows)).code == 0
    # The deliberately wrong row: its glibc lowered below what its wheels need.
    start = text.index("  - id: verl0.9-vllm0.24.0\n")
    at = text.index('glibc: "2.31"', start)
    rows.write_text(text[:at] + 'glibc: "2.28"' + text[at + len('glibc: "2.31"') :], encoding="utf-8")
    result = run_cli("matrix", "validate", str(rows))
    assert result.code == 2
    (line,) = [ln for ln in result.out.splitlines() if "requires.glibc" in ln]
    assert "verl0.9-vllm0.24.0: requires.glibc: 2.28 is below 2.31" in line
    assert "llguidance 1.7.6" in line


def test_forward_compatibility_gpu_list_follows_nvidias_data_center_table() -> None:
    rules = load_matrix().cuda
    assert rules.is_data_center("NVIDIA GB300")  # the B300 pattern missed it (audit 2026-12-b D7/C7)
    assert rules.is_data_center("NVIDIA RTX PRO 6000 Blackwell Server Edition")
    assert not rules.is_data_center("NVIDIA RTX PRO 6000 Blackwell Workstation Edition")
    assert not rules.is_data_center("Tesla V100-SXM2-32GB")  # CUDA 13 dropped Volta
    blackwell = rules.architecture("10.0")
    assert blackwell is not None
    assert blackwell.min_driver == "570.133.20"  # HGX B200's documented minimum
