"""doctor checks fed with recorded GPU readings (tests/fixtures/nvidia through the nvidia-smi XML
parser) and recorded torch metadata (tests/fixtures/doctor), plus the launch-command parser."""

from __future__ import annotations

import dataclasses
import email.parser
import json
import time
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, NVIDIA, host, json_data, run_cli
from verl_setup.doctor.checks.cuda import check_cuda, driver_vs_torch
from verl_setup.doctor.checks.gpu_memory import check_gpu_memory
from verl_setup.doctor.checks.launch import check_launch
from verl_setup.doctor.context import Context, Options
from verl_setup.doctor.probes.env import torch_cuda
from verl_setup.doctor.probes.launch_command import hydra_value, parse_launch
from verl_setup.doctor.result import CheckResult, Evidence, Finding, fold, report_json, report_text
from verl_setup.host import nvidia, system
from verl_setup.host.facts import HostFacts, NvidiaDriver
from verl_setup.matrix.load import load_matrix
from verl_setup.util.versions import DriverVersion

MATRIX = load_matrix()
RULES = MATRIX.cuda
TORCH = FIXTURES / "doctor"


def recorded_host(xml: str) -> HostFacts:
    """A host whose driver and GPUs are what a real `nvidia-smi -q -x` printed."""
    reading = nvidia.parse_smi_xml((NVIDIA / xml).read_text())
    assert reading is not None
    assert reading.driver is not None
    facts = host(driver=reading.driver)
    assert facts.nvidia is not None
    return dataclasses.replace(
        facts,
        nvidia=dataclasses.replace(facts.nvidia, cuda=reading.cuda, cuda_source="nvidia-smi -q -x"),
        gpus=reading.gpus,
    )


def context(facts: HostFacts, *launch: str, env: dict[str, str] | None = None) -> Context:
    # No PATH, no VIRTUAL_ENV: no Python env to probe, so nothing but the given facts is read.
    return Context(
        options=Options(launch=tuple(launch)),
        host=facts,
        env=env if env is not None else {"PATH": ""},
        matrix=MATRIX,
    )


def vllm_launch(util: float) -> tuple[str, ...]:
    return (
        "python3", "-m", "verl.trainer.main_ppo", "actor_rollout_ref.rollout.name=vllm",
        f"actor_rollout_ref.rollout.gpu_memory_utilization={util}",
    )  # fmt: skip


def recorded_torch(name: str) -> tuple[str, tuple[str, ...]]:
    meta = email.parser.Parser().parsestr((TORCH / name).read_text())
    return str(meta["Version"]), tuple(meta.get_all("Requires-Dist") or ())


# --- gpu-memory -------------------------------------------------------------------------------


def test_t4_with_a_stale_python_process_cannot_give_vllm_95_percent() -> None:
    result = check_gpu_memory(context(recorded_host("smi-q-x-515.105.01-tesla-t4.xml"), *vllm_launch(0.95)))
    assert result.status == "fail"
    # 13939 MiB free of 15360; 0.95 x 15360 = 14592 MiB wanted.
    assert "13939 MiB free" in result.summary
    assert "14592 of 15360 MiB" in result.summary
    assert result.remedy is not None
    assert "PIDs 675 5762" in result.remedy
    assert "kills nothing" in result.remedy
    held = next(e.value for e in result.evidence if e.name.startswith("GPU 0"))
    assert "PID 5762 python 1005 MiB" in held


def test_t4_fits_90_percent_but_the_gigabyte_held_by_python_is_a_warning() -> None:
    result = check_gpu_memory(context(recorded_host("smi-q-x-515.105.01-tesla-t4.xml"), *vllm_launch(0.9)))
    # 0.9 x 15360 = 13824 MiB wanted, 13939 free: vLLM starts, but 1027 MiB are held by others.
    assert result.status == "warn"
    assert result.remedy is not None
    assert "PIDs 675 5762" in result.remedy


