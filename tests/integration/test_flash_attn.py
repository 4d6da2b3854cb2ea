"""flash-attn through the real code path, against local stand-ins (GitHub's release assets cannot
be reached from here): a wheel with the real asset's file name served over HTTP from 127.0.0.1,
and an sdist whose setup.py imports torch the way flash-attention's does. The tiny matrix's two
GPU rows point at them; planning names a GPU host with flags."""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import json_data
from tests.integration.test_install import TINY, cli, leftovers, tiny_env
from verl_setup.environment.uv import explain_failure
from verl_setup.util.uvbin import find_uv

pytestmark = [pytest.mark.network, pytest.mark.slow]

WHEEL = "flash_attn-2.8.3+cu12torch2.8cxx11abiTRUE-cp312-cp312-linux_x86_64.whl"
NVCC_OUTPUT = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia" / "nvcc-13.0.88-version.txt"
WHEEL_HOST = ("--driver", "570.124.06", "--gpu", "H100", "--engine", "vllm", "--python", "3.12.1")
BUILD_HOST = ("--driver", "580.95.05", "--gpu", "H100", "--engine", "sglang", "--python", "3.12.1")


REQUESTS: list[str] = []


class _Logged(http.server.SimpleHTTPRequestHandler):
    """Serves the release folder; records each path asked for instead of printing it."""

    def log_message(self, *_args: object) -> None:
        REQUESTS.append(self.path)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[str]]]:
    """The tiny matrix pointed at a 127.0.0.1 server holding the stand-in wheel; and its request log."""
    root = tmp_path_factory.mktemp("release")
    (root / "v2.8.3").mkdir()
    shutil.copy(TINY / "served" / WHEEL, root / "v2.8.3" / WHEEL)
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Logged, directory=str(root))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    matrix = root / "matrix" / "verl.yaml"
    matrix.parent.mkdir()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    matrix.write_text((TINY / "verl.yaml").read_text().replace("http://@BASE@", base))
    try:
        yield matrix, REQUESTS
    finally:
        server.shutdown()


@pytest.fixture
def nvcc(tmp_path: Path) -> Path:
    """A CUDA_HOME whose bin/nvcc prints a recorded real `nvcc --version` (CUDA 13.0)."""
    home = tmp_path / "cuda"
    (home / "bin").mkdir(parents=True)
    script = home / "bin" / "nvcc"
    script.write_text(f"#!/bin/sh\ncat '{NVCC_OUTPUT}'\n")
    script.chmod(0o755)
    return home


def install(matrix: Path, prefix: Path, *flags: str, **env: str) -> subprocess.CompletedProcess[str]:
    return cli("install", "--matrix", str(matrix), "--prefix", str(prefix), *flags, env=tiny_env(**env))


def manifest(prefix: Path) -> dict[str, object]:
    return dict(json.loads((prefix / "verl-setup.json").read_text()))


def test_a_matching_prebuilt_wheel_is_fetched_after_torch_and_verified(
    served: tuple[Path, list[str]], tmp_path: Path
) -> None:
    matrix, requests = served
    prefix = tmp_path / "env"
    result = install(matrix, prefix, *WHEEL_HOST, "--json")
    assert result.returncode == 0, result.stderr
    assert f"/v2.8.3/{WHEEL}" in requests
    record = manifest(prefix)
    assert record["flash_attn"] == {
        "version": "2.8.3",
        "mode": "wheel",
        "reason": "prebuilt for torch 2.8, CUDA 12, cp312, C++11 ABI TRUE, from flash-attn-releases",
    }
    taken = record["torch_extensions"]["flash-attn"]  # type: ignore[index]
    assert (taken["source"], taken["url"].rsplit("/", 1)[-1]) == ("flash-attn-releases", WHEEL)
    assert record["distributions"]["flash-attn"] == "2.8.3"  # type: ignore[index]
    steps = [s["step"] for s in record["recipe"]]  # type: ignore[attr-defined]
    assert steps == ["venv", "verl", "flash-attn"]
    probe = {m["module"]: m["outcome"] for m in json_data(result.stdout)["import"]["modules"]}
    assert probe["flash_attn"] == "ok"
    assert probe["vllm.entrypoints.llm"] == "ok"


