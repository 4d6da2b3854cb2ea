"""What `wheelhouse build` decides before it builds: which extensions, TORCH_CUDA_ARCH_LIST,
MAX_JOBS, the PyPI toolkit pin from torch's own metadata, and its flags' bad values."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import host
from verl_setup.errors import BadInputError, InstallError
from verl_setup.matrix.load import load_matrix
from verl_setup.plan.request import Request
from verl_setup.plan.select import Plan, plan_row
from verl_setup.plan.target import build_target
from verl_setup.wheelbuild.build import arch_list, max_jobs, row_extensions
from verl_setup.wheelbuild.source import parse_sources
from verl_setup.wheelbuild.toolkit import host_toolkit, pypi_requirements, pypi_toolkit

MATRIX = load_matrix()


def plan(row: str, gpus: tuple[tuple[str, str], ...] = ()) -> Plan:
    facts = host(driver="580.95.05", gpus=gpus)
    target = build_target(
        Request(), env={}, rules=MATRIX.cuda, detect=lambda: facts, load_host=lambda _path: facts
    )
    return plan_row(target, MATRIX, row)


def test_a_megatron_row_builds_flash_attn_transformer_engine_and_apex() -> None:
    names = [n for n, _ in row_extensions(plan("verl0.9-vllm0.24.0-megatron"), ())]
    assert names == ["flash-attn", "transformer-engine-torch", "apex"]
    assert row_extensions(plan("verl0.9-vllm0.24.0"), ()) == [("flash-attn", "2.8.3")]


def test_only_names_an_extension_of_the_row() -> None:
    with pytest.raises(BadInputError, match="does not install apex"):
        row_extensions(plan("verl0.9-vllm0.24.0"), ("apex",))
    with pytest.raises(BadInputError, match="did you mean"):
        row_extensions(plan("verl0.9-vllm0.24.0"), ("flash-atn",))


def test_the_arch_list_comes_from_the_gpus_else_the_rows_range_with_ptx_on_the_newest() -> None:
    assert arch_list(plan("verl0.9-vllm0.24.0", (("NVIDIA H100 80GB HBM3", "9.0"),)), None) == ("9.0",)
    from_range = arch_list(plan("verl0.9-vllm0.24.0"), None)
    assert from_range[0] == "8.0"
    assert from_range[-1] == "12.0+PTX"
    assert "7.5" not in from_range  # below the row's sm_80 floor
    assert arch_list(plan("verl0.9-vllm0.24.0"), "8.0;9.0a") == ("8.0", "9.0a")


def test_max_jobs_is_bounded_by_cores_and_memory() -> None:
    assert max_jobs(3) == 3
    assert 1 <= max_jobs(None) <= 64


def test_the_pypi_toolkit_is_pinned_to_the_cuda_toolkit_torch_requires() -> None:
    requires = ['cuda-toolkit[cublas,cudart,nvrtc]==13.0.2; platform_system == "Linux"', "filelock"]
    assert pypi_requirements(requires, "2.11.0") == ["cuda-toolkit[nvcc,crt,cccl,cudart,nvvm]==13.0.2"]
    with pytest.raises(InstallError, match="CUDA 13 torches only"):
        pypi_requirements(["nvidia-cuda-runtime-cu12 (==12.4.127)"], "2.6.0")


def test_a_source_flag_is_name_equals_path() -> None:
    assert parse_sources(["flash-attn=/tmp/fa.tar.gz"]) == {"flash-attn": "/tmp/fa.tar.gz"}
    with pytest.raises(BadInputError, match="expected NAME=PATH"):
        parse_sources(["flash-attn"])


@pytest.mark.subprocess
def test_follow_hands_over_each_line_as_it_comes_and_kills_at_the_timeout() -> None:
    from verl_setup.util.runner import ProgramError, follow  # noqa: PLC0415

    lines: list[str] = []
    code = follow(["sh", "-c", "echo one; echo two >&2; exit 3"], timeout=30, on_line=lines.append)
    assert (code, lines) == (3, ["one", "two"])
    with pytest.raises(ProgramError, match=r"no end within 0\.5s"):
        follow(["sh", "-c", "echo start; sleep 30"], timeout=0.5, on_line=lines.append)
    assert lines[-1] == "start"


# The two lines a real `nvcc --version` (CUDA 13.0.88, this machine's /usr/local/cuda-13.0) ends with.
NVCC_VERSION = "Cuda compilation tools, release 13.0, V13.0.88\nBuild cuda_13.0.r13.0/compiler.36424714_0\n"


def _nvcc(folder: Path, *, headers: bool) -> Path:
    (folder / "bin").mkdir(parents=True)
    nvcc = folder / "bin" / "nvcc"
    nvcc.write_text(
        "#!/bin/sh\nprintf '%s\\n' " + " ".join(f"'{line}'" for line in NVCC_VERSION.splitlines()) + "\n"
    )
    nvcc.chmod(0o755)
    if headers:
        (folder / "include").mkdir()
        (folder / "include" / "cuda_runtime_api.h").write_text("/* stand-in */\n")
    return folder


@pytest.mark.subprocess
def test_an_nvcc_on_path_without_headers_beside_it_is_not_taken_as_cuda_home(tmp_path: Path) -> None:
    wrapper = _nvcc(tmp_path / "wrapper", headers=False)  # like /usr/local/bin/nvcc exec'ing the real one
    found = host_toolkit("13.0", {"PATH": f"{wrapper / 'bin'}:/usr/bin:/bin"})
    assert found is None or found.home != wrapper
    toolkit = _nvcc(tmp_path / "toolkit", headers=True)
    found = host_toolkit("13.0", {"PATH": f"{toolkit / 'bin'}:/usr/bin:/bin"})
    assert found is not None
    assert (found.home, found.version) == (toolkit, "13.0.88")


@pytest.mark.subprocess
def test_the_pypi_toolkit_tells_transformer_engine_to_read_the_nvidia_wheels_headers(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    _nvcc(site / "nvidia" / "cu13", headers=True)
    env = pypi_toolkit(site, "13.0", {"PATH": "/usr/bin:/bin"}).env({"PATH": "/usr/bin"})
    assert env["NVTE_BUILD_USE_NVIDIA_WHEELS"] == "1"
    assert env["CUDA_HOME"] == str(site / "nvidia" / "cu13")
