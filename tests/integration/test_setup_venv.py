"""The rendered setup-venv.sh for the cpu row really runs: uv, the exact pins, the pin check."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli
from verl_setup.matrix.load import load_matrix
from verl_setup.util.versions import minor_of

pytestmark = [pytest.mark.network, pytest.mark.slow]


def test_setup_venv_for_the_cpu_row_builds_a_venv_whose_verl_matches(tmp_path: Path) -> None:
    row = load_matrix().row("cpu")
    minor = minor_of(row.python.recommended)  # the cpu row runs on 3.12 only
    found = sorted((Path.home() / ".pyenv" / "versions").glob(f"{minor}.*/bin/python3"))
    if not found:
        pytest.skip(f"no pyenv Python {minor} here (the row needs it)")
    base_python = found[-1]
    version = base_python.parent.parent.name
    out = tmp_path / "rendered files"
    result = run_cli("render", "venv", "--out", str(out), "--no-gpu", "--python", version)
    assert result.code == 0, result.err
    venv = tmp_path / "the venv"
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",  # uv from our venv
        "UV_PYTHON_DOWNLOADS": "never",
    }
    run = subprocess.run(
        ["bash", str(out / "setup-venv.sh"), "--venv", str(venv), "--python", str(base_python)],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"{len(row.requirements())} pins verified" in run.stdout
    assert "import probe: ok verl.trainer.main_ppo" in run.stderr
    installed = subprocess.run(
        [
            str(venv / "bin/python"),
            "-c",
            "from importlib.metadata import version as v; print(v('verl'), v('torch'))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert installed.stdout.split() == [row.verl.version, row.torch.version]
    # Running it again keeps the venv and changes nothing.
    again = subprocess.run(
        ["bash", str(out / "setup-venv.sh"), "--venv", str(venv), "--python", str(base_python)],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert "reusing" in again.stderr
