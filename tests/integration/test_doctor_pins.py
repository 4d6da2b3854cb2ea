"""doctor on a real broken environment (issue 32): a cpu-row install whose antlr4 pin a later
`uv pip install` moved (4.9.3 -> 4.13.2, which breaks verl's import: `Could not deserialize ATN`).
Before the fix doctor said 5 pass, 4 skip, exit 0 on it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import json_data
from verl_setup.util.uvbin import find_uv

pytestmark = [pytest.mark.network, pytest.mark.slow]


def cli(*argv: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("VERL_SETUP_", "VIRTUAL_ENV"))}
    return subprocess.run(
        [sys.executable, "-m", "verl_setup", *argv],
        capture_output=True, text=True, cwd=cwd, timeout=600, check=False,
        env={**base, "UV_PYTHON_DOWNLOADS": os.environ.get("UV_PYTHON_DOWNLOADS", "never"), **env},
    )  # fmt: skip


@pytest.fixture(scope="module")
def drifted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cpu row installed for real, then antlr4 moved by uv as a user's upgrade would."""
    prefix = tmp_path_factory.mktemp("firsthour") / "env"
    made = cli("install", "--no-gpu", "--prefix", str(prefix), "--no-import", cwd=prefix.parent)
    assert made.returncode == 0, made.stderr
    subprocess.run(
        [find_uv(), "pip", "install", "-q", "--python", str(prefix / "bin" / "python"),
         "antlr4-python3-runtime==4.13.2"],
        check=True, timeout=600,
    )  # fmt: skip
    return prefix


def test_doctor_fails_a_moved_pin_and_names_the_env_it_checked(drifted: Path) -> None:
    result = cli(
        "doctor", "--prefix", str(drifted), "--check", "python", "--check", "pins", cwd=drifted.parent
    )
    assert result.returncode == 5, result.stdout + result.stderr
    first, *rest = result.stdout.splitlines()
    assert first.startswith(f"doctor: checking {drifted} (Python 3.12.")
    assert first.endswith(f"flag --prefix {drifted})")
    pins = next(line for line in rest if line.startswith("FAIL  pins"))
    assert "changed antlr4-python3-runtime 4.9.3 -> 4.13.2" in pins
    assert f"verl-setup verify --prefix {drifted}" in result.stdout


def test_doctor_without_prefix_checks_the_active_venv_then_dot_venv(drifted: Path, tmp_path: Path) -> None:
    active = cli("doctor", "--check", "pins", "--json", cwd=tmp_path, VIRTUAL_ENV=str(drifted))
    assert active.returncode == 5, active.stdout + active.stderr
    (check,) = json_data(active.stdout)["checks"]
    assert check["status"] == "fail"
    assert "antlr4-python3-runtime 4.9.3 -> 4.13.2" in check["summary"]
    # No VIRTUAL_ENV: ./.venv of the working folder, not the first python3 on PATH.
    (tmp_path / ".venv").symlink_to(drifted)
    dotvenv = cli("doctor", "--check", "pins", cwd=tmp_path)
    assert dotvenv.returncode == 5, dotvenv.stdout + dotvenv.stderr
    assert dotvenv.stdout.splitlines()[0].endswith(f", ./.venv {tmp_path / '.venv'})")


def test_the_team_configs_prefix_comes_after_virtual_env(drifted: Path, tmp_path: Path) -> None:
    (tmp_path / "verl-setup.toml").write_text(f'prefix = "{drifted}"\n', encoding="utf-8")
    result = cli("doctor", "--check", "pins", cwd=tmp_path)
    assert result.returncode == 5, result.stdout + result.stderr
    assert f"the team config's prefix {drifted})" in result.stdout.splitlines()[0]