def test_llama_server_holding_both_a5000s_fails_each_gpu_and_names_its_pid() -> None:
    result = check_gpu_memory(context(recorded_host("smi-q-x-590.44.01-2x-rtx-a5000.xml"), *vllm_launch(0.5)))
    assert result.status == "fail"
    failing = [f for f in result.findings if f.status == "fail"]
    assert [f.message.split(":")[0] for f in failing] == ["GPU 1", "GPU 0"]
    assert result.remedy is not None
    assert "PIDs 100477" in result.remedy


def test_cuda_visible_devices_limits_the_check_to_those_gpus() -> None:
    facts = recorded_host("smi-q-x-590.44.01-2x-rtx-a5000.xml")
    result = check_gpu_memory(
        context(facts, *vllm_launch(0.25), env={"PATH": "", "CUDA_VISIBLE_DEVICES": "0"})
    )
    # GPU 0 has 6862 MiB free >= 0.25 x 24564; GPU 1 (1678 free) is not visible, so it does not count.
    assert not any(f.status == "fail" for f in result.findings)
    assert [e.name for e in result.evidence if e.name.startswith("GPU")] == ["GPU 0 NVIDIA RTX A5000"]


def test_without_a_launch_command_verls_default_share_is_used() -> None:
    result = check_gpu_memory(context(recorded_host("smi-q-x-535.54.03-a100-sxm4-mig.xml")))
    util = next(e for e in result.evidence if e.name == "gpu_memory_utilization")
    assert (util.value, util.source.startswith("verl's default")) == ("0.5", True)
    assert result.status == "pass"


def test_no_gpu_is_a_skip_with_the_reason() -> None:
    result = check_gpu_memory(context(host()))
    assert result.status == "skip"
    assert "no GPUs" in result.summary


# --- cuda -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metadata", "cuda"),
    [
        ("torch-2.11.0-cp312-manylinux-x86_64.METADATA", "13.0"),
        ("torch-2.10.0-cp312-manylinux-x86_64.METADATA", "12.8"),
        ("torch-2.6.0-cp312-manylinux-x86_64.METADATA", "12.4"),
    ],
    ids=["cuda-toolkit-pin", "runtime-cu12-pin", "parenthesised-pin"],
)
def test_torch_cuda_is_read_from_recorded_wheel_metadata(metadata: str, cuda: str) -> None:
    version, requires = recorded_torch(metadata)
    assert torch_cuda(version, requires)[0] == cuda


@pytest.mark.parametrize(
    ("version", "cuda"),
    [("2.6.0+cu124", "12.4"), ("2.9.0+cu129", "12.9"), ("2.11.0+cu130", "13.0"), ("2.11.0+cpu", None)],
)
def test_torch_cuda_from_the_local_version_tag(version: str, cuda: str | None) -> None:
    assert torch_cuda(version, ())[0] == cuda


@pytest.mark.parametrize(
    ("xml", "metadata", "status"),
    [
        ("smi-q-x-515.105.01-tesla-t4.xml", "torch-2.10.0-cp312-manylinux-x86_64.METADATA", "fail"),
        ("smi-q-x-535.54.03-a100-sxm4-mig.xml", "torch-2.11.0-cp312-manylinux-x86_64.METADATA", "fail"),
        ("smi-q-x-535.54.03-a100-sxm4-mig.xml", "torch-2.10.0-cp312-manylinux-x86_64.METADATA", "warn"),
        ("smi-q-x-535.54.03-a100-sxm4-mig.xml", "torch-2.6.0-cp312-manylinux-x86_64.METADATA", "warn"),
        ("smi-q-x-590.44.01-2x-rtx-a5000.xml", "torch-2.11.0-cp312-manylinux-x86_64.METADATA", "pass"),
    ],
    ids=[
        "drv515-below-12.x-floor",
        "drv535-never-runs-cu13",
        "drv535-cu128-compat-only",
        "drv535-cu124-compat-only",
        "drv590-cu130-full",
    ],
)
def test_driver_against_torch_cuda_under_both_policies(xml: str, metadata: str, status: str) -> None:
    facts = recorded_host(xml)
    assert facts.nvidia is not None
    cuda, how = torch_cuda(*recorded_torch(metadata))
    assert cuda is not None
    (finding,) = driver_vs_torch(RULES, DriverVersion.parse(facts.nvidia.version), cuda, how)
    assert finding.status == status
    if status == "warn":
        assert "policy strict: needs >=" in finding.message


