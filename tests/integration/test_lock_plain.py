"""A lock installed by the plain tool alone, with no verl-setup on PATH, then `verify`.

The cpu row (verl 0.9.1, torch 2.11.0 from PyPI) in both formats, by uv's binary called directly:
`uv pip sync LOCK` and `uv pip sync pylock.cpu.toml` (~10 s each from a warm uv cache, which
hardlinks). pip is tested on the tiny matrix (the cpu row is 5.4 GB that pip copies, not links):
pip 23.0.1 (Debian 12's) and the newest pip, each from the index into a throwaway venv. The cpu
row itself under pip 23.0.1 and 26.3 was run by hand (README, "Locks a plain tool installs"). A
row on an extra index is a stand-in served from 127.0.0.1 (PyTorch's index is out of reach here).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.integration.test_install import TINY, TINY_MATRIX, cli, tiny_env
from tests.integration.test_lock import lock
from verl_setup.environment.lock import OLDEST_PIP, read_lock
from verl_setup.util.uvbin import find_uv

pytestmark = [pytest.mark.network, pytest.mark.slow]

PYENV = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
OURS = str(Path(find_uv()).parent)  # the venv whose bin/ holds verl-setup (and the uv it bundles)


def plain_env(**more: str) -> dict[str, str]:
    """The user's environment with verl-setup's venv off PATH, no VERL_SETUP_* and no pip config
    of this machine's own (a find-links folder, extra indexes): what a plain tool sees."""
    path = os.pathsep.join(p for p in os.environ.get("PATH", os.defpath).split(os.pathsep) if p != OURS)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VERL_SETUP_", "PIP_", "VIRTUAL_ENV"))}
    keep = {k: os.environ[k] for k in ("PIP_CERT",) if k in os.environ}
    return {
        **env,
        **keep,
        "PATH": path,
        "PIP_CONFIG_FILE": os.devnull,
        "UV_PYTHON_DOWNLOADS": "never",
        **more,
    }


def run(argv: list[str], env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout, check=False)


def python_311() -> Path:
    found = sorted(PYENV.glob("3.11.*/bin/python3"), key=lambda p: [int(x) for x in p.parts[-3].split(".")])
    if not found:
        pytest.skip("needs a CPython 3.11 under pyenv (the cpu row's 3.11, Debian 12's minor)")
    return found[-1]


def plain_venv(path: Path, python: Path, env: dict[str, str]) -> Path:
    made = run([find_uv(), "venv", "--python", str(python), str(path)], env)
    assert made.returncode == 0, made.stderr
    return path / "bin" / "python"


def test_plain_env_really_has_no_verl_setup_on_path() -> None:
    assert shutil.which("verl-setup", path=plain_env()["PATH"]) is None


def test_the_cpu_row_locks_in_both_formats_and_each_installs_with_plain_uv_and_verifies(
    tmp_path: Path,
) -> None:
    """One test, so that xdist resolves the cpu row once per format (a module fixture would be made
    again on each worker)."""
    python = python_311()
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERL_SETUP_")}
    env["UV_PYTHON_DOWNLOADS"] = "never"
    requirements, pylock = tmp_path / "cpu.lock", tmp_path / "pylock.cpu.toml"
    for out, flags in ((requirements, ()), (pylock, ("--format", "pylock"))):
        argv = ["lock", "--no-gpu", "--python", python.parts[-3], "--out", str(out), *flags]
        result = cli(*argv, env=env, timeout=900)
        assert result.returncode == 0, result.stderr
    assert read_lock(requirements).fields["install-uv"] == "uv pip sync <this file>"
    assert read_lock(pylock).kind == "pylock"
    assert {(p.name, p.version) for p in read_lock(requirements).pins} == {
        (p.name, p.version) for p in read_lock(pylock).pins
    }
    facts = ("row", "python", "platform", "uv", "matrix-sha256")
    assert {k: read_lock(pylock).fields[k] for k in facts} == {
        k: read_lock(requirements).fields[k] for k in facts
    }
    plain = plain_env()
    for locked in (requirements, pylock):
        venv = tmp_path / f"plain-{locked.name}"
        try:
            target = plain_venv(venv, python, plain)
            # The header's own command, with nothing of verl-setup's: uv's binary, its cache, the lock.
            synced = run([find_uv(), "pip", "sync", "--python", str(target), str(locked)], plain)
            assert synced.returncode == 0, synced.stderr
            verified = cli("verify", "--prefix", str(venv), "--lock", str(locked), "--no-import", env=plain)
            assert verified.returncode == 0, verified.stdout + verified.stderr
            pins = len(read_lock(locked).pins)
            assert pins > 150
            assert f"{pins} of {pins} expected distributions match" in verified.stdout
        finally:
            shutil.rmtree(venv, ignore_errors=True)


