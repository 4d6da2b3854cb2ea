"""issue 32, item 5: renders that look ready are ready. The sbatch runs the environment it was
rendered for, a Grace GPU renders for aarch64, render repeats plan's warnings, and the
Dockerfile's step comments count 1, 2, 3, ... with no gap or repeat."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import run_cli

H100 = ("--gpu", "H100", "--driver", "580.95.05")


def test_the_sbatch_without_a_container_runs_the_venv_it_was_rendered_for(tmp_path: Path) -> None:
    result = run_cli("render", "slurm", *H100, "--venv", "/opt/verl env", "--out", str(tmp_path))
    assert result.code == 0, result.err
    text = (tmp_path / "verl.sbatch").read_text()
    assert "PYTHON=${VERL_PYTHON:-'/opt/verl env'/bin/python}" in text
    assert 'RAY=$(dirname "$PYTHON")/ray' in text
    assert not re.search(r"^\s*(srun .*)?ray start", text, re.MULTILINE)  # no ray from PATH
    default = run_cli("render", "slurm", *H100, "--out", str(tmp_path / "d"))
    assert 'PYTHON=${VERL_PYTHON:-"$here"/.venv/bin/python}' in (tmp_path / "d" / "verl.sbatch").read_text()
    assert default.code == 0


def test_the_sbatch_in_a_container_keeps_the_images_python(tmp_path: Path) -> None:
    result = run_cli("render", "slurm", *H100, "--container", "apptainer:verl.sif", "--out", str(tmp_path))
    assert result.code == 0, result.err
    text = (tmp_path / "verl.sbatch").read_text()
    assert "PYTHON=${VERL_PYTHON:-python3}" in text
    assert "RAY=ray" in text


@pytest.mark.parametrize("gpu", ["GB200", "GH200", "GB300"])
def test_a_grace_superchip_plans_and_renders_for_aarch64(gpu: str, tmp_path: Path) -> None:
    result = run_cli("render", "docker", "--gpu", gpu, "--driver", "580.95.05", "--out", str(tmp_path))
    assert result.code == 0, result.err
    assert "aarch64" in (tmp_path / "Dockerfile").read_text().splitlines()[0]  # the row rendered
    explained = run_cli("plan", "--explain", "--gpu", gpu, "--driver", "580.95.05").out
    assert f"inferred from the GPU ({gpu} has a Grace CPU: aarch64 only): arch aarch64" in explained
    given = run_cli("plan", "--gpu", gpu, "--driver", "580.95.05", "--arch", "x86_64").out
    assert "aarch64" not in given.splitlines()[0]  # a flag still wins


def test_render_prints_the_warnings_plan_prints(tmp_path: Path) -> None:
    planned = run_cli("plan", *H100).out
    warnings = [
        line.removeprefix("warning    ") for line in planned.splitlines() if line.startswith("warning")
    ]
    assert warnings
    rendered = run_cli("render", "docker", "-q", *H100, "--out", str(tmp_path))
    for warning in warnings:
        assert f"verl-setup: warning: {warning}" in rendered.err


@pytest.mark.parametrize(
    "flags",
    [
        H100,
        ("--gpu", "H100", "--driver", "535.104.05", "--policy", "forward", "--backend", "megatron"),
    ],
    ids=["h100", "megatron"],
)
def test_dockerfile_steps_are_numbered_consecutively(flags: tuple[str, ...], tmp_path: Path) -> None:
    result = run_cli("render", "docker", *flags, "--out", str(tmp_path))
    assert result.code == 0, result.err
    numbers = [
        int(m[1]) for m in re.finditer(r"^# (\d+)\. ", (tmp_path / "Dockerfile").read_text(), re.MULTILINE)
    ]
    assert numbers == list(range(1, len(numbers) + 1)), numbers
