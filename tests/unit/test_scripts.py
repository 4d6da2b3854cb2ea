"""The programs for other interpreters (scripts/) on an interpreter other than this one: the oldest
Python a user's venv may have, without verl_setup importable."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from verl_setup.scripts import SCRIPTS, WITH_PACKAGE, script_path

PYTHON_310 = Path.home() / ".pyenv" / "versions" / "3.10.13" / "bin" / "python3"
OWN = [name for name in SCRIPTS if name not in WITH_PACKAGE]


def python_310() -> Path:
    if not PYTHON_310.exists():
        pytest.skip("needs pyenv's Python 3.10 (a user's venv may have no newer one)")
    return PYTHON_310


@pytest.mark.subprocess
def test_every_script_compiles_on_python_310() -> None:
    files = [str(script_path(name)) for name in SCRIPTS]
    # compile() only: the folder here is tmp_path's, no .pyc lands beside the scripts
    code = "import sys\nfor f in sys.argv[1:]: compile(open(f).read(), f, 'exec')"
    out = subprocess.run(
        [str(python_310()), "-c", code, *files], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr


@pytest.mark.subprocess
@pytest.mark.parametrize(
    ("name", "argv", "key"),
    [
        ("interpreter", ["paths,markers", "", ""], None),
        ("site_packages", [], None),
        ("venv_prefix", [], None),
        ("libcuda_loaded", [], "error"),  # no driver here
        ("parquet_schema", ["/nonexistent.parquet"], ""),  # no pyarrow there
        ("hydra_compose", ["/nonexistent", "ppo_trainer", "[]"], "ok"),  # no Hydra there
        ("import_probe", ["none", "-", "{}"], None),
    ],
)
def test_a_script_runs_without_this_package(
    name: str, argv: list[str], key: str | None, tmp_path: Path
) -> None:
    """Run by path in a bare 3.10, from a folder of its own, with no PYTHONPATH: it answers."""
    assert name in OWN
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    out = subprocess.run(
        [str(python_310()), str(script_path(name)), *argv],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert "verl_setup" not in out.stderr, out.stderr
    if key is not None:
        assert key in json.loads(out.stdout.strip().splitlines()[-1])
    elif name == "import_probe":
        lines = [json.loads(ln) for ln in out.stdout.splitlines()]
        assert {"module": "verl", "outcome": "failed"}.items() <= lines[1].items()
    else:
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip()
