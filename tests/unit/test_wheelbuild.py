"""What `wheelhouse build` decides before it builds: which extensions, TORCH_CUDA_ARCH_LIST,
MAX_JOBS, the PyPI toolkit pin from torch's own metadata, and its flags' bad values."""

from __future__ import annotations

import pytest

from tests.conftest import host
from verl_setup.errors import BadInputError, InstallError
from verl_setup.matrix.load import load_matrix
from verl_setup.plan.select import Plan, plan_row
from verl_setup.plan.target import Request, build_target
from verl_setup.wheelbuild.build import arch_list, max_jobs, row_extensions
from verl_setup.wheelbuild.source import parse_sources
from verl_setup.wheelbuild.toolkit import pypi_requirements

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
