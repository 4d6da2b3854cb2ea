"""The built wheel carries matrices/ and templates/ and works outside the source tree."""

from __future__ import annotations

import os
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from verl_setup import __version__
from verl_setup.scripts import SCRIPTS
from verl_setup.util.runner import run
from verl_setup.util.uvbin import find_uv

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.network, pytest.mark.slow]


def test_wheel_installs_into_a_fresh_venv_and_lists_the_matrix(tmp_path: Path) -> None:
    uv = find_uv()
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    # The sdist first, then the wheel built from it (uv build's default): the sdist alone builds.
    built = run([uv, "build", "--out-dir", str(tmp_path / "dist"), str(ROOT)], timeout=300, env=env)
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("verl_setup-*.whl")
    (sdist,) = (tmp_path / "dist").glob("verl_setup-*.tar.gz")
    check_metadata(wheel, sdist)
    venv = tmp_path / "venv"
    assert run([uv, "venv", "--python", sys.executable, str(venv)], timeout=120, env=env).returncode == 0
    installed = run(
        [uv, "pip", "install", "--python", str(venv / "bin/python"), str(wheel)], timeout=300, env=env
    )
    assert installed.returncode == 0, installed.stderr
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    version = run([str(venv / "bin/verl-setup"), "-V"], timeout=60, cwd=str(outside))
    assert version.stdout.startswith(f"verl-setup {__version__} (matrix "), version.stdout
    # The uv that venv got (the newest 0.13.x on the index today), as importlib.metadata reads it.
    got = run(
        [str(venv / "bin/python"), "-c", "import importlib.metadata as m; print(m.version('uv'))"], timeout=60
    )
    assert got.stdout.strip().startswith("0.13."), got.stderr
    assert version.stdout.rstrip().endswith(f"; uv {got.stdout.strip()})"), version.stdout
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
    # Every program for another interpreter ships as its file, where the table names it.
    assert [n for n, f in SCRIPTS.items() if not (site / "scripts" / f).is_file()] == []

    def files() -> set[str]:
        return {str(p.relative_to(site)) for p in site.rglob("*") if "__pycache__" not in p.parts}

    before, cache = files(), tmp_path / "cache"
    argv = [str(venv / "bin/verl-setup"), "plan", "--driver", "535.129.03", "--gpu", "H100", "--json"]
    cached_env = {**os.environ, "VERL_SETUP_CACHE_DIR": str(cache)}
    plans = [run(argv, timeout=60, cwd=str(outside), env=cached_env) for _ in range(2)]
    assert [p.returncode for p in plans] == [0, 0], plans[0].stderr
    assert plans[0].stdout == plans[1].stdout
    assert {p.name.split("-")[0] for p in (cache / "parsed").glob("*.pickle")} == {
        "matrix",
        "gpus",
        "proof",
        "resolved",
    }
    assert files() == before


def check_metadata(wheel: Path, sdist: Path) -> None:
    """What an index page and a packager read: the version from its one place, the license text,
    the project URLs and classifiers, uv's tested range, the Docker SDK as an extra."""
    with zipfile.ZipFile(wheel) as archive:
        name = f"verl_setup-{__version__}.dist-info"
        meta = Parser().parsestr(archive.read(f"{name}/METADATA").decode())
        assert f"{name}/licenses/LICENSE" in archive.namelist()
    assert meta["Version"] == __version__
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta.get_all("License-File") == ["LICENSE"]
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL", []))
    assert {"Homepage", "Documentation", "Source", "Issues", "Changelog"} <= set(urls)
    assert "Operating System :: POSIX :: Linux" in meta.get_all("Classifier", [])
    requires: list[str] = meta.get_all("Requires-Dist", [])
    assert "uv<0.14,>=0.13" in requires
    assert "docker>=7.0; extra == 'docker'" in requires
    assert not [r for r in requires if r.startswith("docker") and "extra" not in r]
    assert len(meta.get_payload()) < 15 * 1024  # the README as the index page
    with tarfile.open(sdist) as archive:
        names = {n.split("/", 1)[1] for n in archive.getnames() if "/" in n}
    assert {"LICENSE", "CHANGELOG.md", "CONTRIBUTING.md", "mkdocs.yml", "tasks/gen_docs.py"} <= names
