"""`render uv-project` with real uv: the cpu row's project locks, plain `uv sync` (uv's own binary,
no verl-setup on PATH, a pyenv interpreter, no Python downloads) installs it, and `verify` passes;
a GPU row locks with its extension wheel routed to an explicit index (a local stand-in for verl's
wheelhouse, which is out of reach here)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.local_index import build_wheel
from tests.integration.torch_ext import python
from verl_setup.matrix.load import load_matrix
from verl_setup.util.uvbin import find_uv

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10 reads TOML with tomli (a dependency there)
    import tomli as tomllib

pytestmark = [pytest.mark.network, pytest.mark.slow]
TIMEOUT = 900


def verl_setup(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    return subprocess.run(
        [sys.executable, "-m", "verl_setup", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=TIMEOUT,
        check=False,
    )


def plain_env(interpreter: Path) -> dict[str, str]:
    """The user's shell without verl-setup: no venv on PATH, no uv settings but the Python."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("UV_") and k != "VIRTUAL_ENV"}
    env["PATH"] = "/usr/bin:/bin"
    return {**env, "UV_PYTHON": str(interpreter), "UV_PYTHON_DOWNLOADS": "never"}


def locked(folder: Path) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in tomllib.loads((folder / "uv.lock").read_text())["package"]}


def test_cpu_uv_project_syncs_with_plain_uv_and_verifies(tmp_path: Path) -> None:
    interpreter = python("3.12")
    version = interpreter.parent.parent.name  # pyenv's folder is the exact version
    project = tmp_path / "team-env"
    made = verl_setup("render", "uv-project", "--out", str(project), "--no-gpu", "--python", version)
    assert made.returncode == 0, made.stderr
    assert sorted(p.name for p in project.iterdir()) == [".python-version", "pyproject.toml", "uv.lock"]
    row = load_matrix().row("cpu")
    packages = locked(project)
    for pin in row.requirements():
        name, _, want = pin.partition("==")
        assert packages[name.split("[")[0]]["version"] == want, pin

    uv = find_uv()  # the binary the `uv` wheel ships, run by its path: nothing else of verl-setup's
    synced = subprocess.run(
        [uv, "sync", "--locked"],
        cwd=project,
        env=plain_env(interpreter),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert synced.returncode == 0, synced.stderr
    # The import probe of this row takes 1-2 minutes here; test_install's cpu install runs it.
    verified = verl_setup("verify", "--prefix", str(project / ".venv"), "--row", "cpu", "--no-import")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert f"{len(row.requirements())} of {len(row.requirements())} expected distributions match" in (
        verified.stdout
    )


def test_gpu_row_locks_with_its_flash_attn_wheel_routed_to_an_explicit_index(tmp_path: Path) -> None:
    interpreter = python("3.12")
    # A stand-in for verl's wheelhouse: a PEP 503 folder serving flash-attn 2.8.3 only.
    simple = tmp_path / "wheelhouse" / "simple"
    (simple / "flash-attn").mkdir(parents=True)
    wheel = build_wheel(
        simple / "flash-attn",
        name="flash_attn",
        version="2.8.3",
        files={"flash_attn/__init__.py": ""},
        requires=(),
        scripts={},
    )
    (simple / "flash-attn" / "index.html").write_text(f'<a href="{wheel.name}">{wheel.name}</a>\n')
    project = tmp_path / "gpu"
    made = verl_setup(
        "render", "uv-project", "--out", str(project), "--row", "verl0.9-vllm0.24.0",
        "--python", interpreter.parent.parent.name, "--wheel-source", simple.as_uri(),
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    pyproject = tomllib.loads((project / "pyproject.toml").read_text())
    (index,) = pyproject["tool"]["uv"]["index"]
    assert index == {"name": "flash-attn-wheels", "url": simple.as_uri() + "/", "explicit": True}
    assert pyproject["tool"]["uv"]["sources"] == {"flash-attn": {"index": "flash-attn-wheels"}}
    packages = locked(project)
    assert packages["flash-attn"]["source"] == {"registry": f"{simple}/"}  # uv records the folder
    assert "registry" in packages["torch"]["source"]
    assert packages["torch"]["source"] != packages["flash-attn"]["source"]  # only flash-attn is routed
    for pin in load_matrix().row("verl0.9-vllm0.24.0").requirements():
        name, _, want = pin.partition("==")
        assert packages[name.split("[")[0]]["version"] == want, pin


def test_a_project_that_does_not_lock_is_exit_4_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "team-env"
    out.mkdir()
    (out / "pyproject.toml").write_text("# the team's own file\n")
    env = {**os.environ, "UV_OFFLINE": "1", "UV_CACHE_DIR": str(tmp_path / "empty-cache")}
    result = subprocess.run(
        [sys.executable, "-m", "verl_setup", "render", "uv-project", "--out", str(out), "--no-gpu", "-q"],
        capture_output=True,
        text=True,
        env=env,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 4, result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("verl-setup: error: row cpu's uv project does not lock: ")
    assert sorted(p.name for p in out.iterdir()) == ["pyproject.toml"]
    assert (out / "pyproject.toml").read_text() == "# the team's own file\n"
