"""Selection policy, stated as sentences, against the bundled matrix."""

from __future__ import annotations

import dataclasses

import pytest

from tests.conftest import host
from verl_setup.errors import BadInputError, NoCompatibleRowError
from verl_setup.host.facts import HostFacts
from verl_setup.matrix.load import load_matrix
from verl_setup.plan.request import Request
from verl_setup.plan.select import Plan, select
from verl_setup.plan.target import build_target

MATRIX = load_matrix()


def plan_for(facts: HostFacts, env: dict[str, str] | None = None, **request: object) -> Plan:
    target = build_target(
        Request(**request),  # type: ignore[arg-type]
        env=env or {},
        rules=MATRIX.cuda,
        detect=lambda: facts,
        load_host=lambda _path: facts,
    )
    return select(target, MATRIX)


H100 = (("NVIDIA H100 80GB HBM3", "9.0"),)


def test_driver_535_never_selects_cuda_13() -> None:
    plan = plan_for(host(driver="535.129.03", gpus=H100))
    assert plan.row.torch.cuda is not None
    assert plan.row.torch.cuda.startswith("12.")
    cuda13 = [r for r in plan.rejected if MATRIX.row(r.id).requires.cuda == "13.0"]
    assert cuda13
    assert all(
        any("driver >= 580.65.06 needed" in x and "535.129.03" in x for x in r.reasons) for r in cuda13
    )


def test_driver_580_selects_the_newest_verl() -> None:
    plan = plan_for(host(driver="580.95.05", gpus=H100))
    assert plan.row.id == "verl0.9-vllm0.24.0"
    assert not any("minor-version" in w for w in plan.warnings)


def test_compat_policy_allows_minor_version_compatibility_with_a_warning() -> None:
    plan = plan_for(host(driver="535.129.03", gpus=H100))
    assert plan.row.requires.cuda == "12.8"
    assert any("minor-version compatibility" in w and ">= 575.51.03" in w for w in plan.warnings)


def test_strict_policy_requires_the_full_support_driver() -> None:
    plan = plan_for(host(driver="550.54.15", gpus=H100), policy="strict")
    assert plan.row.requires.cuda == "12.4"
    assert plan.row.id == "verl0.5-vllm0.8.5"
    reasons = {r.id: r.reasons for r in plan.rejected}
    assert (
        "driver >= 570.26 needed for full CUDA 12.8 support (policy strict), host has 550.54.15"
        in reasons["verl0.7-vllm0.17.0"]
    )


def test_driver_below_every_family_floor_exits_3_naming_the_nearest_rows() -> None:
    with pytest.raises(NoCompatibleRowError) as info:
        plan_for(host(driver="470.57.02", gpus=(("NVIDIA A100-SXM4-80GB", "8.0"),)))
    message = str(info.value)
    assert "Nearest (smallest change first):" in message
    assert "driver >= 525.60.13 needed" in message
    assert "host has 470.57.02" in message
    assert info.value.exit_code == 3


def test_blackwell_rejects_cuda_12_4_rows() -> None:
    with pytest.raises(NoCompatibleRowError, match=r"needs CUDA >= 12.8, row is built with 12.4"):
        plan_for(host(driver="570.133.20", gpus=(("NVIDIA B200", "10.0"),)), verl="0.5")
    plan = plan_for(host(driver="570.133.20", gpus=(("NVIDIA B200", "10.0"),)))
    assert plan.row.requires.cuda in {"12.8", "12.9"}


def test_v100_is_below_flash_attention_2s_minimum() -> None:
    with pytest.raises(
        NoCompatibleRowError,
        match=r"compute capability >= 8.0 needed, GPU 'Tesla V100-SXM2-32GB' is 7.0",
    ):
        plan_for(host(driver="550.54.15", gpus=(("Tesla V100-SXM2-32GB", "7.0"),)))


def test_mixed_gpus_are_checked_each() -> None:
    gpus = (("NVIDIA A100-SXM4-80GB", "8.0"), ("NVIDIA B200", "10.0"))
    plan = plan_for(host(driver="580.95.05", gpus=gpus))
    assert any("different compute capability" in w for w in plan.warnings)
    rejected = {r.id: r.reasons for r in plan.rejected}
    assert any("B200" in reason for reason in rejected["verl0.5-vllm0.8.5"])


