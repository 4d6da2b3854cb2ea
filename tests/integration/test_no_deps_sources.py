"""Packages installed last without their dependencies, and from a direct git reference: the way
the Megatron rows carry Megatron-Bridge and mbridge (git 641a5a0). Git hosts cannot be reached
from here, so the git source is a stand-in: a local repository (file://) holding a package whose
own requirement cannot be installed, which a deps-free install must never ask for."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.integration.test_install import TINY, cli, tiny_env

pytestmark = [pytest.mark.network, pytest.mark.slow]


def git(repo: Path, *argv: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    done = subprocess.run(
        ["git", "-C", str(repo), *argv],
        capture_output=True,
        text=True,
        check=True,
        env={**env, "PATH": "/usr/bin:/bin"},
    )
    return done.stdout.strip()


def stand_in_repo(root: Path) -> tuple[Path, str]:
    """A git repository of a package `mbridge` 0.0.7 that requires a release no index has."""
    repo = root / "mbridge"
    (repo / "mbridge").mkdir(parents=True)
    (repo / "mbridge" / "__init__.py").write_text('AUTO = "stand-in mbridge"\n')
    (repo / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "mbridge"\nversion = "0.0.7"\n'
        'dependencies = ["megatron-core==0.0.0.999"]\n'
        '[tool.setuptools]\npackages = ["mbridge"]\n'
    )
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "stand-in")
    return repo, git(repo, "rev-parse", "--short=7", "HEAD")


def test_a_git_source_installs_last_without_its_dependencies_and_the_lock_leaves_it_to_the_step(
    tmp_path: Path,
) -> None:
    repo, rev = stand_in_repo(tmp_path)
    matrix = tmp_path / "matrix" / "verl.yaml"
    matrix.parent.mkdir()
    text = (TINY / "verl.yaml").read_text()
    start = text.index("  - id: tiny-new")
    end = text.index("  - id: ", start + 5)
    row = (
        text[start:end]
        .replace("id: tiny-new", "id: tiny-git")
        .replace('      idna: "3.10"\n', '      idna: "3.10"\n      mbridge: "0.0.7"\n')
        .replace(
            "    requires:\n",
            f'    no_deps: [mbridge]\n    sources:\n      mbridge: "git+{repo.as_uri()}@{rev}"\n'
            "    requires:\n",
            1,
        )
        .replace(
            '      idna: "PyPI: pure-Python wheel, 70 KB"\n',
            '      idna: "PyPI: pure-Python wheel, 70 KB"\n'
            '      mbridge: "test fixture: a local git stand-in"\n'
            '      no_deps: "test fixture: its requirement is on no index"\n'
            '      sources: "test fixture: file:// git repository"\n',
        )
    )
    matrix.write_text(text[:end] + row + text[end:])
    shutil.copy(TINY.parent.parent.parent / "matrices" / "cuda.yaml", matrix.parent / "cuda.yaml")
    prefix = tmp_path / "env"
    result = cli(
        "install", "--matrix", str(matrix), "--row", "tiny-git", "--prefix", str(prefix), env=tiny_env()
    )
    assert result.returncode == 0, result.stderr
    record = json.loads((prefix / "verl-setup.json").read_text())
    assert record["distributions"]["mbridge"] == "0.0.7"
    assert "megatron-core" not in record["distributions"]  # its own requirement was never asked for
    (last,) = [s for s in record["recipe"] if s["step"] == "no-deps"]
    assert f"mbridge @ git+{repo.as_uri()}@{rev}" in last["argv"]
    assert "--no-deps" in last["argv"]
    lock = tmp_path / "verl.lock"
    locked = cli("lock", "--matrix", str(matrix), "--row", "tiny-git", "--out", str(lock), env=tiny_env())
    assert locked.returncode == 0, locked.stderr
    header, body = lock.read_text().split("\n# sha256: ", 1)
    assert "mbridge" not in body  # installed after the lock, by its own step, which the header names
    (then,) = [line for line in header.splitlines() if line.startswith("# then: ")]
    assert f"mbridge @ git+{repo.as_uri()}@{rev}" in then
    assert "--no-deps" in then
    again = cli(
        "install", "--matrix", str(matrix), "--row", "tiny-git", "--lock", str(lock),
        "--prefix", str(tmp_path / "e2"), env=tiny_env(),
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert (
        json.loads((tmp_path / "e2" / "verl-setup.json").read_text())["distributions"]["mbridge"] == "0.0.7"
    )