def test_flash_attn_built_in_isolation_fails_for_want_of_torch_and_says_so(tmp_path: Path) -> None:
    """The most reported verl install failure, reproduced with the stand-in sdist, and our diagnosis."""
    uv, venv = find_uv(), tmp_path / "v"
    env = tiny_env(UV_CACHE_DIR=str(tmp_path / "cache"))  # uv caches a wheel it built: none here yet
    python = next((Path.home() / ".pyenv" / "versions").glob("3.12.*/bin/python3"))
    subprocess.run([uv, "venv", "-q", "--python", str(python), str(venv)], check=True, env=env)
    out = subprocess.run(
        [
            uv,
            "pip",
            "install",
            "--python",
            str(venv / "bin/python"),
            "torch==2.11.99+tiny",
            "flash-attn==0.0.1+tiny",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=300,
    )
    assert out.returncode != 0
    assert "No module named 'torch'" in out.stderr
    assert explain_failure(out.stderr).startswith(
        "flash-attn==0.0.1+tiny builds against torch, and uv built it in an isolated environment"
    )


def test_build_flash_attn_compiles_against_the_installed_torch_with_max_jobs(
    served: tuple[Path, list[str]], tmp_path: Path, nvcc: Path
) -> None:
    matrix, _ = served
    prefix = tmp_path / "env"
    result = install(  # a cache of its own: uv would reuse a flash-attn another test built
        matrix,
        prefix,
        *BUILD_HOST,
        "--build-flash-attn",
        CUDA_HOME=str(nvcc),
        UV_CACHE_DIR=str(tmp_path / "c"),
    )
    assert result.returncode == 0, result.stderr
    assert "built from source with nvcc 13.0 and MAX_JOBS=" in result.stderr
    built = (prefix / "lib/python3.12/site-packages/flash_attn/_built.py").read_text()
    jobs = next(line for line in result.stderr.splitlines() if "MAX_JOBS=" in line).split("MAX_JOBS=")[1]
    assert built == f"TORCH = '2.11.99+tiny'\nMAX_JOBS = '{jobs.split()[0]}'\n"
    steps = [s["step"] for s in manifest(prefix)["recipe"]]  # type: ignore[attr-defined]
    assert steps == ["venv", "verl", "flash-attn-build-requires", "flash-attn"]


def test_no_wheel_and_no_choice_is_refused_in_one_line_and_nothing_changes(
    served: tuple[Path, list[str]], tmp_path: Path
) -> None:
    matrix, _ = served
    prefix = tmp_path / "env"
    first = install(matrix, prefix, *BUILD_HOST, "--without", "flash-attn")
    assert first.returncode == 0, first.stderr
    assert manifest(prefix)["flash_attn"]["mode"] == "without"  # type: ignore[index]
    before = (prefix / "verl-setup.json").read_bytes()
    result = install(matrix, prefix, *BUILD_HOST, "--json")
    assert result.returncode == 4
    errors = [line for line in result.stderr.splitlines() if line.startswith("verl-setup: error:")]
    assert len(errors) == 1
    assert "has no prebuilt wheel for torch 2.11.99+tiny in any enabled source" in errors[0]
    assert "`verl-setup wheelhouse build --row tiny-fa-build`" in errors[0]
    assert "--build-flash-attn to compile it" in errors[0]
    assert "--without flash-attn" in errors[0]
    assert "nothing was changed" in errors[0]
    doc = json.loads(result.stdout)
    assert (doc["ok"], doc["error"]["code"]) == (False, 4)
    assert (prefix / "verl-setup.json").read_bytes() == before
    assert leftovers(prefix) == []


def test_a_build_without_nvcc_is_refused_before_anything_changes(
    served: tuple[Path, list[str]], tmp_path: Path
) -> None:
    matrix, _ = served
    prefix = tmp_path / "env"
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "nvcc").exists())
    result = install(matrix, prefix, *BUILD_HOST, "--build-flash-attn", PATH=path, CUDA_HOME=str(tmp_path))
    assert result.returncode == 4
    assert "needs nvcc of CUDA 13.0" in result.stderr
    assert not prefix.exists()
    assert leftovers(prefix) == []


def test_a_lock_carries_the_wheel_with_its_hash_and_installs_as_it_stands(
    served: tuple[Path, list[str]], tmp_path: Path
) -> None:
    matrix, _ = served
    lock = tmp_path / "verl.lock"
    made = cli("lock", "--matrix", str(matrix), *WHEEL_HOST, "--out", str(lock), env=tiny_env())
    assert made.returncode == 0, made.stderr
    text = lock.read_text()
    digest = hashlib.sha256((TINY / "served" / WHEEL).read_bytes()).hexdigest()
    assert "# flash-attn: wheel 2.8.3" in text
    assert "flash-attn @ http://127.0.0.1:" in text
    assert f"--hash=sha256:{digest}" in text
    prefix = tmp_path / "env"
    result = install(matrix, prefix, *WHEEL_HOST, "--lock", str(lock))
    assert result.returncode == 0, result.stderr
    assert manifest(prefix)["distributions"]["flash-attn"] == "2.8.3"  # type: ignore[index]
    assert cli("verify", "--prefix", str(prefix), "--lock", str(lock), env=tiny_env()).returncode == 0


def test_a_lock_made_for_a_build_needs_the_build_flag_and_then_builds_after_the_sync(
    served: tuple[Path, list[str]], tmp_path: Path, nvcc: Path
) -> None:
    matrix, _ = served
    lock = tmp_path / "verl.lock"
    made = cli(
        "lock", "--matrix", str(matrix), *BUILD_HOST, "--build-flash-attn", "--out", str(lock),
        env=tiny_env(CUDA_HOME=str(nvcc)),
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert "# flash-attn: build 0.0.1+tiny" in lock.read_text()
    assert "flash-attn" not in lock.read_text().split("# sha256: ")[1]
    prefix = tmp_path / "env"
    refused = install(matrix, prefix, *BUILD_HOST, "--lock", str(lock))
    assert refused.returncode == 4
    assert "pass --build-flash-attn" in refused.stderr
    result = install(
        matrix, prefix, *BUILD_HOST, "--lock", str(lock), "--build-flash-attn", CUDA_HOME=str(nvcc)
    )
    assert result.returncode == 0, result.stderr
    steps = [s["step"] for s in manifest(prefix)["recipe"]]  # type: ignore[attr-defined]
    assert steps == ["venv", "lock", "flash-attn-build-requires", "flash-attn"]