def test_no_gpu_selects_the_cpu_row_and_gpu_rows_say_why() -> None:
    plan = plan_for(host())
    assert plan.row.id == "cpu"
    assert plan.row.engine.name == "none"
    accelerator_rows = {r.id for r in plan.matrix.rows if r.requires.accelerator}
    assert all("needs an NVIDIA GPU" in r.reasons[-1] for r in plan.rejected if r.id not in accelerator_rows)
    assert all("needs Ascend NPUs" in r.reasons[-1] for r in plan.rejected if r.id in accelerator_rows)


def test_cpu_row_on_a_gpu_host_only_on_request() -> None:
    facts = host(driver="580.95.05", gpus=H100)
    assert plan_for(facts).row.id != "cpu"
    assert plan_for(facts, engine="none").row.id == "cpu"


def test_requested_engine_and_verl_prefix_filter_rows() -> None:
    facts = host(driver="580.95.05", gpus=H100)
    assert plan_for(facts, engine="sglang").row.id == "verl0.9-sglang0.5.12"
    assert plan_for(facts, verl="0.7").row.id == "verl0.7-vllm0.17.0"
    assert plan_for(facts, verl="0.4", engine="sglang").row.id == "verl0.4-sglang0.4.6.post5"
    # A prefix is whole components: 0.7 matches 0.7.1, never 0.70.
    with pytest.raises(NoCompatibleRowError):
        plan_for(facts, verl="0.70")


def test_python_313_is_rejected_because_uv_ignores_upper_bounds() -> None:
    with pytest.raises(NoCompatibleRowError, match=r"Python 3.13 requested, row supports 3.10, 3.11, 3.12"):
        plan_for(host(driver="580.95.05", gpus=H100), python="3.13")


def test_exact_python_patch_is_kept_and_flagged_when_it_differs() -> None:
    plan = plan_for(host(driver="580.95.05", gpus=H100), python="3.12.7")
    assert plan.python == "3.12.7"
    assert any("same exact version on every Ray node" in w for w in plan.warnings)
    assert plan_for(host(driver="580.95.05", gpus=H100)).python == "3.12.3"


def test_old_glibc_rejects_rows_with_newer_wheels() -> None:
    plan = plan_for(host(driver="580.95.05", gpus=H100, glibc="2.31"))
    reasons = {r.id: r.reasons for r in plan.rejected}
    assert any(r.startswith("glibc >= 2.34 needed, host has 2.31") for r in reasons["verl0.9-sglang0.5.12"])
    assert plan.row.id == "verl0.9-vllm0.24.0"


def test_an_aarch64_host_gets_an_aarch64_row_and_never_an_x86_one() -> None:
    plan = plan_for(host(driver="580.95.05", gpus=(("NVIDIA GH200 480GB", "9.0"),), arch="aarch64"))
    assert plan.row.id == "verl0.9-vllm0.24.0-aarch64"
    x86 = [r for r in plan.rejected if MATRIX.row(r.id).requires.arch == ("x86_64",)]
    assert x86
    assert all("platform x86_64 needed, host is aarch64" in r.reasons for r in x86)


def test_a_gb10_dgx_spark_on_driver_580_gets_an_aarch64_row() -> None:
    """Compute capability 12.1 runs the sm_120 builds (same-major forward compatibility; audit
    2026-12-c E2): the aarch64 rows take it, and their evidence says so."""
    plan = plan_for(host(driver="580.95.05", gpus=(("NVIDIA GB10", "12.1"),), arch="aarch64", glibc="2.39"))
    assert plan.row.id == "verl0.9-vllm0.24.0-aarch64"
    assert "sm_121 (GB10, DGX Spark)" in plan.row.evidence["requires.compute_capability"]
    by_name = plan_for(host(driver="580.95.05", gpus=(("GB10", None),), arch="aarch64", glibc="2.39"))
    assert by_name.row.id == "verl0.9-vllm0.24.0-aarch64"


def test_an_aarch64_host_below_the_sglang_wheels_glibc_is_refused_for_sglang() -> None:
    with pytest.raises(NoCompatibleRowError, match=r"glibc >= 2\.34 needed, host has 2\.28"):
        plan_for(
            host(driver="580.95.05", gpus=(("NVIDIA GH200 480GB", "9.0"),), arch="aarch64", glibc="2.28"),
            engine="sglang",
        )