def test_a_535_driver_below_cuda_13s_floor_is_one_finding_judged_by_the_libcuda_that_loads() -> None:
    drv, how = DriverVersion.parse("535.129.03"), "torch Requires-Dist nvidia-cuda-runtime==13.0.96"
    compat = ("/usr/local/cuda-13.0/compat/libcuda.so.1", 13000)
    hosts = ("/usr/lib/x86_64-linux-gnu/libcuda.so.1", 12020)
    # Inside the forward-compatibility image the compat libcuda loads: that passes, it is no failure.
    (inside,) = driver_vs_torch(RULES, drv, "13.0", how, compat)
    assert inside.status == "pass"
    assert "forward-compatibility libcuda is loaded" in inside.message
    (outside,) = driver_vs_torch(RULES, drv, "13.0", how, hosts)
    assert outside.status == "fail"
    assert "driver API 12.2" in outside.message
    assert outside.remedy is not None
    assert "--policy forward" in outside.remedy
    (unknown,) = driver_vs_torch(RULES, drv, "13.0", how)
    assert unknown.status == "fail"
    assert "libcuda" not in unknown.message


@pytest.mark.subprocess
def test_this_machines_nvcc_13_is_too_new_for_a_535_driver_and_fine_for_590() -> None:
    nvcc = system.tool("nvcc", "/usr/local/bin:/usr/bin:/bin")
    kits = system.cuda_toolkits(Path("/"), nvcc)
    if not any(k.on_path and (k.version or "").startswith("13.") for k in kits):
        pytest.skip("needs the CUDA 13 toolkit the development machines have")
    for driver, status in (("535.54.03", "fail"), ("590.44.01", "pass")):
        facts = dataclasses.replace(host(driver=driver), cuda_toolkits=kits)
        result = check_cuda(context(facts))
        toolkit = [f for f in result.findings if "toolkit" in f.message]
        assert (toolkit[0].status if toolkit else "pass") == status, result


def test_a_libcudart_on_ld_library_path_is_reported_with_its_cuda_version() -> None:
    lib_dir = Path("/usr/local/cuda/lib64")
    if not list(lib_dir.glob("libcudart.so.13*")):
        pytest.skip("needs the CUDA 13 toolkit the development machines have")
    facts = host(driver="590.48.01", gpus=(("NVIDIA H100 80GB HBM3", "9.0"),))
    result = check_cuda(context(facts, env={"PATH": "", "LD_LIBRARY_PATH": str(lib_dir)}))
    torch = next(e for e in result.evidence if e.name == "torch CUDA")
    assert torch.value == "13.0"  # no torch installed: the torch of the row planned for this host
    cudart = next(e for e in result.evidence if e.name == "libcudart")
    assert cudart.value.endswith("(CUDA 13.0)")  # read from the toolkit's cuda.h beside it
    assert not any("shadows" in f.message for f in result.findings)  # same CUDA: loads, works


def test_no_driver_skips_cuda_and_says_nvcc_is_not_a_gpu() -> None:
    result = check_cuda(context(host()))
    assert result.status == "skip"
    assert "no NVIDIA driver" in result.summary


def test_driver_fact_keeps_its_source_in_the_evidence() -> None:
    facts = dataclasses.replace(
        host(), nvidia=NvidiaDriver(version="550.54.15", source="procfs /proc/driver/nvidia/version")
    )
    result = check_cuda(context(facts))
    assert (
        Evidence(name="driver", value="550.54.15", source="procfs /proc/driver/nvidia/version")
        in result.evidence
    )