@pytest.fixture(scope="module")
def tiny_lock(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One tiny-matrix lock (row tiny-new) for pyenv's 3.11, shared by the pip versions."""
    locked = tmp_path_factory.mktemp("tiny-lock") / "tiny.lock"
    lock(locked, "--python", python_311().parts[-3], matrix=TINY_MATRIX)
    return locked


@pytest.mark.parametrize("pip", [OLDEST_PIP, "newest"])
def test_a_lock_installs_with_pip_from_its_oldest_supported_version_to_the_newest(
    pip: str, tiny_lock: Path, tmp_path: Path
) -> None:
    """The header's pip command, `pip install --no-deps -r LOCK`, with pip from the index."""
    locked = tiny_lock
    python = python_311()
    env = plain_env()
    venv = tmp_path / "pip-venv"
    made = run([str(python), "-m", "venv", str(venv)], env)
    assert made.returncode == 0, made.stderr
    pip_exe = str(venv / "bin" / "pip")
    spec = "pip" if pip == "newest" else f"pip=={pip}"
    got = run([pip_exe, "install", "--quiet", "--upgrade", spec], env)
    assert got.returncode == 0, got.stderr
    version = run([pip_exe, "--version"], env).stdout.split()[1]
    if pip != "newest":
        assert version == pip
    # The stand-in verl and torch come from the tiny matrix's folder, as uv found them.
    installed = run(
        [pip_exe, "install", "--no-deps", "--find-links", str(TINY / "wheels"), "-r", str(locked)], env
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    verified = cli("verify", "--prefix", str(venv), "--lock", str(locked), "--no-import", env=tiny_env())
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "4 of 4 expected distributions match" in verified.stdout


def test_a_row_on_an_extra_index_keeps_it_in_the_body_so_plain_uv_and_pip_find_its_torch(
    tmp_path: Path,
) -> None:
    """A stand-in for a row on PyTorch's index (out of reach here): torch only on an index served
    from 127.0.0.1, verl only in a folder, six and idna on the default index."""
    from tests.integration.local_index import serve  # noqa: PLC0415

    folder = tmp_path / "links"
    folder.mkdir()
    shutil.copy(TINY / "wheels" / "verl-0.0.2+tiny-py3-none-any.whl", folder)
    with serve(tmp_path / "index") as index:
        index.upload("torch", "0.0.2+tiny", date="2026-01-01")
        matrix = tmp_path / "m" / "verl.yaml"
        matrix.parent.mkdir()
        text = TINY_MATRIX.read_text().replace(
            "schema: 1\n",
            f"schema: 1\nindexes:\n  stand-in-torch:\n    url: {index.url}\n    note: test\n",
            1,
        )
        matrix.write_text(
            text.replace(
                'torch: {version: "0.0.2+tiny", cuda: null, index: default}',
                ('torch: {version: "0.0.2+tiny", cuda: null, index: stand-in-torch}'),
            )
        )
        locked = tmp_path / "indexed.lock"
        env = {**tiny_env(), "UV_FIND_LINKS": str(folder)}
        made = cli(
            "lock", "--matrix", str(matrix), "--python", python_311().parts[-3], "--out", str(locked), env=env
        )
        assert made.returncode == 0, made.stderr
        body = locked.read_text().split("\n# sha256: ", 1)[1]
        assert f"\n--extra-index-url {index.url}\n--only-binary :all:\n" in body
        assert (
            "# install-uv: uv pip sync --index-strategy unsafe-best-match <this file>" in locked.read_text()
        )
        plain = plain_env(UV_CACHE_DIR=str(tmp_path / "uv-cache"))
        without = tmp_path / "without-index.txt"  # the body as format 3 wrote it: the index in a comment only
        without.write_text(locked.read_text().replace(f"--extra-index-url {index.url}\n", ""))

        def uv_sync(lock_file: Path) -> subprocess.CompletedProcess[str]:
            venv = tmp_path / f"uv-{lock_file.stem}"
            target = plain_venv(venv, python_311(), plain)
            argv = [
                find_uv(),
                "pip",
                "sync",
                "--python",
                str(target),
                "--index-strategy",
                "unsafe-best-match",
            ]
            return run([*argv, "--find-links", str(folder), str(lock_file)], plain)

        assert uv_sync(without).returncode != 0  # no torch 0.0.2+tiny without the index
        synced = uv_sync(locked)
        assert synced.returncode == 0, synced.stderr
        verified = cli(
            "verify", "--prefix", str(tmp_path / "uv-indexed"), "--lock", str(locked), "--no-import"
        )
        assert verified.returncode == 0, verified.stdout + verified.stderr

        venv = tmp_path / "pip-venv"
        assert run([str(python_311()), "-m", "venv", str(venv)], plain).returncode == 0
        pip_exe = str(venv / "bin" / "pip")
        installed = run(
            [pip_exe, "install", "--no-deps", "--find-links", str(folder), "-r", str(locked)], plain
        )
        assert installed.returncode == 0, installed.stdout + installed.stderr
        verified = cli("verify", "--prefix", str(venv), "--lock", str(locked), "--no-import")
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert "4 of 4 expected distributions match" in verified.stdout
