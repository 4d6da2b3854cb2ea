"""doctor's python check on real interpreters: a venv whose libpython is swapped by
LD_LIBRARY_PATH (pyenv's shared 3.11 against Debian's libpython3.11), and a Python the row does
not support (pyenv 3.13 against the cpu row's 3.10-3.12)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import json_data, run_cli
from verl_setup.util.uvbin import find_uv

PYENV = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
DEBIAN_LIB = Path("/usr/lib/x86_64-linux-gnu")


def python_check(*args: str) -> tuple[int, dict[str, Any]]:
    result = run_cli("doctor", "--json", "--check", "python", *args)
    assert result.err == "", result.err
    (check,) = json_data(result.out)["checks"]
    return result.code, check


def venv_from(tmp_path: Path, python: Path) -> Path:
    if not python.exists():
        pytest.skip(f"needs {python}")
    venv = tmp_path / "venv"
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    subprocess.run(
        [find_uv(), "venv", "-q", "--python", str(python), str(venv)], check=True, env=env, timeout=60
    )
    return venv


def test_this_test_venv_passes_against_the_row_planned_for_this_machine() -> None:
    code, check = python_check("--prefix", sys.prefix)
    assert check["status"] == "pass", check
    assert "row cpu supports 3.10, 3.11, 3.12" in check["summary"]
    assert code == 0


def test_ld_library_path_swapping_libpython_under_a_correct_looking_venv(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # This venv was made from pyenv's shared-library 3.11.x; Debian ships its own libpython3.11.
    made_for = next(
        (line.split("=")[1].strip() for line in Path(sys.prefix, "pyvenv.cfg").read_text().splitlines()
         if line.startswith("version")),
        None,
    )  # fmt: skip
    debian = DEBIAN_LIB / f"libpython{sys.version_info.major}.{sys.version_info.minor}.so.1.0"
    if not debian.exists() or made_for is None:
        pytest.skip(f"needs {debian} and a pyvenv.cfg version")
    monkeypatch.setenv("LD_LIBRARY_PATH", str(DEBIAN_LIB))
    code, check = python_check("--prefix", sys.prefix)
    running = next(e["value"] for e in check["evidence"] if e["name"] == "running")
    if running == made_for:
        pytest.skip("the interpreter is not linked against a shared libpython here")
    assert check["status"] == "fail"
    assert check["summary"] == (
        f"the env was made for Python {made_for} (pyvenv.cfg) but libpython {running} loads from "
        f"{debian} (LD_LIBRARY_PATH has {DEBIAN_LIB})"
    )
    assert f"remove {DEBIAN_LIB} from LD_LIBRARY_PATH" in check["remedy"]
    assert code == 5


def test_python_313_is_outside_the_rows_supported_minors(tmp_path: Path) -> None:
    pythons = sorted(PYENV.glob("3.13.*/bin/python3"))
    venv = venv_from(tmp_path, pythons[-1] if pythons else PYENV / "3.13.0/bin/python3")
    code, check = python_check("--prefix", str(venv))
    assert check["status"] == "fail"
    assert "is not supported by row cpu (verl 0.9.1: 3.10, 3.11, 3.12)" in check["summary"]
    assert "3.12+ breaks older pins" in check["summary"]
    assert "verl-setup install --python 3.12.3" in check["remedy"]
    assert code == 5


def test_prefix_that_is_not_a_venv_is_bad_input(tmp_path: Path) -> None:
    result = run_cli("doctor", "--check", "python", "--prefix", str(tmp_path))
    assert result.code == 2
    assert "no bin/python there" in result.err