def test_flags_override_environment_override_host_file() -> None:
    facts = host(driver="535.129.03", gpus=H100)
    env = {"VERL_SETUP_DRIVER": "550.54.15", "VERL_SETUP_POLICY": "strict"}
    from_env = plan_for(facts, env)
    assert from_env.target.driver.source == "env VERL_SETUP_DRIVER"
    assert str(from_env.target.driver.value) == "550.54.15"
    from_flag = plan_for(facts, env, driver="580.65.06")
    assert from_flag.target.driver.source == "flag --driver"
    assert from_flag.target.policy.source == "env VERL_SETUP_POLICY"
    detected = plan_for(facts)
    assert detected.target.driver.source.startswith("detected (procfs")


def test_gpu_names_map_to_compute_capability_through_the_table() -> None:
    plan = plan_for(host(), driver="580.65.06", gpus=("H200", "NVIDIA L40S"))
    assert [g.compute_capability for g in plan.target.gpus.value] == ["9.0", "8.9"]
    with pytest.raises(BadInputError, match="unknown GPU 'Quantum 9000'"):
        plan_for(host(), driver="580.65.06", gpus=("Quantum 9000",))
    plan = plan_for(host(), driver="580.65.06", gpus=("Quantum 9000",), sm="9.0")
    assert plan.target.gpus.value[0].compute_capability == "9.0"


def test_driver_without_gpu_model_plans_with_a_warning() -> None:
    plan = plan_for(host(), driver="580.65.06")
    assert plan.row.id == "verl0.9-vllm0.24.0"
    assert any("GPU model unknown" in w for w in plan.warnings)


def test_every_rejected_row_has_at_least_one_reason_and_the_json_contract_holds() -> None:
    data = plan_for(host(driver="580.95.05", gpus=H100)).to_json()
    assert {"row", "policy", "facts", "warnings", "rejected"} <= set(data)
    assert {"id", "verl", "engine", "torch", "python", "packages"} <= set(data["row"])
    assert data["row"]["engine"]["name"] == "vllm"
    assert data["row"]["torch"]["cuda"] == "13.0"
    assert all(set(f) == {"value", "source"} for f in data["facts"].values())
    assert len(data["rejected"]) == len(MATRIX.rows) - 1
    assert all(r["reasons"] for r in data["rejected"])


def test_planning_for_another_machine_never_detects_this_one() -> None:
    def no_detection() -> HostFacts:
        raise AssertionError("detection ran for a plan described by flags")

    target = build_target(
        Request(driver="580.65.06", gpus=("H100",)),
        env={},
        rules=MATRIX.cuda,
        detect=no_detection,
        load_host=lambda _path: host(),
    )
    plan = select(target, MATRIX)
    assert plan.row.id == "verl0.9-vllm0.24.0"
    assert target.arch.value is None
    assert any("not given, so not checked" in w for w in plan.warnings)
    env_target = build_target(
        Request(driver="580.65.06"),
        env={"VERL_SETUP_ARCH": "aarch64", "VERL_SETUP_GLIBC": "2.39"},
        rules=MATRIX.cuda,
        detect=no_detection,
        load_host=lambda _path: host(),
    )
    assert (env_target.arch.source, env_target.glibc.value) == ("env VERL_SETUP_ARCH", "2.39")
    assert MATRIX.row(select(env_target, MATRIX).row.id).requires.arch == ("aarch64",)


def test_environment_no_gpu_and_sm_report_their_own_source() -> None:
    facts = host(driver="580.95.05", gpus=H100)
    plan = plan_for(facts, {"VERL_SETUP_NO_GPU": "True"})
    assert plan.row.id == "cpu"
    assert plan.target.gpus.source == "env VERL_SETUP_NO_GPU"
    assert plan.target.driver.source == "env VERL_SETUP_NO_GPU"
    sm = plan_for(facts, {"VERL_SETUP_SM": "9.0"})
    assert sm.target.gpus.source == "env VERL_SETUP_SM"


# Issue 11: the stacks verl users run. Each test is a policy, named as a sentence.

B200 = (("NVIDIA B200", "10.0"),)


def test_an_h100_on_the_r535_driver_gets_verl_0_9_1_on_cuda_12() -> None:
    plan = plan_for(host(driver="535.129.03", gpus=H100), python="3.12")
    assert plan.row.verl.version == "0.9.1"
    assert plan.row.torch.cuda == "12.8"
    assert any("minor-version compatibility" in w for w in plan.warnings)


