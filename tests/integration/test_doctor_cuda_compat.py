"""doctor cuda on the forward-compatibility path: which libcuda a process really loads. There is
no NVIDIA driver here, so a stand-in libcuda.so.1 is compiled with gcc (it answers only
cuDriverGetVersion) and put where cuda-compat puts its library; the dynamic loader, /proc/self/maps
and the finding are the real code path."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from verl_setup.doctor.checks.cuda import compat_in_use, loaded_libcuda
from verl_setup.matrix.load import load_matrix
from verl_setup.util.versions import DriverVersion

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc for the stand-in libcuda")


def stand_in_libcuda(folder: Path, api: int) -> Path:
    folder.mkdir(parents=True)
    source = folder / "stub.c"
    source.write_text(f"int cuDriverGetVersion(int *v) {{ *v = {api}; return 0; }}\n")
    lib = folder / "libcuda.so.1"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(source)], check=True)
    return lib


def env_with(folder: Path) -> dict[str, str]:
    return {**os.environ, "LD_LIBRARY_PATH": str(folder)}


def test_the_compat_libcuda_first_on_the_path_is_the_one_loaded_and_passes(tmp_path: Path) -> None:
    compat = tmp_path / "usr/local/cuda-13.0/compat"
    lib = stand_in_libcuda(compat, 13000)
    loaded = loaded_libcuda(Path(sys.executable), env_with(compat))
    assert loaded == (str(lib), 13000)
    rules = load_matrix().cuda
    (finding,) = compat_in_use(loaded, rules, DriverVersion.parse("535.129.03"), "13.0")
    assert finding.status == "pass"
    assert "driver API 13.0" in finding.message


def test_the_host_libcuda_too_old_for_torch_fails_and_says_how_to_load_the_compat_one(tmp_path: Path) -> None:
    host = tmp_path / "usr/lib/x86_64-linux-gnu"
    stand_in_libcuda(host, 12020)
    loaded = loaded_libcuda(Path(sys.executable), env_with(host))
    assert loaded is not None
    rules = load_matrix().cuda
    (finding,) = compat_in_use(loaded, rules, DriverVersion.parse("535.129.03"), "13.0")
    assert finding.status == "fail"
    assert "driver API 12.2" in finding.message
    assert finding.remedy is not None
    assert "--policy forward" in finding.remedy


def test_no_libcuda_at_all_reports_nothing_loaded(tmp_path: Path) -> None:
    if Path("/proc/driver/nvidia/version").exists():
        pytest.skip("this machine has an NVIDIA driver")
    assert loaded_libcuda(Path(sys.executable), env_with(tmp_path)) is None
