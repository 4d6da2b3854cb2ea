"""issue 32, item 3 and 5: render ends with the line to type for what it wrote, and says the
KubeRay image must be built and pushed when no --image names one."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_cli

H100 = ("--gpu", "H100", "--driver", "580.95.05")


def test_render_ends_with_the_build_or_run_line_for_each_target(tmp_path: Path) -> None:
    result = run_cli("render", "docker", "slurm", "apptainer", *H100, "--out", str(tmp_path))
    assert result.code == 0, result.err
    lines = result.err.splitlines()
    start = lines.index("next:")
    steps = lines[start + 1 :]
    assert f"  docker build -t verl-setup/verl0.9-vllm0.24.0:latest {tmp_path}" in steps
    assert f"  cd {tmp_path} && apptainer build verl.sif verl.def" in steps
    assert any(s.startswith(f"  sbatch {tmp_path}/verl.sbatch") for s in steps)


def test_kuberay_without_image_says_it_must_be_built_and_pushed(tmp_path: Path) -> None:
    bare = run_cli("render", "kuberay", *H100, "--out", str(tmp_path / "a"))
    assert bare.code == 0, bare.err
    assert (
        "verl-setup: warning: raycluster.yaml names the image verl-setup/verl0.9-vllm0.24.0:latest, which "
        "no registry has: build and push it first"
    ) in bare.err
    assert "render again with --image REGISTRY/NAME:TAG" in bare.err
    assert (
        "build and push it first"
        in run_cli("render", "kuberay", "-q", *H100, "--out", str(tmp_path / "q")).err
    )
    given = run_cli("render", "kuberay", *H100, "--image", "reg.example/v:1", "--out", str(tmp_path / "b"))
    assert given.code == 0, given.err
    assert "build and push" not in given.err
    assert f"kubectl apply -f {tmp_path / 'b'}/raycluster.yaml" in given.err


def test_quiet_and_json_render_print_no_next_steps(tmp_path: Path) -> None:
    assert "next:" not in run_cli("render", "docker", "-q", *H100, "--out", str(tmp_path / "q")).err
    assert "next:" not in run_cli("render", "docker", "--json", *H100, "--out", str(tmp_path / "j")).err
