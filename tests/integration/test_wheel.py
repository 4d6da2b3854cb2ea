"""The built wheel carries matrices/ and templates/ and works outside the source tree."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from verl_setup.environment.uv import find_uv
from verl_setup.util.runner import run

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.network, pytest.mark.slow]


def test_wheel_installs_into_a_fresh_venv_and_lists_the_matrix(tmp_path: Path) -> None:
    uv = find_uv()
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    built = run(
        [uv, "build", "--wheel", "--out-dir", str(tmp_path / "dist"), str(ROOT)], timeout=300, env=env
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("verl_setup-*.whl")
    venv = tmp_path / "venv"
    assert run([uv, "venv", "--python", sys.executable, str(venv)], timeout=120, env=env).returncode == 0
    installed = run(
        [uv, "pip", "install", "--python", str(venv / "bin/python"), str(wheel)], timeout=300, env=env
    )
    assert installed.returncode == 0, installed.stderr
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    listed = run([str(venv / "bin/verl-setup"), "matrix", "list"], timeout=60, cwd=str(outside))
    assert listed.returncode == 0, listed.stderr
    assert "verl0.9-vllm0.24.0" in listed.stdout
    assert "cpu" in listed.stdout
    module = run(
        [str(venv / "bin/python"), "-m", "verl_setup", "matrix", "validate"], timeout=60, cwd=str(outside)
    )
    assert module.returncode == 0, module.stdout + module.stderr
    assert "/_data/matrices/verl.yaml" in module.stdout
    data = run(
        [
            str(venv / "bin/python"),
            "-c",
            "from verl_setup.util.paths import data_dir; print(data_dir('templates'))",
        ],
        timeout=60,
        cwd=str(outside),
    )
    assert data.stdout.strip().endswith("_data/templates")
    # The parsed-matrix cache lives in the user's folder: nothing is written into the install.
    site = next((venv / "lib").glob("python3*/site-packages")) / "verl_setup"

    def files() -> set[str]:
        return {str(p.relative_to(site)) for p in site.rglob("*") if "__pycache__" not in p.parts}

    before, cache = files(), tmp_path / "cache"
    argv = [str(venv / "bin/verl-setup"), "plan", "--driver", "535.129.03", "--gpu", "H100", "--json"]
    cached_env = {**os.environ, "VERL_SETUP_CACHE_DIR": str(cache)}
    plans = [run(argv, timeout=60, cwd=str(outside), env=cached_env) for _ in range(2)]
    assert [p.returncode for p in plans] == [0, 0], plans[0].stderr
    assert plans[0].stdout == plans[1].stdout
    assert {p.name.split("-")[0] for p in (cache / "parsed").glob("*.pickle")} == {"matrix", "gpus", "proof"}
    assert files() == before
