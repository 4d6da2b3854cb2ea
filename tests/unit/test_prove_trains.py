"""`matrix prove`'s trains step: `verl-setup smoke` in the proven env, on the CPU for the cpu row and
only on a GPU host (VERL_SETUP_PROVE_GPUS, set by .ci/gpu-smoke) for a GPU row; and that script."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from verl_setup.maintenance import prove
from verl_setup.matrix.load import load_matrix
from verl_setup.matrix.proof import LEVELS, ProofStep, RowProof
from verl_setup.output import SCHEMA

REPO = Path(__file__).resolve().parents[2]
MATRIX = load_matrix()
CPU = MATRIX.row("cpu")
GPU = MATRIX.row("verl0.9-vllm0.24.0")


def smoke_data(ok: bool) -> dict[str, object]:
    return {
        "ok": ok,
        "path": "cpu",
        "seconds": 150.2,
        "stages": [{"stage": "assets", "seconds": 9.0}, {"stage": "checkpoint", "seconds": 3.0}],
        "failed_stage": None if ok else "ray start",
        "failure": None if ok else "exit: still running after 120s: stopped",
        "peak_memory": {"pss_bytes": 5 * 2**30, "rss_bytes": 8 * 2**30, "processes": 19},
        "checks": [{"name": "losses", "ok": ok, "summary": "2 steps", "figures": {}}],
    }


def run_trains(
    row_id: str, env: dict[str, str], data: dict[str, object] | None, monkeypatch: pytest.MonkeyPatch
) -> tuple[prove.RowResult, list[list[str]]]:
    calls: list[list[str]] = []

    def cli(argv: Sequence[str], _env: Mapping[str, str]) -> tuple[int, str, str, float]:
        calls.append(list(argv))
        ok = bool(data and data["ok"])
        out = json.dumps({"schema": SCHEMA, "command": "smoke", "ok": ok, "data": data})
        return (0 if data and data["ok"] else 5), out, "", 150.0

    monkeypatch.setattr(prove, "_cli", cli)
    result = prove.RowResult(row=row_id)
    prove._trains(MATRIX.row(row_id), Path("/tmp/p"), env, lambda _: None, result, tool="verl-setup test")
    return result, calls


def test_the_cpu_row_trains_here_and_records_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    result, calls = run_trains("cpu", {}, smoke_data(True), monkeypatch)
    assert calls == [["smoke", "--prefix", "/tmp/p", "--json"]]
    step = result.steps["trains"]
    assert step.detail["path"] == "cpu"
    assert str(step.detail["host"]).startswith("CPU only: ")
    assert step.detail["peak_pss_mib"] == 5 * 1024
    assert result.failed is None


def test_a_gpu_row_without_a_gpu_host_stops_before_trains(monkeypatch: pytest.MonkeyPatch) -> None:
    result, calls = run_trains("verl0.9-vllm0.24.0", {}, smoke_data(True), monkeypatch)
    assert calls == []
    assert "trains" not in result.steps
    assert result.stopped is not None
    assert ".ci/gpu-smoke" in result.stopped


def test_a_gpu_row_on_a_gpu_host_runs_smoke_on_its_gpus_and_names_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = {"VERL_SETUP_PROVE_GPUS": "2", "VERL_SETUP_PROVE_GPU_NAME": "NVIDIA H100 80GB HBM3"}
    result, calls = run_trains("verl0.9-vllm0.24.0", env, smoke_data(True), monkeypatch)
    assert calls == [["smoke", "--prefix", "/tmp/p", "--json", "--gpus", "2"]]
    assert str(result.steps["trains"].detail["host"]).startswith("2 x NVIDIA H100 80GB HBM3 (")


def test_a_failed_smoke_names_its_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    result, _ = run_trains("cpu", {}, smoke_data(False), monkeypatch)
    assert result.failed == "trains: stage ray start: exit: still running after 120s: stopped"
    assert "trains" not in result.steps


def test_trains_sits_between_imports_and_gpu() -> None:
    assert LEVELS == ("resolves", "installs", "imports", "trains", "gpu")
    steps = {n: ProofStep(date="2026-12-07", tool="t") for n in ("resolves", "installs", "imports", "trains")}
    assert RowProof(row_sha256="x", steps=steps).level() == "trains"
    del steps["imports"]
    assert RowProof(row_sha256="x", steps=steps).level() == "installs"


@pytest.mark.subprocess
def test_gpu_smoke_script_proves_the_row_on_every_gpu_nvidia_smi_lists(tmp_path: Path) -> None:
    """The one command a GPU host runs: it counts the GPUs and hands them to `make prove`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "make.log"
    stubs = {
        "nvidia-smi": '[ "$1" = -L ] && printf "GPU 0: NVIDIA H100 (UUID: a)\\n'
        'GPU 1: NVIDIA H100 (UUID: b)\\n" '
        '|| echo "NVIDIA H100 80GB HBM3"',
        "make": f'echo "$* GPUS=${{VERL_SETUP_PROVE_GPUS:-}} '
        f'NAME=${{VERL_SETUP_PROVE_GPU_NAME:-}}" >> {record}',
    }
    for name, body in stubs.items():
        path = bin_dir / name
        path.write_text(f"#!/usr/bin/env bash\n{body}\n")
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    done = subprocess.run(
        [str(REPO / ".ci" / "gpu-smoke"), "verl0.9-vllm0.24.0"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert record.read_text().splitlines() == [
        ".venv/.installed GPUS= NAME=",
        "prove ROW=verl0.9-vllm0.24.0 GPUS=2 NAME=NVIDIA H100 80GB HBM3",
    ]
