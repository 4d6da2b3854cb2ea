"""The real thing: `verl-setup smoke` on a real install of the cpu row trains 2 GRPO steps.

A real uv install (about a minute from a warm cache), then verl's own main_ppo with the CPU
platform and HF rollout modules, a private Ray, the checkpoint and every check: 2-5 minutes on 2
cores and about 5 GB. Serial: Ray's raylet gives its agents a fixed 15 s and a loaded host misses it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import json_data, run_cli

pytestmark = [pytest.mark.slow, pytest.mark.serial, pytest.mark.network]


@pytest.fixture(scope="module")
def cpu_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    prefix = tmp_path_factory.mktemp("smoke") / "env"
    os.environ.setdefault("UV_PYTHON_DOWNLOADS", "never")
    result = run_cli("install", "--no-gpu", "--prefix", str(prefix), "--no-import", "--json")
    assert result.code == 0, result.err[-2000:]
    return prefix


def test_smoke_trains_two_grpo_steps_in_a_cpu_row_env(cpu_env: Path, tmp_path: Path) -> None:
    result = run_cli("smoke", "--prefix", str(cpu_env), "--work", str(tmp_path / "run"), "--json")
    data = json_data(result.out)
    assert result.code == 0, (data["failed_stage"], data["failure"], data["diagnosis"])
    assert data["ok"] is True
    assert data["path"] == "cpu"
    assert {c["name"]: c["ok"] for c in data["checks"]} == {
        "exit": True,
        "losses": True,
        "checkpoint": True,
        "weights": True,
        "weight sync": True,
    }
    stages = [s["stage"] for s in data["stages"]]
    assert stages == ["assets", "ray start", "workers", "rollout start", "first step", "update", "checkpoint"]
    for stage in stages:
        assert f"smoke: {stage}:" in result.err
    assert not (tmp_path / "run").exists()  # a pass leaves nothing behind (no --keep)