def test_a_driver_older_than_the_gpu_architecture_is_refused_whatever_the_row() -> None:
    with pytest.raises(NoCompatibleRowError) as info:
        plan_for(host(driver="535.129.03", gpus=B200))
    assert "GPU 'NVIDIA B200' (Blackwell) needs driver >= 570.133.20 at all, host has 535.129.03" in str(
        info.value
    )


def test_the_nearest_rows_put_the_smallest_driver_upgrade_first() -> None:
    with pytest.raises(NoCompatibleRowError) as info:
        plan_for(host(driver="515.65.01", gpus=H100), python="3.12")
    nearest = str(info.value).split("Nearest (smallest change first): ", 1)[1]
    first = MATRIX.row(nearest.split(":", 1)[0])
    assert first.requires.cuda is not None
    assert first.requires.cuda.startswith("12.")  # an R525 upgrade, not an R580 one
    assert "580.65.06" not in nearest.split(";")[0]


def test_the_default_backend_never_selects_a_megatron_row() -> None:
    plan = plan_for(host(driver="580.95.05", gpus=H100))
    assert plan.row.backend == "fsdp"
    megatron = [r for r in plan.rejected if MATRIX.row(r.id).backend == "megatron"]
    assert megatron
    assert all(any("training backend megatron" in x for x in r.reasons) for r in megatron)


def test_asking_for_megatron_selects_a_megatron_row_with_transformer_engine() -> None:
    plan = plan_for(host(driver="580.95.05", gpus=H100), backend="megatron")
    assert plan.row.backend == "megatron"
    assert {"megatron-core", "transformer-engine", "transformer-engine-torch"} <= set(plan.row.packages)
    assert plan.target.backend.source == "flag --backend"


def test_the_backend_comes_from_the_flag_then_the_environment_then_the_host_file() -> None:
    facts = dataclasses.replace(host(driver="580.95.05", gpus=H100), backend="megatron")
    assert plan_for(facts).target.backend.source.endswith("(backend)")
    assert plan_for(facts, {"VERL_SETUP_BACKEND": "fsdp"}).row.backend == "fsdp"
    assert plan_for(facts, {"VERL_SETUP_BACKEND": "fsdp"}, backend="megatron").row.backend == "megatron"
    with pytest.raises(BadInputError, match="bad backend 'deepspeed'"):
        plan_for(facts, backend="deepspeed")


def test_no_row_ever_installs_the_unrelated_pypi_apex() -> None:
    for row in MATRIX.rows:
        if "apex" in row.packages:
            assert (
                MATRIX.rows_file.torch_extensions["apex"].build
                == "apex @ git+https://github.com/NVIDIA/apex.git"
            )


def test_plan_for_vllm_names_the_releases_verl_0_9_1_excludes_and_why() -> None:
    plan = plan_for(host(driver="580.95.05", gpus=H100), engine="vllm")
    excluded = {v: u.reason for u in plan.unfit for v in u.versions}
    assert "0.33.0" in excluded
    assert "transformers>=5.16.1" in excluded["0.33.0"]
    assert "0.19.0" in excluded
    assert not plan_for(host(driver="580.95.05", gpus=H100)).unfit  # only when an engine is asked for


def test_forward_compatibility_fits_cuda_13_on_r535_for_a_data_center_gpu_with_a_loud_warning() -> None:
    plan = plan_for(host(driver="535.129.03", gpus=H100), policy="forward")
    assert plan.row.requires.cuda == "13.0"
    assert any("works only inside the rendered image" in w and "cuda-compat-13-0" in w for w in plan.warnings)
    assert any("end of life" in w for w in plan.warnings)


def test_forward_compatibility_refuses_a_geforce_card() -> None:
    plan = plan_for(host(driver="535.129.03", gpus=(("NVIDIA GeForce RTX 4090", "8.9"),)), policy="forward")
    assert plan.row.requires.cuda != "13.0"
    cuda13 = [r for r in plan.rejected if MATRIX.row(r.id).requires.cuda == "13.0"]
    assert any("not a data-center GPU" in x for r in cuda13 for x in r.reasons)


def test_forward_compatibility_refuses_a_driver_branch_nvidia_does_not_list() -> None:
    plan = plan_for(host(driver="550.54.15", gpus=H100), policy="forward")
    assert plan.row.requires.cuda != "13.0"
    cuda13 = [r for r in plan.rejected if MATRIX.row(r.id).requires.cuda == "13.0"]
    assert any("driver branch R550 is not one NVIDIA supports" in x for r in cuda13 for x in r.reasons)
