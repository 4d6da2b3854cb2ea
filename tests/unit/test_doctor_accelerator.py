"""doctor's accelerator check on hosts built from recorded npu-smi / rocm-smi outputs
(tests/fixtures/accel) and the CANN install record: visible devices, CANN's environment, the
toolkit against the row, Ray's resource name."""

from __future__ import annotations

import dataclasses

from tests.conftest import host
from tests.unit.test_accelerator_detect import ACCEL
from verl_setup.doctor.checks.accelerator import check_accelerator
from verl_setup.doctor.context import Context, Options
from verl_setup.host import amd, ascend
from verl_setup.host.facts import Accelerator, HostFacts
from verl_setup.matrix.load import load_matrix

MATRIX = load_matrix()
CANN_HOME = "/usr/local/Ascend/ascend-toolkit/latest"


def npu_host(cann: str | None = "8.5.1") -> HostFacts:
    parsed = ascend.parse_npu_smi_info((ACCEL / "npu-smi-info-24.1.1-910b4-1panel9472.txt").read_text())
    assert parsed is not None
    acc = Accelerator(
        family="ascend",
        devices=parsed[1],
        driver=parsed[0],
        toolkit="CANN",
        toolkit_version=cann,
        toolkit_source="ascend_toolkit_install.info" if cann else None,
        source="npu-smi info",
    )
    return dataclasses.replace(host(), accelerators=(acc,))


def amd_host() -> HostFacts:
    devices = amd.parse_rocm_smi((ACCEL / "rocm-smi-showproductname-mi300x-vf.txt").read_text())
    assert devices is not None
    acc = Accelerator(
        family="rocm", devices=devices, toolkit="ROCm", toolkit_version="7.0.2", source="rocm-smi"
    )
    return dataclasses.replace(host(), accelerators=(acc,))


def check(facts: HostFacts, env: dict[str, str]):  # type: ignore[no-untyped-def]
    # no PATH: no Python env to probe; the row is planned from the given facts
    ctx = Context(options=Options(), host=facts, env={"PATH": "", **env}, matrix=MATRIX)
    return check_accelerator(ctx)


SOURCED = {"ASCEND_TOOLKIT_HOME": CANN_HOME, "LD_LIBRARY_PATH": f"{CANN_HOME}/lib64:/usr/lib"}


def test_a_sourced_cann_matching_the_row_passes_and_names_ray_npu() -> None:
    result = check(npu_host(), {**SOURCED, "ASCEND_RT_VISIBLE_DEVICES": "0,1"})
    assert result.status == "pass", result.summary
    text = " ".join(f.message for f in result.findings)
    assert "resource 'NPU'" in text
    assert "CANN 8.5.1 matches row verl0.8-vllm-ascend0.18.0rc1" in text


def test_cann_not_sourced_fails_with_set_env() -> None:
    result = check(npu_host(), {})
    assert result.status == "fail"
    assert "set_env.sh" in (result.remedy or "")


def test_a_visible_npu_that_does_not_exist_fails() -> None:
    result = check(npu_host(), {**SOURCED, "ASCEND_RT_VISIBLE_DEVICES": "0,7"})
    assert result.status == "fail"
    assert "names device(s) 7, but this host has 2" in result.summary


def test_a_cann_of_another_minor_fails_against_the_row() -> None:
    result = check(npu_host("8.1.RC1.alpha001"), SOURCED)
    assert result.status in ("fail", "warn")
    assert any("8.1.RC1.alpha001" in f.message for f in result.findings)


def test_an_amd_host_checks_hip_and_rocr_visibility() -> None:
    result = check(amd_host(), {"HIP_VISIBLE_DEVICES": "0,1", "ROCR_VISIBLE_DEVICES": "0,1,2,3"})
    messages = " ".join(f.message for f in result.findings)
    assert "both set" in messages
    assert "no rocm row in this matrix" in messages
    assert result.status == "warn"


def test_no_accelerator_is_a_skip() -> None:
    assert check(host(), {}).status == "skip"
