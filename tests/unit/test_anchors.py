"""uv's UV_CUDA_DRIVER_VERSION and conda's CONDA_OVERRIDE_CUDA override detection, below our own
flags and variables, and each fact says where it came from."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import host
from tests.unit.test_select import H100, MATRIX, plan_for
from verl_setup.errors import BadInputError
from verl_setup.plan.request import Request
from verl_setup.plan.select import select
from verl_setup.plan.target import build_target


def test_uvs_driver_override_replaces_the_detected_driver_and_says_so() -> None:
    plan = plan_for(host(driver="580.95.05", gpus=H100), {"UV_CUDA_DRIVER_VERSION": "535.129.03"})
    assert str(plan.target.driver.value) == "535.129.03"
    assert plan.target.driver.source == "env UV_CUDA_DRIVER_VERSION (uv's override of the detected driver)"
    assert plan.row.requires.cuda is not None
    assert plan.row.requires.cuda.startswith("12.")
    assert plan.target.gpus.source.startswith("detected")  # the GPUs are still this machine's


def test_our_own_flag_and_variable_beat_the_anchors() -> None:
    facts = host(driver="580.95.05", gpus=H100)
    env = {"UV_CUDA_DRIVER_VERSION": "535.129.03", "CONDA_OVERRIDE_CUDA": "12.4"}
    assert plan_for(facts, env, driver="550.54.15").target.driver.source == "flag --driver"
    ours = plan_for(facts, {**env, "VERL_SETUP_DRIVER": "550.54.15"})
    assert ours.target.driver.source == "env VERL_SETUP_DRIVER"
    assert plan_for(facts, env).target.driver.source.startswith("env UV_CUDA_DRIVER_VERSION")


def test_condas_cuda_override_means_at_least_that_toolkits_ga_driver() -> None:
    # A CPU-only CI runner plans a CUDA 12.4 machine (pixi's and conda's documented use).
    plan = plan_for(host(), {"CONDA_OVERRIDE_CUDA": "12.4"})
    assert str(plan.target.driver.value) == "550.54.14"  # NVIDIA's Table 3: CUDA 12.4 GA
    assert plan.target.driver.source.startswith("env CONDA_OVERRIDE_CUDA=12.4 (conda's override of __cuda")
    assert plan.row.id != "cpu"
    # A CUDA newer than the table knows counts as the newest toolkit of its family below it.
    newer = plan_for(host(), {"CONDA_OVERRIDE_CUDA": "12.99"})
    assert "runs CUDA 12.9," in newer.target.driver.source


def test_condas_empty_cuda_override_means_no_gpu() -> None:
    plan = plan_for(host(driver="580.95.05", gpus=H100), {"CONDA_OVERRIDE_CUDA": ""})
    assert plan.row.id == "cpu"
    assert plan.target.driver.value is None
    assert plan.target.gpus.source == "env CONDA_OVERRIDE_CUDA='' (conda's override: no CUDA on this machine)"


def test_a_host_file_is_another_machines_record_and_the_anchors_leave_it_alone() -> None:
    facts = host(driver="580.95.05", gpus=H100)
    target = build_target(
        Request(host_file=Path("node.json")),
        env={"UV_CUDA_DRIVER_VERSION": "535.129.03"},
        rules=MATRIX.cuda,
        detect=lambda: facts,
        load_host=lambda _path: facts,
    )
    assert str(target.driver.value) == "580.95.05"
    assert select(target, MATRIX).row.requires.cuda == "13.0"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"UV_CUDA_DRIVER_VERSION": "latest"}, "env UV_CUDA_DRIVER_VERSION: bad driver version 'latest'"),
        ({"CONDA_OVERRIDE_CUDA": "twelve"}, "env CONDA_OVERRIDE_CUDA='twelve': expected a CUDA version"),
        ({"CONDA_OVERRIDE_CUDA": "10.2"}, "env CONDA_OVERRIDE_CUDA='10.2': no CUDA 10.x toolkit"),
    ],
    ids=["uv-word", "conda-word", "conda-too-old"],
)
def test_a_bad_anchor_value_is_one_clear_error(env: dict[str, str], message: str) -> None:
    with pytest.raises(BadInputError, match="^" + message.replace("(", r"\(").replace(".", r"\.")):
        plan_for(host(driver="580.95.05", gpus=H100), env)