# --- launch parsing ---------------------------------------------------------------------------


def test_launch_after_env_assignments_and_ray_job_submit() -> None:
    launch = parse_launch(
        [
            "ray", "job", "submit", "--address", "http://127.0.0.1:8265", "--",
            "PYTHONUNBUFFERED=1", "python3", "-m", "verl.trainer.main_ppo",
            "--config-name=ppo_megatron_trainer",
            "data.train_batch_size=256", "+trainer.x=1", "~critic", "++a.b=c=d",
        ]
    )  # fmt: skip
    assert (launch.program, launch.module, launch.config_name) == (
        "python3",
        "verl.trainer.main_ppo",
        "ppo_megatron_trainer",
    )
    assert [(o.prefix, o.key, o.value) for o in launch.overrides] == [
        ("", "data.train_batch_size", "256"),
        ("+", "trainer.x", "1"),
        ("~", "critic", None),
        ("++", "a.b", "c=d"),
    ]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("256", 256),
        ("0.4", 0.4),
        ("1e-6", 1e-6),
        ("True", True),
        ("null", None),
        ("'x y'", "x y"),
        ("vllm", "vllm"),
    ],
)
def test_values_are_typed_like_hydra(text: str, value: object) -> None:
    assert hydra_value(text) == value


# --- results and the CLI ----------------------------------------------------------------------


def test_fold_takes_the_worst_status_and_keeps_every_remedy() -> None:
    result = fold(
        "x",
        [
            Finding(status="pass", message="fine"),
            Finding(status="warn", message="w", remedy="do w"),
            Finding(status="fail", message="f", remedy="do f"),
        ],
        [],
        ok="ok",
    )
    assert (result.status, result.summary, result.remedy) == ("fail", "f (and 1 more)", "do w\ndo f")


def test_json_report_is_versioned_and_text_shows_evidence_for_problems() -> None:
    results = [
        CheckResult(id="a", status="pass", summary="good"),
        CheckResult(
            id="b",
            status="fail",
            summary="bad",
            evidence=(Evidence(name="k", value="v", source="s"),),
            remedy="fix",
        ),
    ]
    data = report_json(results)
    assert (data["ok"], [c["id"] for c in data["checks"]]) == (False, ["a", "b"])
    assert set(data["checks"][1]) == {"id", "status", "summary", "evidence", "remedy", "findings"}
    text = report_text(results)
    assert "FAIL  b" in text
    assert "k = v  [s]" in text
    assert "remedy      fix" in text
    assert text.endswith("doctor: 2 checks: 1 pass, 1 fail\n")


@pytest.mark.subprocess
def test_doctor_on_this_gpu_less_machine_is_fast_and_skips_gpu_checks() -> None:
    started = time.monotonic()
    result = run_cli("doctor", "--json")
    elapsed = time.monotonic() - started
    checks = {c["id"]: c for c in json_data(result.out)["checks"]}
    assert list(checks) == [
        "python",
        "pins",
        "cuda",
        "ray",
        "collective",
        "hf-cache",
        "gpu-memory",
        "memory",
        "fit",
        "engine-env",
        "launch",
        "accelerator",
    ]
    assert checks["fit"]["status"] == "skip"  # no launch to plan
    assert checks["accelerator"]["status"] == "skip"  # no Ascend NPU or AMD GPU here
    assert checks["collective"]["status"] == "skip"  # a real collective only when asked by name
    assert checks["cuda"]["status"] == "skip"
    assert "no NVIDIA driver" in checks["cuda"]["summary"]
    assert checks["gpu-memory"]["status"] == "skip"
    assert "no GPUs" in checks["gpu-memory"]["summary"]
    assert result.code == (5 if any(c["status"] == "fail" for c in checks.values()) else 0)
    assert elapsed < 10


def test_an_unknown_check_id_is_bad_input_with_a_suggestion() -> None:
    result = run_cli("doctor", "--check", "hf_cache")
    assert result.code == 2
    assert "did you mean 'hf-cache'?" in result.err


