"""The pure parts of `matrix check` and `matrix propose`: reading uv's output and a release's metadata."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from verl_setup.environment.index import DistFile, Release
from verl_setup.maintenance.check import resolution_of
from verl_setup.maintenance.metadata import (
    ReleaseMeta,
    cuda_of,
    exact_pin,
    glibc_floor,
    linux_wheels,
    python_minors,
    requirements_of,
    serves_python,
)
from verl_setup.matrix.resolved import Resolution, load_resolved, record_resolved

COMPILED = """\
six==1.17.0 \\
    --hash=sha256:{a} \\
    --hash=sha256:{b}
    # via -r requirements.in
torch==2.11.0 ; sys_platform == 'linux' \\
    --hash=sha256:{c}
"""


def test_a_resolution_keys_each_distribution_by_version_and_its_files() -> None:
    one = resolution_of(COMPILED.format(a="1" * 64, b="2" * 64, c="3" * 64))
    reordered = resolution_of(COMPILED.format(a="2" * 64, b="1" * 64, c="3" * 64))
    reuploaded = resolution_of(COMPILED.format(a="1" * 64, b="4" * 64, c="3" * 64))
    assert {name: version for name, (version, _) in one.items()} == {"six": "1.17.0", "torch": "2.11.0"}
    assert one == reordered  # uv's hash order does not matter
    assert one["six"][1] != reuploaded["six"][1]  # a changed file under the same version shows
    assert one["torch"] == reuploaded["torch"]


def meta(*requires: str, extras: tuple[str, ...] = ()) -> ReleaseMeta:
    return ReleaseMeta(
        name="verl",
        version="0.9.1",
        requires_python=SpecifierSet("<3.13,>=3.10"),
        extras=extras,
        requirements=tuple(Requirement(r) for r in requires),
        wheel="verl-0.9.1-py3-none-any.whl",
        uploaded="2026-09-20",
    )


def test_an_extra_brings_its_own_pins_and_those_of_the_extras_it_names() -> None:
    # verl 0.9.1's real shape: [vllm] = verl[verl-core] + vllm==0.24.0 + torch==2.11.0
    verl = meta(
        "numpy>=2.0.0",
        'verl[verl-core]; extra == "vllm"',
        'vllm==0.24.0; extra == "vllm"',
        'torch==2.11.0; extra == "vllm"',
        'tensordict<=0.10.0; extra == "verl-core"',
        'sglang==0.5.12; extra == "sglang"',
        extras=("vllm", "sglang", "verl-core"),
    )
    with_vllm = [str(r).split(";")[0] for r in requirements_of(verl, "vllm")]
    assert sorted(with_vllm) == ["numpy>=2.0.0", "tensordict<=0.10.0", "torch==2.11.0", "vllm==0.24.0"]
    assert [str(r) for r in requirements_of(verl)] == ["numpy>=2.0.0"]
    assert exact_pin(requirements_of(verl, "sglang"), "sglang") == "0.5.12"
    assert exact_pin(requirements_of(verl, "vllm"), "numpy") is None


@pytest.mark.parametrize(
    ("requirement", "cuda"),
    [
        pytest.param(
            'nvidia-cuda-runtime-cu12==12.8.90; platform_system == "Linux"', "12.8", id="cu12-runtime"
        ),
        pytest.param(
            'cuda-toolkit[cublas,cudart,nvrtc]==13.0.3; platform_system == "Linux"', "13.0", id="cu13-toolkit"
        ),
    ],
)
def test_torch_s_cuda_comes_from_the_runtime_it_requires(requirement: str, cuda: str) -> None:
    found = cuda_of([Requirement("filelock"), Requirement(requirement)])
    assert found is not None
    assert found[0] == cuda


def test_a_cpu_torch_names_no_cuda() -> None:
    assert cuda_of([Requirement("filelock"), Requirement("sympy>=1.13")]) is None


def test_python_minors_honour_upper_bounds_and_wheel_tags() -> None:
    assert python_minors(SpecifierSet("<3.13,>=3.10"), SpecifierSet(">=3.11")) == ["3.11", "3.12"]
    abi3 = {"cp38-abi3": "2.28"}
    assert serves_python(abi3, "3.12")
    assert serves_python({"cp312-cp312": "2.28"}, "3.12")
    assert not serves_python({"cp311-cp311": "2.28"}, "3.12")
    assert serves_python({"py3-none": "any"}, "3.14")


def test_the_baseline_file_round_trips_and_is_the_same_bytes_for_the_same_resolution(tmp_path: Path) -> None:
    rows = tmp_path / "verl.yaml"
    one = Resolution(row_sha256="a" * 64, python="3.12.3", platform="x86_64-manylinux_2_28", pins={})
    two = Resolution(
        row_sha256="b" * 64,
        python="3.10.12",
        platform="x86_64-manylinux_2_28",
        pins={"torch": ("2.11.0", "0123456789abcdef"), "six": ("1.17.0", "fedcba9876543210")},
    )
    written = record_resolved(rows, {"z-row": one, "a-row": two})
    first = written.read_bytes()
    record_resolved(rows, {"a-row": two})  # recording a row again with the same resolution
    assert written.read_bytes() == first
    assert load_resolved(rows) == {"a-row": two, "z-row": one}
    assert first.index(b"a-row") < first.index(b"z-row")  # sorted: a new row diffs as one block


def release_of(*filenames: str) -> Release:
    files = tuple(
        DistFile(
            filename=n,
            url=f"https://index.example/{n}",
            sha256=None,
            upload_time=None,
            yanked=None,
            requires_python=None,
            has_metadata=True,
        )
        for n in filenames
    )
    return Release(version="0", files=files)


@pytest.mark.parametrize(
    ("filename", "expected", "floor"),
    [
        # File names as the index serves them (ecosystem review §1.1 R; tests/fixtures/doctor).
        ("ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl", {"cp312-cp312": "2.17"}, "2.17"),
        ("vllm-0.6.3-cp38-abi3-manylinux1_x86_64.whl", {"cp38-abi3": "2.5"}, "2.5"),
        ("torch-2.6.0-cp312-cp312-manylinux1_x86_64.whl", {"cp312-cp312": "2.5"}, "2.5"),
        ("x-1-cp312-cp312-manylinux2010_x86_64.whl", {"cp312-cp312": "2.12"}, "2.12"),
        ("torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl", {"cp312-cp312": "2.28"}, "2.28"),
        (
            "numpy-2.2.6-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
            {"cp312-cp312": "2.17"},
            "2.17",
        ),
        ("ray-2.60.0-cp312-cp312-manylinux2014_aarch64.whl", {}, None),
    ],
    ids=[
        "ray-manylinux2014",
        "vllm-abi3-manylinux1",
        "torch-manylinux1",
        "manylinux2010",
        "pep600",
        "both",
        "arm",
    ],
)
def test_legacy_manylinux_names_count_as_the_glibc_pep_600_gives_them(
    filename: str, expected: dict[str, str], floor: str | None
) -> None:
    wheels = linux_wheels(release_of(filename), "x86_64")
    assert wheels == expected
    assert serves_python(wheels, "3.12") is bool(expected)
    assert glibc_floor(wheels, "3.12") == floor


def test_the_lowest_floor_of_several_wheels_for_one_python_is_kept() -> None:
    release = release_of(
        "x-1-cp312-cp312-manylinux_2_28_x86_64.whl", "x-1-cp312-cp312-manylinux2014_x86_64.whl", "x-1.tar.gz"
    )
    assert linux_wheels(release, "x86_64") == {"cp312-cp312": "2.17"}


def test_python_tags_are_matched_as_packaging_tags_lists_them() -> None:
    assert serves_python({"cp312-none": "2.28"}, "3.12")
    assert serves_python({"py312-none": "any"}, "3.12")
    assert not serves_python({"cp313-abi3": "2.28"}, "3.12")  # abi3 serves newer minors only
    assert not serves_python({"pp310-pypy310_pp73": "2.28"}, "3.10")
    assert not serves_python({"cp312-cp312d": "2.28"}, "3.12")  # a debug build's ABI
