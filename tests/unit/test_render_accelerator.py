"""Rendered files for an Ascend row use the NPU's own names: Ray resource NPU, KubeRay's
huawei.com/Ascend910, CANN's set_env.sh; a ROCm target gets the reason no row (or install) fits."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import run_cli

ASCEND = ("--npu", "910B", "--cann", "8.5.1", "--gpu-count", "8", "--arch", "x86_64", "--glibc", "2.35")


def render(tmp_path: Path, *targets: str) -> Path:
    out = tmp_path / "r"
    for target in targets:
        result = run_cli("render", target, *ASCEND, "--out", str(out), "--force")
        assert result.code == 0, result.err
    return out


def test_ray_scripts_start_ray_with_the_npu_resource(tmp_path: Path) -> None:
    out = render(tmp_path, "ray")
    head, worker = (out / "ray-head.sh").read_text(), (out / "ray-worker.sh").read_text()
    assert '--resources="{\\"NPU\\": $NUM_GPUS}"' in head
    assert "--num-gpus" not in head
    assert '--resources="{\\"NPU\\": $NUM_GPUS}"' in worker


def test_kuberay_asks_the_ascend_device_plugin_and_ray_for_npus(tmp_path: Path) -> None:
    out = render(tmp_path, "kuberay")
    doc = yaml.safe_load((out / "raycluster.yaml").read_text())
    head = doc["spec"]["headGroupSpec"]
    assert head["rayStartParams"]["resources"] == '"{\\"NPU\\": 8}"'  # KubeRay's quoting of --resources
    limits = head["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"huawei.com/Ascend910": 8}


def test_slurm_and_env_use_ray_npu_and_cann(tmp_path: Path) -> None:
    out = render(tmp_path, "slurm", "env")
    sbatch = (out / "verl.sbatch").read_text()
    assert "--gpus-per-node" not in sbatch
    assert sbatch.count('--resources="{\\"NPU\\": 8}"') == 2
    assert "source /usr/local/Ascend/ascend-toolkit/set_env.sh" in (out / "env.sh").read_text()


def test_install_on_a_rocm_host_says_what_it_cannot_do(tmp_path: Path) -> None:
    result = run_cli(
        "install", "--gpu", "MI300X", "--rocm", "7.0", "--dry-run", "--prefix", str(tmp_path / "v")
    )
    assert result.code == 3
    assert "no AMD GPU (ROCm) row at all" in result.err
    assert "rocm/verl:" in result.err  # where verl on ROCm does come from
    assert not (tmp_path / "v").exists()


@pytest.mark.subprocess  # the dry run still finds the interpreter it would use
def test_the_ascend_install_dry_run_shows_its_steps_and_what_it_leaves_out(tmp_path: Path) -> None:
    result = run_cli("install", *ASCEND, "--dry-run", "--prefix", str(tmp_path / "v"))
    assert result.code == 0, result.err
    assert "torch-npu==2.9.0 vllm-ascend==0.18.0rc1" in result.out
    assert "--no-binary arctic-inference" in result.out
    assert "VLLM_TARGET_DEVICE=empty" in result.err  # the row's known issue, as a warning
