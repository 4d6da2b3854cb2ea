"""diagnose on real Ascend (HCCL, NPU memory) and ROCm (RCCL) logs (tests/fixtures/diagnose/SOURCES.md)."""

from __future__ import annotations

import pytest

from tests.unit.test_diagnose import run

# file, class, evidence line, facts that must be read from the log
ACCEL_CASES = [
    ("hccl-init-vllm-ascend-672.log", "hccl-init", 1, {"code": "15", "rank": "1"}),
    ("hccl-init-gpustack-2021.log", "hccl-init", 1, {"code": "0x0000000005000002"}),
    ("hccl-timeout-vllm-ascend-486.log", "hccl-timeout", 9, {}),
    ("hccl-timeout-llamafactory-5071.log", "hccl-timeout", 2, {}),
    ("npu-oom-vllm-ascend-1127.log", "npu-oom", 3,
     {"asked": "30.00 MiB", "npu": "3", "total": "60.96 GiB", "free": "14.24 MiB"}),
    ("rccl-rccl-1454.log", "rccl", 1, {"warn": "Cuda failure 'invalid argument'"}),
    ("import-error-cann-missing-recorded.log", "import-error", 8, {"library": "libhccl.so"}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "cls", "line", "facts"), ACCEL_CASES, ids=[c[0].rsplit(".", 1)[0] for c in ACCEL_CASES]
)
def test_real_accelerator_log_names_its_class_line_and_figures(
    name: str, cls: str, line: int, facts: dict[str, str]
) -> None:
    d = run(name)
    assert d.verdict is not None
    assert d.cls == cls
    assert d.verdict.evidence[0].line == line
    assert {k: d.verdict.facts.get(k) for k in facts} == facts
    assert d.verdict.remedy


def test_hccl_remedies_name_the_ascend_settings() -> None:
    init = run("hccl-init-vllm-ascend-672.log").verdict
    timeout = run("hccl-timeout-llamafactory-5071.log").verdict
    assert init is not None
    assert timeout is not None
    assert "ASCEND_RT_VISIBLE_DEVICES" in " ".join(init.remedy)
    assert "HCCL_CONNECT_TIMEOUT" in " ".join(timeout.remedy)


def test_an_hccl_init_failure_outranks_the_timeouts_it_causes() -> None:
    d = run("hccl-timeout-vllm-ascend-486.log", "hccl-init-vllm-ascend-672.log")
    assert d.cls == "hccl-init"
    assert "hccl-timeout" in [f.cls for f in d.others]


def test_an_env_without_cann_is_told_to_source_set_env() -> None:
    d = run("import-error-cann-missing-recorded.log")
    assert d.verdict is not None
    assert "libhccl.so cannot be loaded" in d.verdict.summary
    assert "set_env.sh" in d.verdict.remedy[0]