# --- cuda: what a TransformerEngine build needs (Megatron rows) -------------------------------


def fake_cuda_home(root: Path, version: str, *, cudnn: bool) -> Path:
    """A CUDA_HOME as the toolkit lays it out: bin/nvcc, version.json, include/."""
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "nvcc").write_text("#!/bin/sh\n")
    (root / "bin" / "nvcc").chmod(0o755)
    (root / "version.json").write_text(json.dumps({"cuda": {"name": "CUDA SDK", "version": version}}))
    (root / "include").mkdir()
    if cudnn:
        (root / "include" / "cudnn.h").write_text("#define CUDNN_MAJOR 9\n")
    return root


def megatron_host() -> HostFacts:
    return dataclasses.replace(
        host(driver="580.95.05", gpus=(("NVIDIA H100 80GB HBM3", "9.0"),)), backend="megatron"
    )


def te_finding(result: CheckResult) -> Finding:
    return next(
        f for f in result.findings if "TransformerEngine" in f.message or "transformer-engine" in f.message
    )


def test_a_megatron_row_with_a_matching_toolkit_and_cudnn_headers_can_build_transformer_engine(
    tmp_path: Path,
) -> None:
    home = fake_cuda_home(tmp_path / "cuda-13.0", "13.0.88", cudnn=True)
    result = check_cuda(context(megatron_host(), env={"PATH": "", "CUDA_HOME": str(home)}))
    finding = te_finding(result)
    assert finding.status == "pass"
    assert "nvcc 13.0.88" in finding.message


def test_a_transformer_engine_build_without_cudnn_headers_or_with_the_wrong_nvcc_is_a_warning(
    tmp_path: Path,
) -> None:
    home = fake_cuda_home(tmp_path / "cuda-12.8", "12.8.93", cudnn=False)
    finding = te_finding(check_cuda(context(megatron_host(), env={"PATH": "", "CUDA_HOME": str(home)})))
    assert finding.status == "warn"
    assert "nvcc under CUDA_HOME is CUDA 12.8.93, torch is built with CUDA 13.0" in finding.message
    assert "no cudnn.h" in finding.message or Path("/usr/include/cudnn.h").exists()
    unset = te_finding(check_cuda(context(megatron_host(), env={"PATH": ""})))
    assert "CUDA_HOME is not set" in unset.message


def test_an_fsdp_row_says_nothing_about_transformer_engine() -> None:
    result = check_cuda(context(host(driver="580.95.05", gpus=(("NVIDIA H100 80GB HBM3", "9.0"),))))
    assert not [f for f in result.findings if "TransformerEngine" in f.message]


@pytest.mark.parametrize(
    "argv",
    [
        ("torchrun", "--nproc_per_node", "4", "-m", "verl.trainer.main_ppo", "trainer.n_gpus_per_node=4"),
        ("/opt/bin/torchrun", "--nproc_per_node=4", "-m", "verl.trainer.main_ppo"),
        ("python3", "-m", "torch.distributed.run", "--nproc_per_node", "4", "-m", "verl.trainer.main_ppo"),
    ],
    ids=["torchrun", "torchrun-path", "torch-distributed-run"],
)
def test_torchrun_in_front_of_main_ppo_is_named(argv: tuple[str, ...]) -> None:
    # Census finding 5 (verl#2705): the lint accepted this silently.
    launch = parse_launch(argv)
    assert launch.module == "verl.trainer.main_ppo"
    result = check_launch(context(host(), *argv))
    assert result.status == "warn"
    assert "verl launches through Ray" in result.findings[0].message


def test_torchrun_for_the_sft_trainer_is_fine() -> None:
    argv = ("torchrun", "--nproc_per_node", "4", "-m", "verl.trainer.fsdp_sft_trainer")
    assert parse_launch(argv).launcher == "torchrun"
    assert check_launch(context(host(), *argv)).status == "skip"
