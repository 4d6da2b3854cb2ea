"""`verl-setup wheelhouse build` for real: a stand-in flash-attn sdist (a real CUDA extension,
tests/fixtures/wheelhouse/flash-attn-standin) compiled against row verl0.9-vllm0.24.0's torch 2.11.0
with nvcc from NVIDIA's PyPI wheels (no GPU, the host toolkit ignored: --nvcc pypi) into a PEP 503
folder; a second run builds nothing; uv installs the wheel from the folder and the ABI check passes
it beside torch 2.11.0 and names both torches and both CUDA runtimes beside torch 2.6.0.

The built folder is cached in ~/.cache/verl-setup-tests keyed by the stand-in's source and the
builder's code, so CI compiles it only when one of them changes (about 3 minutes on 2 cores).
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import json_data
from tests.integration.torch_ext import CACHE, HEAVY_LOCK, fresh_env, install_wheel, torch_env
from verl_setup.environment.abi import check_environment
from verl_setup.util.elf import SharedObject
from verl_setup.util.uvbin import find_uv
from verl_setup.util.wheelhouse import Wheelhouse

pytestmark = [pytest.mark.network, pytest.mark.slow]

STANDIN = Path(__file__).resolve().parents[1] / "fixtures" / "wheelhouse" / "flash-attn-standin"
BUILDER = Path(__file__).resolve().parents[2] / "installer" / "verl_setup" / "wheelbuild"
ROW = "verl0.9-vllm0.24.0"
WHEEL = "flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl"


def _key() -> str:
    digest = hashlib.sha256()
    for path in sorted([*STANDIN.rglob("*"), *BUILDER.glob("*.py")]):
        if path.is_file():
            digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:12]


def sdist(folder: Path) -> Path:
    """The stand-in packed as flash-attn's real sdist is named and laid out."""
    target = folder / "flash_attn-2.8.3.tar.gz"
    with tarfile.open(target, "w:gz") as tar:
        for path in sorted(STANDIN.rglob("*")):
            tar.add(path, arcname=f"flash_attn-2.8.3/{path.relative_to(STANDIN)}", recursive=False)
        info = tarfile.TarInfo("flash_attn-2.8.3/PKG-INFO")
        text = b"Metadata-Version: 2.1\nName: flash-attn\nVersion: 2.8.3\n"
        info.size = len(text)
        tar.addfile(info, io.BytesIO(text))
    return target


def build(out: Path, source: Path, *, heavy: bool = True) -> subprocess.CompletedProcess[str]:
    """The command as a user runs it; `heavy` (a compile to come) waits for the machine-wide lock."""
    argv = [
        sys.executable, "-m", "verl_setup", "wheelhouse", "build", "--row", ROW, "--python", "3.12",
        "--out", str(out), "--only", "flash-attn", "--source", f"flash-attn={source}",
        "--nvcc", "pypi", "--arch-list", "8.0", "--jobs", "2", "--json",
    ]  # fmt: skip
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    with HEAVY_LOCK.open("w") as lock:
        if heavy:
            fcntl.flock(lock, fcntl.LOCK_EX)
        return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=3600, check=False)


@pytest.fixture(scope="module")
def house(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any] | None]:
    """The built wheelhouse, and the first run's JSON when this run built it (None: from the cache)."""
    torch_env("2.11.0")  # warms uv's cache for the scratch env
    cached = CACHE / f"wheelhouse-{_key()}"
    if (cached / "simple" / "index.html").exists():
        return cached, None
    work = tmp_path_factory.mktemp("wheelhouse")
    out = work / "house"
    done = build(out, sdist(work))
    assert done.returncode == 0, done.stderr[-4000:]
    shutil.rmtree(cached, ignore_errors=True)
    shutil.copytree(out, cached)
    return cached, json_data(done.stdout)


def test_the_build_compiles_a_cuda_extension_with_pypi_nvcc_into_a_pep503_folder(
    house: tuple[Path, dict[str, Any] | None],
) -> None:
    root, first = house
    if first is not None:
        (built,) = first["wheels"]
        assert built["status"] == "built"
        assert built["name"] == "flash-attn"
    assert not list(root.glob(".scratch-*"))  # the scratch environment is gone
    wheel = root / "wheels" / WHEEL
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    page = (root / "simple" / "flash-attn" / "index.html").read_text()
    assert f'<a href="../../wheels/{WHEEL}#sha256={sha}">{WHEEL}</a>' in page
    manifest = json.loads((root / "wheels" / f"{WHEEL}.json").read_text())
    assert {k: manifest[k] for k in ("schema", "name", "version", "torch", "cuda", "python", "abi")} == {
        "schema": 1,
        "name": "flash-attn",
        "version": "2.8.3",
        "torch": "2.11.0",
        "cuda": "13.0",
        "python": "cp312",
        "abi": True,
    }
    assert manifest["arch_list"] == ["8.0"]
    assert manifest["sha256"] == sha
    assert manifest["built_with"]["nvcc"] == "13.0.88"
    assert manifest["built_with"]["nvcc_source"] == "PyPI (cuda-toolkit wheels)"
    assert manifest["source"]["name"] == "flash-attn"
    assert len(manifest["source"]["sha256"]) == 64


def test_a_second_run_builds_nothing(house: tuple[Path, dict[str, Any] | None], tmp_path: Path) -> None:
    root, _ = house
    again = tmp_path / "again"
    shutil.copytree(root, again)
    done = build(again, tmp_path / "no-such-source.tar.gz", heavy=False)  # the source is not even read
    assert done.returncode == 0, done.stderr
    (kept,) = json_data(done.stdout)["wheels"]
    assert kept["status"] == "present"
    assert "in the wheelhouse" in done.stderr
    assert [e.wheel.name for e in Wheelhouse(again).entries(verify=True)] == [WHEEL]


def test_uv_installs_it_from_the_folder_and_the_abi_check_passes_it(
    house: tuple[Path, dict[str, Any] | None], tmp_path: Path
) -> None:
    root, _ = house
    env = fresh_env("2.11.0", tmp_path / "env")
    subprocess.run(
        [find_uv(), "pip", "install", "-q", "--python", str(env / "bin/python"), "--no-deps",
         "--index-url", (root / "simple").as_uri(), "flash-attn==2.8.3"],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    report = check_environment(env / "bin" / "python")
    assert report.ok, [f.message for f in report.findings]
    (ext,) = (p for p in report.checked if p.name.startswith("flash_attn_2_cuda"))
    with SharedObject(ext) as obj:
        assert "libcudart.so.13" in obj.needed
    imported = subprocess.run(
        [str(env / "bin/python"), "-c", "import torch, flash_attn_2_cuda as m; print(m.scaled_add.__doc__)"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    assert "a + alpha * b on the GPU" in imported.stdout


def test_beside_torch_2_6_the_check_names_both_torches_and_both_cuda_runtimes(
    house: tuple[Path, dict[str, Any] | None], tmp_path: Path
) -> None:
    root, _ = house
    torch_env("2.6.0")
    env = fresh_env("2.6.0", tmp_path / "env")
    install_wheel(env, root / "wheels" / WHEEL)
    findings = {f.kind: f for f in check_environment(env / "bin" / "python").findings}
    assert set(findings) == {"torch-symbols", "cuda-runtime"}
    assert (
        "was built against torch 2.11.0, this environment has torch 2.6.0 (CUDA 12.4)"
        in findings["torch-symbols"].message
    )
    runtime = findings["cuda-runtime"]
    assert (runtime.cuda_needed, runtime.torch_cuda) == (13, 12)
    assert "needs the CUDA 13 runtime (libcudart.so.13)" in runtime.message
